"""gymnax 1.x behind the jaxrl contract.

gymnax 1.x's ``Environment.step`` already auto-resets and returns
``terminated`` and ``truncated`` separately with the pre-reset observation in
``info["final_observation"]``; this adapter only normalizes dtypes and spaces.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jaxrl.envs.core import Box, Discrete, Env

__all__ = ["GymnaxEnv"]

# Returns at which the usual benchmark counts a task as solved (Gym's table).
SOLVED_RETURNS = {
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "MountainCar-v0": -110.0,
    "MountainCarContinuous-v0": 90.0,
}


def _space(space: Any) -> Discrete | Box:
    from gymnax.environments import spaces

    if isinstance(space, spaces.Discrete):
        return Discrete(int(space.n))
    if isinstance(space, spaces.Box):
        shape = tuple(int(s) for s in space.shape)
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape).copy()
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape).copy()
        return Box(low, high, shape)
    raise TypeError(f"unsupported gymnax action space {space!r}: use Discrete or Box")


class GymnaxEnv(Env):
    """Wrap a gymnax ``Environment`` instance (built-in or user subclass)."""

    def __init__(self, env: Any, params: Any = None, name: str | None = None):
        self.env = env
        self.default_params = env.default_params if params is None else params
        self.name = name or getattr(env, "name", type(env).__name__)
        self.action_space = _space(env.action_space(self.default_params))
        obs, _ = jax.eval_shape(env.reset_env, jax.random.key(0), self.default_params)
        self.obs_shape = tuple(int(s) for s in obs.shape)
        limit = getattr(self.default_params, "max_steps_in_episode", None)
        self.max_episode_steps = int(limit) if limit is not None else None
        self.solved_return = SOLVED_RETURNS.get(self.name)

    def _reset(self, key: jax.Array, params: Any) -> tuple[Any, jax.Array]:
        obs, inner = self.env.reset(key, params)
        return inner, obs

    def _step(self, key, inner, action, params):
        if isinstance(self.action_space, Discrete):
            action = action.astype(np.int32)
        obs, inner, reward, terminated, truncated, info = self.env.step(key, inner, action, params)
        return inner, obs, reward, terminated, truncated, info["final_observation"]
