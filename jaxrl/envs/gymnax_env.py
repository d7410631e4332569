"""gymnax 1.x behind the jaxrl contract.

gymnax 1.x's ``Environment.step`` already auto-resets and returns
``terminated`` and ``truncated`` separately with the pre-reset observation in
``info["final_observation"]``; this adapter normalizes dtypes and spaces, and
splits that ``step`` in two for :meth:`Env.draw_steps`: the key split and the
fresh start state (``reset_env``) that the auto-reset selects are drawn for
all steps up front, and :meth:`Env.step_drawn` runs the rest of gymnax's
``step`` (``step_env``, ``is_truncated``, the select) on them — the same values,
with no PRNG left in the sequential loop (on XLA:CPU jax's threefry is a small
loop of its own, a few µs per call). Environments that override ``step``
itself keep the plain path.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.envs.backends import Backend
from jaxrl.envs.core import Box, Discrete, Env, Observed

__all__ = ["BACKEND", "GymnaxEnv", "SHORT_NAMES"]

SHORT_NAMES = {
    "cartpole": "CartPole-v1",
    "acrobot": "Acrobot-v1",
    "mountaincar": "MountainCar-v0",
    "pendulum": "Pendulum-v1",
    "mountaincar-continuous": "MountainCarContinuous-v0",
    "cartpole-pomdp": "CartPole-v1-pomdp",
    "memorychain": "MemoryChain-bsuite",
}

# Partially observed variants: id -> (gymnax id, the observation entries kept).
VARIANTS = {
    "CartPole-v1-pomdp": ("CartPole-v1", (0, 2)),  # cart position and pole angle; no velocities
}

# gymnax ids that need a download at construction time (none is listed).
NEEDS_DOWNLOAD = {"MNISTBandit-bsuite"}

# Returns at which the usual benchmark counts a task as solved (Gym's table).
SOLVED_RETURNS = {
    "CartPole-v1": 475.0,
    "CartPole-v1-pomdp": 475.0,
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
        from gymnax.environments.environment import Environment

        # gymnax's own auto-reset ``step``, which _draw/_step_drawn reproduce
        # (not when the env or a subclass of this adapter replaces it)
        self._split_step = (
            isinstance(env, Environment) and type(env).step is Environment.step and type(self)._step is GymnaxEnv._step
        )

    def truncation_period(self, params: Any = None) -> int | None:
        """``max_steps_in_episode`` of ``params`` for gymnax's own environments:
        ``Environment.is_truncated`` is ``state.time >= max_steps_in_episode``,
        and each of them starts ``time`` at 0 on reset and adds 1 per step.
        ``None`` for a user's subclass (its clock is its own), a subclass of
        this adapter, or a limit that is traced rather than a number."""
        from gymnax.environments.environment import Environment

        env = self.env
        if (
            type(self) is not GymnaxEnv
            or not isinstance(env, Environment)
            or not type(env).__module__.startswith("gymnax.environments.")
            or type(env).is_truncated is not Environment.is_truncated
        ):
            return None
        params = self.default_params if params is None else params
        try:
            limit = int(np.asarray(params.max_steps_in_episode))
        except (AttributeError, TypeError, jax.errors.ConcretizationTypeError):
            return None
        return limit if limit >= 1 else None

    def _reset(self, key: jax.Array, params: Any) -> tuple[Any, jax.Array]:
        obs, inner = self.env.reset(key, params)
        return inner, obs

    def _action(self, action: jax.Array) -> jax.Array:
        return action.astype(np.int32) if isinstance(self.action_space, Discrete) else action

    def _step(self, key, inner, action, params):
        obs, inner, reward, terminated, truncated, info = self.env.step(key, inner, self._action(action), params)
        return inner, obs, reward, terminated, truncated, info["final_observation"]

    def _draw(self, keys: jax.Array, params: Any) -> Any:
        if not self._split_step:
            return super()._draw(keys, params)
        flat = keys.reshape(-1)
        pairs = jax.vmap(jax.random.split)(flat)  # as gymnax's step: key → (key_step, key_reset)
        obs_reset, state_reset = jax.vmap(self.env.reset_env, in_axes=(0, None))(pairs[:, 1], params)
        drawn = (super()._draw(pairs[:, 0], params), obs_reset, state_reset)
        return jax.tree.map(lambda x: x.reshape(keys.shape + x.shape[1:]), drawn)

    def _step_drawn(self, drawn, inner, action, params):
        if not self._split_step:
            return super()._step_drawn(drawn, inner, action, params)
        key_step, obs_reset, state_reset = drawn
        env = self.env
        obs_step, state_step, reward, terminated, _ = env.step_env(key_step.key, inner, self._action(action), params)
        truncated = env.is_truncated(state_step, params)
        done = jnp.logical_or(terminated, truncated)
        state, obs = jax.tree.map(
            lambda r, s: jax.lax.select(done, r, s), (state_reset, obs_reset), (state_step, obs_step)
        )
        return state, obs, reward, terminated, truncated, obs_step


def gymnax_ids() -> list[str]:
    """gymnax's registered ids (those that build offline). Read from gymnax's
    source until gymnax is imported: importing it runs JAX code, which starts
    JAX's backend — config validation must not, the CLI sets the device layout
    and joins jax.distributed after it."""
    module = sys.modules.get("gymnax")
    ids = module.registered_envs if module is not None else builtin_ids()
    if ids is None:
        import gymnax

        ids = gymnax.registered_envs
    return [n for n in ids if n not in NEEDS_DOWNLOAD] + list(VARIANTS)


@functools.cache
def builtin_ids() -> tuple[str, ...] | None:
    """``gymnax.registration._BUILTIN_ENV_IDS`` (the ids and order of
    ``gymnax.registered_envs``), parsed, not imported (None when the source
    does not have that shape)."""
    spec = importlib.util.find_spec("gymnax")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(next(iter(spec.submodule_search_locations)), "registration.py")
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) else None)
        )
        if isinstance(target, ast.Name) and target.id == "_BUILTIN_ENV_IDS" and isinstance(node.value, ast.List):
            ids = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            return tuple(ids) if len(ids) == len(node.value.elts) else None
    return None


def _resolve(text: str, explicit: bool) -> str | None:
    key = text.strip()
    if key.lower() in SHORT_NAMES:
        return SHORT_NAMES[key.lower()]
    return {n.lower(): n for n in gymnax_ids()}.get(key.lower())


def _make(canonical: str, **options: Any) -> GymnaxEnv:
    """A gymnax env by id (``backend`` and ``episode_length`` are brax's: ignored)."""
    import gymnax

    if canonical in VARIANTS:
        base, keep = VARIANTS[canonical]
        env, params = gymnax.make(base)
        return Observed(GymnaxEnv(env, params, name=base), keep, name=canonical)
    env, params = gymnax.make(canonical)
    return GymnaxEnv(env, params, name=canonical)


# The action kind of every gymnax id, as its env's action space says
# (tests/test_env_backend.py builds each env and compares). Known without
# building: gymnax builds envs by running JAX, which would start JAX's backend
# during config validation, before the CLI sets the device layout or joins
# jax.distributed.
DISCRETE_IDS = {
    "CartPole-v1",
    "CartPole-v1-pomdp",
    "Acrobot-v1",
    "MountainCar-v0",
    "Asterix-MinAtar",
    "Breakout-MinAtar",
    "Freeway-MinAtar",
    "Seaquest-MinAtar",
    "SpaceInvaders-MinAtar",
    "Catch-bsuite",
    "DeepSea-bsuite",
    "MemoryChain-bsuite",
    "UmbrellaChain-bsuite",
    "DiscountingChain-bsuite",
    "MNISTBandit-bsuite",
    "SimpleBandit-bsuite",
    "FourRooms-misc",
    "MetaMaze-misc",
    "BernoulliBandit-misc",
    "GaussianBandit-misc",
    "Pong-misc",
    "FrozenLake-misc",
}


def _actions(canonical: str) -> str | None:
    """Known without building the env for gymnax's own ids; None (checked on
    the built env) for one registered into gymnax by user code."""
    if canonical in DISCRETE_IDS:
        return "discrete"
    return "continuous" if canonical in (builtin_ids() or ()) else None


BACKEND = Backend(
    name="gymnax",
    names=lambda: list(SHORT_NAMES) + gymnax_ids(),
    resolve=_resolve,
    make=_make,
    actions=_actions,
)
