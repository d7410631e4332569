"""MuJoCo Playground's DM Control suite behind the jaxrl contract:
``env=playground:CartpoleBalance`` (``pip install 'jaxrl[playground]'``).

Playground's envs have no time limit of their own (its training wrapper adds
one); the adapter counts steps from each reset and truncates at
``env.episode_length`` (default 1000, the suite's), so ``done`` from the env
is a termination (a diverged simulation, a fall) and the limit a truncation,
bootstrapped from the final observation. Physics runs on MJX's JAX
implementation (``impl="jax"``: one XLA program with the rest of the run, on
CPU and GPU); actions are in ``[-1, 1]``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.envs.core import Box
from jaxrl.envs.suite import Clocked, NoParams, SuiteEnv, flatten_obs, load, suite_backend, suite_id, unknown

__all__ = ["BACKEND", "PLAYGROUND_IDS", "PlaygroundEnv"]

# mujoco_playground 0.2's DM Control suite (registry.dm_control_suite.ALL_ENVS).
PLAYGROUND_IDS = (
    "AcrobotSwingup",
    "AcrobotSwingupSparse",
    "BallInCup",
    "CartpoleBalance",
    "CartpoleBalanceSparse",
    "CartpoleSwingup",
    "CartpoleSwingupSparse",
    "CheetahRun",
    "FingerSpin",
    "FingerTurnEasy",
    "FingerTurnHard",
    "FishSwim",
    "HopperHop",
    "HopperStand",
    "HumanoidStand",
    "HumanoidWalk",
    "HumanoidRun",
    "PendulumSwingup",
    "PointMass",
    "ReacherEasy",
    "ReacherHard",
    "SwimmerSwimmer6",
    "WalkerRun",
    "WalkerStand",
    "WalkerWalk",
)


def _obs(obs: Any) -> jax.Array:
    if isinstance(obs, dict) and "state" in obs:  # the policy's entry of a dict observation
        obs = obs["state"]
    return flatten_obs(obs)


class PlaygroundEnv(SuiteEnv):
    """A playground ``MjxEnv`` with a time limit counted by the adapter."""

    def __init__(self, env: Any, name: str, episode_length: int = 1000):
        self.env = env
        self.name = name
        self.default_params = NoParams()
        size = int(env.action_size)
        self.action_space = Box(-np.ones(size, np.float32), np.ones(size, np.float32), (size,))
        state = jax.eval_shape(env.reset, jax.random.key(0))
        self.obs_shape = tuple(int(s) for s in jax.eval_shape(_obs, state.obs).shape)
        self.max_episode_steps = int(episode_length)

    def truncation_period(self, params: Any = None) -> int | None:
        """The adapter's own clock: a truncation exactly ``episode_length`` steps after each reset."""
        if type(self)._advance is not PlaygroundEnv._advance or self.max_episode_steps < 1:
            return None
        return self.max_episode_steps

    def _start(self, key, params):
        state = self.env.reset(key)
        return Clocked(state, jnp.zeros((), jnp.int32)), _obs(state.obs)

    def _advance(self, key, raw, action, params):
        del key  # playground keeps its randomness in its state
        state = self.env.step(raw.state, action)
        t = raw.t + 1
        terminated = state.done > 0
        truncated = jnp.logical_and(t >= self.max_episode_steps, ~terminated)
        return Clocked(state, t), _obs(state.obs), state.reward, terminated, truncated


def _make(canonical: str, episode_length: int = 1000, **options: Any) -> PlaygroundEnv:
    name = suite_id(canonical)
    if name not in PLAYGROUND_IDS:
        raise unknown(canonical, "MuJoCo Playground (DM Control suite)", PLAYGROUND_IDS)

    def build() -> PlaygroundEnv:
        from mujoco_playground import registry

        config = registry.get_default_config(name)
        config.impl = "jax"
        return PlaygroundEnv(registry.load(name, config=config), canonical, episode_length=episode_length)

    return load(canonical, "playground", "mujoco_playground", "playground", "playground", build)


BACKEND = suite_backend(
    "playground", PLAYGROUND_IDS, _make, lambda canonical: "continuous", "mujoco_playground", "MuJoCo Playground"
)
