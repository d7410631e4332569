"""Shared test sizes: a CartPole PPO run that compiles and trains in seconds."""

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
