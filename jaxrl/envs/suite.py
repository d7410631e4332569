"""What the adapters of the optional JAX env suites (Craftax, Jumanji, Navix,
XLand-MiniGrid, MuJoCo Playground) share.

Each suite gives a start function and a step function that never resets by
itself (or whose auto-reset the adapter bypasses). :class:`SuiteEnv` turns
them into the jaxrl contract: terminated and truncated apart, the pre-reset
observation as ``final_obs``, and an auto-reset from a *fresh* start state
drawn with the step's own key.

:meth:`SuiteEnv._draw` draws the start states of a whole rollout in one
batched call outside its sequential loop (as the gymnax adapter does), so the
loop runs no start function at all. Where building a start state costs far
more than a step (Craftax generates a world), ``reset_share = k`` builds one
start state per ``k`` consecutive envs of a drawn step and hands it to each of
them that ends there: Craftax's own "optimistic reset". The plain
:meth:`Env.step` path always builds its own.

Also here: the one-line refusal when a suite is missing or does not import
beside the installed jax, and observation flattening for structured
observations.
"""

from __future__ import annotations

import difflib
import importlib.metadata
import importlib.util
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.core.errors import ConfigError, install_command
from jaxrl.envs.backends import Backend
from jaxrl.envs.core import Discrete, Env, StepKeys

__all__ = ["Clocked", "NoParams", "SuiteEnv", "flatten_obs", "missing", "load", "resolver", "suite_backend", "unknown"]


@struct.dataclass
class NoParams:
    """The parameters of an env whose suite exposes none to jaxrl."""


@struct.dataclass
class Clocked:
    """A suite's state and the steps since the last reset, for adapters that
    count a time limit themselves."""

    state: Any
    t: jax.Array  # int32 []


class SuiteEnv(Env):
    """An adapter over a suite's start and step functions.

    Subclasses set the :class:`Env` attributes and implement

    - ``_start(key, params) -> (raw_state, obs)``: a fresh episode;
    - ``_advance(key, raw_state, action, params) -> (raw_state, obs, reward,
      terminated, truncated)``: one step, never resetting, with
      ``terminated`` and ``truncated`` never both true.

    ``obs`` is already in the env's ``obs_shape`` (see :func:`flatten_obs`).
    """

    reset_share: int = 1  # consecutive envs of a drawn step sharing one fresh start state
    trace_once = True

    def _start(self, key: jax.Array, params: Any) -> tuple[Any, jax.Array]:
        raise NotImplementedError

    def _advance(
        self, key: jax.Array, raw: Any, action: jax.Array, params: Any
    ) -> tuple[Any, jax.Array, jax.Array, jax.Array, jax.Array]:
        raise NotImplementedError

    def _action(self, action: jax.Array) -> jax.Array:
        return action.astype(jnp.int32) if isinstance(self.action_space, Discrete) else action

    def _reset(self, key: jax.Array, params: Any) -> tuple[Any, jax.Array]:
        return self._start(key, params)

    def _select(self, done, fresh, stepped):
        return jax.tree.map(lambda r, s: jax.lax.select(done, r, s), fresh, stepped)

    def _step(self, key, inner, action, params):
        key_step, key_reset = jax.random.split(key)
        raw, obs, reward, terminated, truncated = self._advance(key_step, inner, self._action(action), params)
        fresh = self._start(key_reset, params)
        done = jnp.logical_or(terminated, truncated)
        state, next_obs = self._select(done, fresh, (raw, obs))
        return state, next_obs, reward, terminated, truncated, obs

    def _draw(self, keys: jax.Array, params: Any) -> Any:
        """Per step: the key of the suite's step and a fresh start state (one per
        ``reset_share`` consecutive envs of the last axis)."""
        flat = keys.reshape(-1)
        pairs = jax.vmap(jax.random.split)(flat)  # as _step: key → (key_step, key_reset)
        share = max(1, int(self.reset_share))
        if share == 1 or keys.ndim == 0:
            starts = jax.vmap(self._start, in_axes=(0, None))(pairs[:, 1], params)
        else:
            width = keys.shape[-1]
            rows = pairs[:, 1].reshape(-1, width)  # [steps, envs]
            pool = rows[:, ::share]  # one start per `share` envs
            built = jax.vmap(jax.vmap(self._start, in_axes=(0, None)), in_axes=(0, None))(pool, params)
            index = np.arange(width) // share
            starts = jax.tree.map(lambda x: x[:, index].reshape((-1,) + x.shape[2:]), built)
        drawn = (StepKeys(jax.random.key_data(pairs[:, 0]), jax.random.key_impl(flat)), starts)
        return jax.tree.map(lambda x: x.reshape(keys.shape + x.shape[1:]), drawn)

    def _step_drawn(self, drawn, inner, action, params):
        key_step, fresh = drawn
        raw, obs, reward, terminated, truncated = self._advance(key_step.key, inner, self._action(action), params)
        done = jnp.logical_or(terminated, truncated)
        state, next_obs = self._select(done, fresh, (raw, obs))
        return state, next_obs, reward, terminated, truncated, obs


def flatten_obs(obs: Any, skip: tuple[str, ...] = ()) -> jax.Array:
    """A structured observation (a NamedTuple, dataclass or dict of arrays) as one
    float32 vector: every leaf raveled and concatenated in pytree order
    (``skip``: top-level fields left out). An array stays as it is."""
    if isinstance(obs, (jax.Array, np.ndarray)):
        return jnp.asarray(obs, jnp.float32)
    if skip and hasattr(obs, "_asdict"):
        obs = {k: v for k, v in obs._asdict().items() if k not in skip}
    leaves = jax.tree.leaves(obs)
    return jnp.concatenate([jnp.asarray(x, jnp.float32).reshape(-1) for x in leaves])


def missing(module: str, suite: str, extra: str) -> tuple[str, str] | None:
    """``(constraint, fix)`` when the suite's module is not installed, else None."""
    if importlib.util.find_spec(module) is None:
        return f"is a {suite} environment and {suite} is not installed", install_command(extra)
    return None


def load(canonical: str, suite: str, module: str, dist: str, extra: str, build: Callable[[], Any]) -> Any:
    """``build()`` (which imports the suite), or a ConfigError naming the env
    when the suite is absent or does not import beside this jax (the extra's
    pinned version and the installed one named)."""
    absent = missing(module, suite, extra)
    if absent is not None:
        raise ConfigError("env", canonical, *absent)
    try:
        return build()
    except (ImportError, AttributeError, TypeError) as err:
        if not _import_failure(err):
            raise
        raise ConfigError(
            "env",
            canonical,
            f"needs {suite}, and {dist} {_version(dist) or '?'} does not import with jax {jax.__version__} "
            f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})",
            f"{install_command(extra)} (the {dist} version tested with this jax)",
        ) from None


def _import_failure(err: BaseException) -> bool:
    """Whether ``err`` came from importing a module (not from the env's own code)."""
    if isinstance(err, ImportError):
        return True
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "<module>":
            return True
        tb = tb.tb_next
    return False


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def resolver(prefix: str, ids: tuple[str, ...]) -> Callable[[str, bool], str | None]:
    """A :class:`~jaxrl.envs.backends.Backend` ``resolve`` for a suite whose
    canonical ids are ``PREFIX:ID``: a listed ``ID`` resolves with or without the
    prefix, case-insensitively; with the prefix, any other ``ID`` is passed to
    the suite as typed (it says whether it knows it)."""
    lower = {i.lower(): i for i in ids}

    def resolve(text: str, explicit: bool) -> str | None:
        key = text.strip()
        if key.lower().startswith(prefix + ":"):  # a canonical id typed again
            key, explicit = key[len(prefix) + 1 :], True
        if key.lower() in lower:
            return f"{prefix}:{lower[key.lower()]}"
        return f"{prefix}:{key}" if explicit and key else None

    return resolve


def unknown(canonical: str, suite: str, known: list[str] | tuple[str, ...]) -> ConfigError:
    """The error for an id the suite does not have, with the nearest ones it has."""
    prefix = canonical.split(":", 1)[0] + ":" if ":" in canonical else ""
    close = difflib.get_close_matches(suite_id(canonical), list(known), n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(prefix + c for c in close)}?" if close else f"pick one of {', '.join(known)}"
    return ConfigError("env", canonical, f"is not a {suite} environment", hint)


def suite_id(canonical: str) -> str:
    """``"navix:Navix-Empty-5x5-v0"`` → ``"Navix-Empty-5x5-v0"``."""
    return canonical.split(":", 1)[1] if ":" in canonical else canonical


def suite_backend(
    name: str,
    ids: tuple[str, ...],
    make: Callable[..., Env],
    actions: Callable[[str], str | None],
    module: str,
    suite: str,
) -> Backend:
    """The :class:`Backend` of an optional suite: ``NAME:ID`` canonical ids
    (:func:`resolver`), ``ids`` listed without importing the suite, and the
    extra ``jaxrl[NAME]`` named when ``module`` is missing."""
    return Backend(
        name=name,
        names=lambda: [f"{name}:{i}" for i in ids],
        resolve=resolver(name, ids),
        make=make,
        actions=actions,
        available=lambda: missing(module, suite, name),
    )
