"""Pure RL math, one stream (vmap outside): advantages (GAE), action
distributions, running normalizers, replay buffers and the optax optimizer
built from traced hyperparameters."""
