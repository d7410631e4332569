"""Pure RL math, one stream (vmap outside): advantages (GAE), V-trace,
distributional value targets and losses (C51, quantile regression), action
distributions, running normalizers, replay buffers and the optax optimizer
built from traced hyperparameters."""
