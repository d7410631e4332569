"""Pure RL math, one stream (vmap outside): advantages (GAE), V-trace, action
distributions, running normalizers, replay buffers and the optax optimizer
built from traced hyperparameters."""
