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

A rollout that knows its length ahead draws the randomness of all its steps
in one batched call outside its sequential loop, and steps with it::

    draws = env.draw_steps(keys, params)              # keys [T, N] → leaves [T, N, ...]
    state, step = env.step_drawn(draws_t, state, action, params)   # == env.step(keys_t, ...)

For gymnax environments the draws include the fresh start state that the
auto-reset selects when an episode ends, so the loop runs no PRNG at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

__all__ = ["Discrete", "Box", "EnvState", "EnvStep", "Env", "Observed", "StepKeys", "random_steps"]


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


@struct.dataclass
class StepKeys:
    """Raw key data for :meth:`Env.step_drawn`'s default path (scanned over as
    data: ``jax.debug_key_reuse`` cannot follow typed keys sliced by a scan)."""

    data: jax.Array  # uint32 [..., key_data]
    impl: Any = struct.field(pytree_node=False)

    @property
    def key(self) -> jax.Array:
        return jax.random.wrap_key_data(self.data, impl=self.impl)


class Env:
    """Base class of adapters. Subclasses set the attributes and implement
    :meth:`_reset` / :meth:`_step` (which return the backend's pieces)."""

    name: str
    obs_shape: tuple[int, ...]
    action_space: Discrete | Box
    default_params: Any
    max_episode_steps: int | None = None
    solved_return: float | None = None
    # backends whose step is a large Python program (physics engines, the
    # suites) trace it once per argument shape (:meth:`_call`)
    trace_once: bool = False
    # False for a host env's shapes (``jaxrl.run.host``): never stepped inside a program, so
    # replay learners leave their random-action warm-up to the actors
    steps_in_program: bool = True

    def truncation_period(self, params: Any = None) -> int | None:
        """The fewest steps between two truncations of one env copy under
        ``params`` — its time limit — when truncation is nothing but a time
        limit counted from each reset; ``None`` when that is not known.

        PPO uses it to bound the truncations in a rollout of ``T`` steps by
        ``⌈T / period⌉`` per env and compute ``V(final_obs)`` only there. A
        wrong (too large) period would silently bootstrap truncations from
        the wrong value, so adapters return one only for environments whose
        truncation rule they know; the base class never does."""
        del params
        return None

    # -- backend hooks ------------------------------------------------------
    def _reset(self, key: jax.Array, params: Any) -> tuple[Any, jax.Array]:
        raise NotImplementedError

    def _step(
        self, key: jax.Array, inner: Any, action: jax.Array, params: Any
    ) -> tuple[Any, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
        """Return (inner_state, obs_after_reset, reward, terminated, truncated, final_obs)."""
        raise NotImplementedError

    def _draw(self, keys: jax.Array, params: Any) -> Any:
        """The randomness of ``keys.shape`` steps (leaves with those leading axes)."""
        return StepKeys(jax.random.key_data(keys), jax.random.key_impl(keys))

    def _step_drawn(
        self, drawn: Any, inner: Any, action: jax.Array, params: Any
    ) -> tuple[Any, jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
        """:meth:`_step` with one step's slice of :meth:`_draw`'s output."""
        return self._step(drawn.key, inner, action, params)

    def _call(self, hook: str, *args: Any, params: Any) -> Any:
        """The backend hook ``hook`` on ``(*args, params)``; when
        :attr:`trace_once`, behind ``jax.jit``, one per env object: a program
        that steps the env in several places (rollout, auto-reset, evaluation)
        then traces the backend's Python once per argument shape instead of
        once per place (XLA inlines the call). Parameters made of Python
        numbers stay constants of the trace, as without the ``jit`` (an adapter
        may skip work for nominal values). Kept out of pickles (:meth:`__getstate__`)."""
        fn = getattr(self, hook)
        if not self.trace_once:
            return fn(*args, params)
        cache = self.__dict__.setdefault("_traced_hooks", {})
        leaves, tree = jax.tree.flatten(params)
        if all(isinstance(x, (bool, int, float)) for x in leaves):
            key = (hook, tree, tuple(leaves))
            if key not in cache:
                cache[key] = jax.jit(lambda *a: fn(*a, params))
            return cache[key](*args)
        if hook not in cache:
            cache[hook] = jax.jit(fn)
        return cache[hook](*args, params)

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_traced_hooks"}

    # -- the contract ---------------------------------------------------------
    def reset(self, key: jax.Array, params: Any = None) -> tuple[EnvState, jax.Array]:
        """Start an episode. Returns ``(state, obs)``; obs is float32 ``[*obs_shape]``."""
        params = self.default_params if params is None else params
        inner, obs = self._call("_reset", key, params=params)
        state = EnvState(inner, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))
        return state, jnp.asarray(obs, jnp.float32)

    def step(self, key: jax.Array, state: EnvState, action: jax.Array, params: Any = None) -> tuple[EnvState, EnvStep]:
        """Advance one step, auto-resetting when the episode ends."""
        params = self.default_params if params is None else params
        return self._finish(state, *self._call("_step", key, state.inner, action, params=params))

    def draw_steps(self, keys: jax.Array, params: Any = None) -> Any:
        """Draw the randomness of many future steps in one batched call.

        ``keys``: typed keys of any shape ``S`` (e.g. ``[T, N]``, one per step
        and env). Returns a pytree whose leaves lead with ``S``; index it like
        ``keys`` and pass the slice to :meth:`step_drawn`, which then returns
        exactly what :meth:`step` returns for the matching key.
        """
        params = self.default_params if params is None else params
        if not jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):  # legacy uint32 keys [..., 2]
            keys = jax.random.wrap_key_data(keys)
        return self._draw(keys, params)

    def step_drawn(
        self, drawn: Any, state: EnvState, action: jax.Array, params: Any = None
    ) -> tuple[EnvState, EnvStep]:
        """:meth:`step` with its randomness from one slice of :meth:`draw_steps`."""
        params = self.default_params if params is None else params
        return self._finish(state, *self._call("_step_drawn", drawn, state.inner, action, params=params))

    def _finish(
        self,
        state: EnvState,
        inner: Any,
        obs: jax.Array,
        reward: jax.Array,
        terminated: jax.Array,
        truncated: jax.Array,
        final_obs: jax.Array,
    ) -> tuple[EnvState, EnvStep]:
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


class Observed(Env):
    """``env`` observed only through the entries ``keep`` of its flattened
    observation (a partially observed task, e.g. CartPole without its
    velocities: ``keep=(0, 2)``); the final observations are masked alike.
    Dynamics, rewards, episode ends, parameters and time limits are ``env``'s."""

    def __init__(self, env: Env, keep: tuple[int, ...], name: str | None = None):
        size = int(np.prod(env.obs_shape))
        keep = tuple(int(i) for i in keep)
        if not keep or any(i < 0 or i >= size for i in keep):
            raise ValueError(f"observe={list(keep)}: indices must lie in [0, {size}) for {env.name}")
        self.inner = env
        self.keep = np.asarray(keep, np.int32)
        self.name = name or f"{env.name}[obs {','.join(map(str, keep))}]"
        self.base_name = getattr(env, "base_name", env.name)
        self.obs_shape = (len(keep),)
        self.action_space = env.action_space
        self.default_params = env.default_params
        self.max_episode_steps = env.max_episode_steps
        self.solved_return = env.solved_return

    def _select(self, obs: jax.Array) -> jax.Array:
        return obs.reshape(obs.shape[: obs.ndim - len(self.inner.obs_shape)] + (-1,))[..., self.keep]

    def _params(self, params: Any) -> Any:
        return self.default_params if params is None else params

    def truncation_period(self, params: Any = None) -> int | None:
        return self.inner.truncation_period(self._params(params))

    def reset(self, key: jax.Array, params: Any = None) -> tuple[EnvState, jax.Array]:
        state, obs = self.inner.reset(key, self._params(params))
        return state, self._select(obs)

    def _masked(self, out: tuple[EnvState, EnvStep]) -> tuple[EnvState, EnvStep]:
        state, step = out
        return state, step._replace(obs=self._select(step.obs), final_obs=self._select(step.final_obs))

    def step(self, key: jax.Array, state: EnvState, action: jax.Array, params: Any = None) -> tuple[EnvState, EnvStep]:
        return self._masked(self.inner.step(key, state, action, self._params(params)))

    def draw_steps(self, keys: jax.Array, params: Any = None) -> Any:
        return self.inner.draw_steps(keys, self._params(params))

    def step_drawn(
        self, drawn: Any, state: EnvState, action: jax.Array, params: Any = None
    ) -> tuple[EnvState, EnvStep]:
        return self._masked(self.inner.step_drawn(drawn, state, action, self._params(params)))

    def random_action(self, key: jax.Array) -> jax.Array:
        return self.inner.random_action(key)


def random_steps(
    env: Env, env_state: EnvState, key: jax.Array, steps: int, params: Any = None
) -> tuple[EnvState, jax.Array]:
    """``steps`` steps of a batch of envs (``env_state`` leaves ``[N, ...]``) under
    uniformly random actions, all randomness drawn up front — the env-only
    probe of ``profile=true`` and ``experiments/bench/ceiling.py``.

    Returns the final state and the rewards ``[steps, N]``.
    """
    params = env.default_params if params is None else params
    num_envs = jax.tree.leaves(env_state)[0].shape[0]
    key_act, key_env = jax.random.split(key)
    actions = jax.vmap(jax.vmap(env.random_action))(jax.random.split(key_act, (steps, num_envs)))
    draws = env.draw_steps(jax.random.split(key_env, (steps, num_envs)), params)
    step = jax.vmap(env.step_drawn, in_axes=(0, 0, 0, None))

    def body(state: EnvState, inputs: tuple[Any, jax.Array]) -> tuple[EnvState, jax.Array]:
        drawn, action = inputs
        state, out = step(drawn, state, action, params)
        return state, out.reward

    return jax.lax.scan(body, env_state, (draws, actions))
