"""Environments by name behind one contract (see :mod:`jaxrl.envs.core`), from
registered backends (:mod:`jaxrl.envs.backends`: gymnax and brax built in, and
the optional suites Craftax, Jumanji, Navix, XLand-MiniGrid and MuJoCo
Playground, each behind its extra; :func:`register_backend` adds one;
``docs/contributing/env.md``).

>>> env = jaxrl.envs.make("cartpole")          # short name
>>> env = jaxrl.envs.make("Breakout-MinAtar")  # any gymnax id
>>> env = jaxrl.envs.make("brax:ant")          # NAME:ID picks the backend
>>> env = jaxrl.envs.make("navix:Navix-DoorKey-5x5-v0")  # an optional suite's id
>>> env = jaxrl.envs.from_gymnax(MyEnv())      # a user's gymnax Environment
"""

from __future__ import annotations

import difflib
from typing import Any

from jaxrl.core.errors import ConfigError
from jaxrl.envs import brax_env, craftax_env, gymnax_env, jumanji_env, navix_env, playground_env, xminigrid_env
from jaxrl.envs.backends import Backend, backend_names, get_backend, lookup, register_backend, unregister_backend
from jaxrl.envs.core import Box, Discrete, Env, EnvState, EnvStep, Observed
from jaxrl.envs.params import param_names, with_params
from jaxrl.envs.randomize import Randomized, parse_randomize

__all__ = [
    "Backend",
    "Box",
    "Discrete",
    "Env",
    "EnvState",
    "EnvStep",
    "Observed",
    "Randomized",
    "param_names",
    "with_params",
    "parse_params",
    "action_kind",
    "backend_names",
    "backend_of",
    "canonical_name",
    "from_config",
    "from_gymnax",
    "is_brax",
    "make",
    "names",
    "register_backend",
    "unregister_backend",
    "suggest",
]

register_backend(gymnax_env.BACKEND)
register_backend(brax_env.BACKEND)
for _suite in (craftax_env, jumanji_env, navix_env, xminigrid_env, playground_env):  # optional extras
    register_backend(_suite.BACKEND)


def names() -> list[str]:
    """All names :func:`make` lists, backend by backend (gymnax's short names and
    ids, brax's names, then each optional suite's ``SUITE:ID``s, listed whether
    or not the suite is installed; ``brax:<name>`` and ``SUITE:<id>`` reach
    any other env of theirs)."""
    out: list[str] = []
    for name in backend_names():
        out += [n for n in get_backend(name).names() if n not in out]
    return out


def canonical_name(name: str) -> str | None:
    """Resolve a short name / backend id (case-insensitive; ``NAME:ID`` picks the
    backend) to its canonical id, or None."""
    found = lookup(name)
    return None if found is None else found[1]


def backend_of(name: str) -> str | None:
    """The name of the backend that ``name`` resolves to, or None."""
    found = lookup(name)
    return None if found is None else found[0].name


def is_brax(name: str) -> bool:
    return backend_of(name) == "brax"


def action_kind(name: str) -> str | None:
    """``"discrete"`` or ``"continuous"``: what the backend says of the env
    ``name`` (gymnax builds it and reads its action space), None when unknown."""
    found = lookup(name)
    if found is None or found[0].available() is not None:
        return None
    return found[0].actions(found[1])


def from_config(config: Any) -> Env:
    """The env of a :class:`jaxrl.core.config.Config`: name, brax backend and
    time limit, then ``env.params`` (parameters changed from their defaults)
    , ``env.observe`` (the observation entries kept) and ``env.randomize``
    (parameters drawn per episode, :mod:`jaxrl.envs.randomize`). ConfigError (naming
    the field) for a parameter the env does not have or an index out of range."""
    env = make(config.env.name, backend=config.env.backend, episode_length=config.env.episode_length or 1000)
    text = getattr(config.env, "params", "")
    if text:
        changes = parse_params(text)
        known = param_names(env) + (["max_steps_in_episode"] if _has_field(env, "max_steps_in_episode") else [])
        for name in changes:
            if name not in known:
                raise ConfigError(
                    "env.params",
                    text,
                    f"{env.name} has no parameter {name!r} (its parameters: {', '.join(known) or 'none'})",
                    "pass env.params='NAME=VALUE ...' with those names",
                )
        defaults = env.default_params
        typed = {
            k: type(getattr(defaults, k))(v) if isinstance(getattr(defaults, k), (int, bool)) else v
            for k, v in changes.items()
        }
        env.default_params = with_params(env, **typed)
        if hasattr(env, "max_episode_steps") and "max_steps_in_episode" in typed:
            env.max_episode_steps = int(typed["max_steps_in_episode"])
    keep = tuple(getattr(config.env, "observe", ()) or ())
    if keep:
        size = 1
        for n in env.obs_shape:
            size *= int(n)
        if any(isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < size for i in keep):
            raise ConfigError(
                "env.observe",
                list(keep),
                f"must be indices of {env.name}'s flattened observation, in [0, {size})",
                f"pass e.g. env.observe=[0,{size - 1}]",
            )
        env = Observed(env, keep)
    text = getattr(config.env, "randomize", "")
    if text:
        env = Randomized(env, parse_randomize(text, env))
    return env


def parse_params(text: str) -> dict[str, float]:
    """``"memory_length=20 gravity=9.8"`` → ``{"memory_length": 20.0, "gravity": 9.8}``
    (ConfigError naming ``env.params`` when malformed)."""
    out: dict[str, float] = {}
    for part in str(text).split():
        name, sep, value = part.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            out[name] = float(value)
        except ValueError:
            raise ConfigError(
                "env.params", text, f"{part!r} is not NAME=NUMBER", "pass e.g. env.params='memory_length=20'"
            ) from None
    return out


def _has_field(env: Env, name: str) -> bool:
    return hasattr(env.default_params, name)


def suggest(name: str, n: int = 3) -> list[str]:
    """Nearest known names to a misspelt ``name``."""
    pool = names()
    lower = {p.lower(): p for p in pool}
    close = difflib.get_close_matches(str(name).lower(), list(lower), n=n, cutoff=0.5)
    return [lower[c] for c in close]


def make(name: str, **options: Any) -> Env:
    """Build an environment by name (see :func:`canonical_name`); ``options``
    (``backend=``, ``episode_length=``) go to its backend.

    Raises ``ValueError`` with the nearest names when ``name`` is unknown, and
    :class:`~jaxrl.core.errors.ConfigError` when its backend cannot build it here.
    """
    found = lookup(name)
    if found is None:
        close = suggest(name)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown environment {name!r}.{hint} See jaxrl.envs.names().")
    backend, canonical = found
    missing = backend.available()
    if missing is not None:
        raise ConfigError("env", canonical, *missing)
    return backend.make(canonical, **options)


def from_gymnax(env: Any, params: Any = None) -> Env:
    """Adapt a gymnax ``Environment`` instance (e.g. a user's own subclass)."""
    return gymnax_env.GymnaxEnv(env, params)


def as_env(env: Any) -> Env:
    """Accept a jaxrl :class:`Env` or a gymnax ``Environment``."""
    if isinstance(env, Env):
        return env
    if hasattr(env, "step_env") and hasattr(env, "reset_env"):
        return from_gymnax(env)
    raise TypeError(f"env must be a jaxrl.envs.Env or a gymnax Environment, got {type(env).__name__}")
