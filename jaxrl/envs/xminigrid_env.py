"""XLand-MiniGrid's MiniGrid tasks behind the jaxrl contract:
``env=xminigrid:MiniGrid-Empty-5x5`` (``pip install 'jaxrl[xminigrid]'``).

XLand-MiniGrid's ``step`` never resets; a ``LAST`` time step with discount 0
is a termination (the goal), one with discount 1 its ``max_steps`` time limit.
Observations are the agent's egocentric view ``[V, V, 2]`` (tile, colour) as
float32. The XLand meta-RL ids need a ruleset benchmark downloaded and are not
listed. Its ``EnvParams`` (grid size, view size) fix array shapes, so they are
not jaxrl env parameters; ``max_steps`` is the env's time limit.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl.envs.core import Discrete
from jaxrl.envs.suite import NoParams, SuiteEnv, load, suite_backend, suite_id, unknown

__all__ = ["BACKEND", "XMINIGRID_IDS", "XMiniGridEnv"]

# xminigrid 0.9's MiniGrid ids (xminigrid.registered_environments()), listed without importing it.
XMINIGRID_IDS = tuple(
    ["MiniGrid-BlockedUnlockPickUp"]
    + [f"MiniGrid-DoorKey-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"MiniGrid-Empty-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"MiniGrid-EmptyRandom-{s}" for s in ("5x5", "6x6", "8x8", "16x16")]
    + ["MiniGrid-FourRooms", "MiniGrid-LockedRoom"]
    + [f"MiniGrid-MemoryS{s}" for s in (8, 16, 32, 64, 128)]
    + ["MiniGrid-Playground", "MiniGrid-Unlock", "MiniGrid-UnlockPickUp"]
)

_LAST = 2  # xminigrid.types.StepType.LAST


class XMiniGridEnv(SuiteEnv):
    """An XLand-MiniGrid ``Environment`` with its ``EnvParams`` (its raw state is its ``TimeStep``)."""

    def __init__(self, env: Any, env_params: Any, name: str):
        self.env = env
        self.env_params = env_params
        self.name = name
        self.default_params = NoParams()
        self.action_space = Discrete(int(env.num_actions(env_params)))
        timestep = jax.eval_shape(env.reset, env_params, jax.random.key(0))
        self.obs_shape = tuple(int(s) for s in timestep.observation.shape)
        self.max_episode_steps = int(env_params.max_steps)

    def _start(self, key, params):
        timestep = self.env.reset(self.env_params, key)
        return timestep, jnp.asarray(timestep.observation, jnp.float32)

    def _advance(self, key, raw, action, params):
        del key  # xminigrid keeps its randomness in its state
        timestep = self.env.step(self.env_params, raw, action)
        last = timestep.step_type == _LAST
        terminated = jnp.logical_and(last, timestep.discount == 0)
        truncated = jnp.logical_and(last, ~terminated)
        return timestep, jnp.asarray(timestep.observation, jnp.float32), timestep.reward, terminated, truncated


def _make(canonical: str, **options: Any) -> XMiniGridEnv:
    name = suite_id(canonical)

    def build() -> XMiniGridEnv:
        import xminigrid

        known = [i for i in xminigrid.registered_environments() if i.startswith("MiniGrid-")]
        if name not in known:
            raise unknown(canonical, "XLand-MiniGrid", known)
        env, env_params = xminigrid.make(name)
        return XMiniGridEnv(env, env_params, canonical)

    return load(canonical, "xminigrid", "xminigrid", "xminigrid", "xminigrid", build)


BACKEND = suite_backend("xminigrid", XMINIGRID_IDS, _make, lambda canonical: "discrete", "xminigrid", "xminigrid")
