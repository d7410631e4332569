"""The one environment contract every backend adapter implements.

An :class:`Env` is a single, unbatched environment with pure functions::

    state, obs = env.reset(key, params)
    state, step = env.step(key, state, action, params)

``step`` auto-resets: ``step.obs`` is the observation the agent acts on next
(the first observation of a new episode when one ended), while
``step.final_obs`` is the pre-reset observation ``s_{t+1}`` needed to bootstrap
a time-limit truncation. ``terminated`` (a true terminal state: bootstrap
nothing) and ``truncated`` (a time limit: bootstrap from ``V(final_obs)``) are
kept apart. Batch with ``jax.vmap`` outside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

__all__ = ["Discrete", "Box", "EnvState", "EnvStep", "Env"]


@dataclass(frozen=True)
class Discrete:
    """``n`` actions ``0 … n-1``."""

    n: int

    @property
    def shape(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class Box:
    """Continuous actions in ``[low, high]`` (arrays of ``shape``)."""

    low: np.ndarray
    high: np.ndarray
    shape: tuple[int, ...]

    def __hash__(self) -> int:
        return hash((self.shape, self.low.tobytes(), self.high.tobytes()))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Box)
            and self.shape == other.shape
            and np.array_equal(self.low, other.low)
            and np.array_equal(self.high, other.high)
        )


@struct.dataclass
class EnvState:
    """Backend state plus running statistics of the current episode."""

    inner: Any  # the backend's own state pytree
    episode_return: jax.Array  # float32 [] undiscounted raw return so far
    episode_length: jax.Array  # int32 [] steps so far


class EnvStep(NamedTuple):
    """One transition ``s_t, a_t → r_t, s_{t+1}`` seen from the agent."""

    obs: jax.Array  # [*obs_shape] next observation after auto-reset
    reward: jax.Array  # float32 []
    terminated: jax.Array  # bool [] true terminal state: no bootstrap
    truncated: jax.Array  # bool [] time limit: bootstrap from V(final_obs)
    final_obs: jax.Array  # [*obs_shape] s_{t+1} before auto-reset
    episode_return: jax.Array  # float32 [] return of the episode ending here (valid where done)
    episode_length: jax.Array  # int32 [] its length (valid where done)

    @property
    def done(self) -> jax.Array:
        return jnp.logical_or(self.terminated, self.truncated)


class Env:
    """Base class of adapters. Subclasses set the attributes and implement
    :meth:`_reset` / :meth:`_step` (which return the backend's pieces)."""

    name: str
    obs_shape: tuple[int, ...]
    action_space: Discrete | Box
    default_params: Any
    max_episode_steps: int | None = None
    solved_return: float | None = None

    # -- backend hooks ------------------------------------------------------
    def _reset(self, key: jax.Array, params: Any) -> tuple[Any, jax.Array]:
        raise NotImplementedError

    def _step(
        self, key: jax.Array, inner: Any, action: jax.Array, params: Any
    ) -> tuple[Any, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
        """Return (inner_state, obs_after_reset, reward, terminated, truncated, final_obs)."""
        raise NotImplementedError

    # -- the contract ---------------------------------------------------------
    def reset(self, key: jax.Array, params: Any = None) -> tuple[EnvState, jax.Array]:
        """Start an episode. Returns ``(state, obs)``; obs is float32 ``[*obs_shape]``."""
        params = self.default_params if params is None else params
        inner, obs = self._reset(key, params)
        state = EnvState(inner, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
        return state, jnp.asarray(obs, jnp.float32)

    def step(self, key: jax.Array, state: EnvState, action: jax.Array, params: Any = None) -> tuple[EnvState, EnvStep]:
        """Advance one step, auto-resetting when the episode ends."""
        params = self.default_params if params is None else params
        inner, obs, reward, terminated, truncated, final_obs = self._step(key, state.inner, action, params)
        reward = jnp.asarray(reward, jnp.float32)
        terminated = jnp.asarray(terminated, jnp.bool_)
        truncated = jnp.asarray(truncated, jnp.bool_)
        done = jnp.logical_or(terminated, truncated)
        episode_return = state.episode_return + reward
        episode_length = state.episode_length + 1
        new_state = EnvState(
            inner,
            jnp.where(done, 0.0, episode_return),
            jnp.where(done, 0, episode_length),
        )
        step = EnvStep(
            obs=jnp.asarray(obs, jnp.float32),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=jnp.asarray(final_obs, jnp.float32),
            episode_return=episode_return,
            episode_length=episode_length,
        )
        return new_state, step

    def random_action(self, key: jax.Array) -> jax.Array:
        """A uniformly random valid action (for warm-up and benchmarks)."""
        space = self.action_space
        if isinstance(space, Discrete):
            return jax.random.randint(key, (), 0, space.n)
        return jax.random.uniform(key, space.shape, minval=jnp.asarray(space.low), maxval=jnp.asarray(space.high))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, obs={self.obs_shape}, actions={self.action_space})"
