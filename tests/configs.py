"""Shared test sizes: a CartPole PPO run that compiles and trains in seconds."""

import jax

# XLA:CPU in jax 0.9 reduces each member's arrays in an order that does not
# depend on how many members one program holds (from 8 up), so a member gives
# the same bits in a sweep, on a shard or alone. XLA:CPU in jax 0.11 (what pip
# installs on Python >= 3.12) does for some of them, so there the same member
# agrees to float32 rounding at first and then drifts (RL is chaotic).
BITWISE_ACROSS_MEMBER_COUNTS = jax.__version_info__ < (0, 10)

# 2 chunks of 16 updates of 4 envs × 32 steps, 2 epochs × 2 minibatches, 2 eval episodes
CARTPOLE_TINY = (
    "num_envs=4",
    "total_timesteps=4096",
    "num_evals=2",
    "eval.episodes=2",
    "algo.num_steps=32",
    "algo.num_minibatches=2",
    "algo.update_epochs=2",
)
