"""Navix (MiniGrid in JAX) behind the jaxrl contract: ``env=navix:Navix-DoorKey-5x5-v0``
(``pip install 'jaxrl[navix]'``).

Navix's own ``step`` resets lazily, on the step *after* an episode ended; the
adapter steps with its non-resetting transition (``Environment._step``) and
resets from a fresh state at once, as the contract wants. Navix's step types
tell the ends apart (2 a termination, 1 its ``max_steps`` time limit).
Observations are its default symbolic grid ``[H, W, 3]`` as float32 (a CNN
torso takes them as they are, an MLP flattens them).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from jaxrl.envs.core import Discrete
from jaxrl.envs.suite import NoParams, SuiteEnv, load, suite_backend, suite_id, unknown

__all__ = ["BACKEND", "NAVIX_IDS", "NavixEnv"]

# navix 0.7's registry (navix.registry()), listed without importing navix.
NAVIX_IDS = tuple(
    [f"Navix-Empty-{s}-v0" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"Navix-Empty-Random-{s}-v0" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"Navix-DoorKey-{s}-v0" for s in ("5x5", "6x6", "8x8", "16x16")]
    + [f"Navix-DoorKey-Random-{s}-v0" for s in ("5x5", "6x6", "8x8", "16x16")]
    + ["Navix-FourRooms-v0"]
    + [f"Navix-KeyCorridor{s}-v0" for s in ("S3R1", "S3R2", "S3R3", "S4R3", "S5R3", "S6R3")]
    + [f"Navix-LavaGap{s}-v0" for s in ("S5", "S6", "S7")]
    + [f"Navix-SimpleCrossing{s}-v0" for s in ("S9N1", "S9N2", "S9N3", "S11N5")]
    + [f"Navix-Dynamic-Obstacles-{s}-v0" for s in ("5x5", "5x5-Random", "6x6", "6x6-Random", "8x8", "16x16")]
    + ["Navix-DistShift1-v0", "Navix-DistShift2-v0"]
    + [f"Navix-GoToDoor-{s}-v0" for s in ("5x5", "6x6", "8x8")]
)

_TRUNCATION, _TERMINATION = 1, 2  # navix.environments.environment.StepType


class NavixEnv(SuiteEnv):
    """A navix ``Environment`` (its raw state is navix's ``Timestep``)."""

    def __init__(self, env: Any, name: str):
        import jax

        self.env = env
        self.name = name
        self.default_params = NoParams()
        self.action_space = Discrete(int(env.action_space.maximum) + 1)
        timestep = jax.eval_shape(env.reset, jax.random.key(0))
        self.obs_shape = tuple(int(s) for s in timestep.observation.shape)
        self.max_episode_steps = int(env.max_steps)

    def _start(self, key, params):
        timestep = self.env.reset(key)
        return timestep, jnp.asarray(timestep.observation, jnp.float32)

    def _advance(self, key, raw, action, params):
        del key  # navix keeps its randomness in its state
        timestep = self.env._step(raw, action)  # the transition without navix's lazy reset
        terminated = timestep.step_type == _TERMINATION
        truncated = timestep.step_type == _TRUNCATION
        return timestep, jnp.asarray(timestep.observation, jnp.float32), timestep.reward, terminated, truncated


def _make(canonical: str, **options: Any) -> NavixEnv:
    name = suite_id(canonical)

    def build() -> NavixEnv:
        import navix

        known = navix.registry()
        if name not in known:
            raise unknown(canonical, "navix", list(known))
        return NavixEnv(navix.make(name), canonical)

    return load(canonical, "navix", "navix", "navix", "navix", build)


# every navix env acts with MiniGrid's 7 discrete actions
BACKEND = suite_backend("navix", NAVIX_IDS, _make, lambda canonical: "discrete", "navix", "navix")
