"""Environments by name behind one contract (see :mod:`jaxrl.envs.core`).

>>> env = jaxrl.envs.make("cartpole")        # short name
>>> env = jaxrl.envs.make("Breakout-MinAtar")  # any gymnax id
>>> env = jaxrl.envs.from_gymnax(MyEnv())    # a user's gymnax Environment
"""

from __future__ import annotations

import difflib
from typing import Any

from jaxrl.core.errors import ConfigError
from jaxrl.envs.core import Box, Discrete, Env, EnvState, EnvStep
from jaxrl.envs.gymnax_env import GymnaxEnv

__all__ = [
    "Box",
    "Discrete",
    "Env",
    "EnvState",
    "EnvStep",
    "canonical_name",
    "from_config",
    "from_gymnax",
    "is_brax",
    "make",
    "names",
    "suggest",
]

SHORT_NAMES = {
    "cartpole": "CartPole-v1",
    "acrobot": "Acrobot-v1",
    "mountaincar": "MountainCar-v0",
    "pendulum": "Pendulum-v1",
    "mountaincar-continuous": "MountainCarContinuous-v0",
}

# gymnax envs with discrete actions (checked without building them).
DISCRETE_GYMNAX = {
    "CartPole-v1",
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

# gymnax ids that need a download at construction time (no network here).
_NEEDS_DOWNLOAD = {"MNISTBandit-bsuite"}


def _gymnax_ids() -> list[str]:
    import gymnax

    return [n for n in gymnax.registered_envs if n not in _NEEDS_DOWNLOAD]


# brax environments (an optional extra; imported only when one is made)
BRAX_NAMES = (
    "ant",
    "halfcheetah",
    "hopper",
    "walker2d",
    "humanoid",
    "humanoidstandup",
    "inverted_pendulum",
    "inverted_double_pendulum",
    "reacher",
    "pusher",
)


def names() -> list[str]:
    """All names :func:`make` accepts: short names, brax names (``brax:<name>``
    reaches any other brax env), then gymnax ids."""
    return list(SHORT_NAMES) + list(BRAX_NAMES) + _gymnax_ids()


def canonical_name(name: str) -> str | None:
    """Resolve a short name / brax name / gymnax id (case-insensitive) or return None."""
    if not isinstance(name, str):
        return None
    key = name.strip()
    if key.lower().startswith("brax:") and len(key) > 5:
        inner = key.split(":", 1)[1].lower()
        return inner if inner in BRAX_NAMES else f"brax:{inner}"
    if key.lower() in BRAX_NAMES:
        return key.lower()
    if key.lower().startswith("gymnax:"):
        key = key.split(":", 1)[1]
    if key.lower() in SHORT_NAMES:
        return SHORT_NAMES[key.lower()]
    by_lower = {n.lower(): n for n in _gymnax_ids()}
    return by_lower.get(key.lower())


def is_brax(name: str) -> bool:
    canonical = canonical_name(name)
    return canonical is not None and (canonical in BRAX_NAMES or canonical.startswith("brax:"))


def from_config(config: Any) -> Env:
    """The env of a :class:`jaxrl.core.config.Config` (name, brax backend, time limit)."""
    return make(config.env.name, backend=config.env.backend, episode_length=config.env.episode_length or 1000)


def suggest(name: str, n: int = 3) -> list[str]:
    """Nearest known names to a misspelt ``name``."""
    pool = names()
    lower = {p.lower(): p for p in pool}
    close = difflib.get_close_matches(str(name).lower(), list(lower), n=n, cutoff=0.5)
    return [lower[c] for c in close]


def make(name: str, **kwargs: Any) -> Env:
    """Build an environment by short name or gymnax id.

    Raises ``ValueError`` with the nearest names when ``name`` is unknown.
    """
    canonical = canonical_name(name)
    if canonical is None:
        close = suggest(name)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"unknown environment {name!r}.{hint} See jaxrl.envs.names().")
    if is_brax(canonical):
        return _make_brax(canonical, **kwargs)
    kwargs.pop("backend", None)
    kwargs.pop("episode_length", None)
    import gymnax

    env, params = gymnax.make(canonical, **kwargs)
    return GymnaxEnv(env, params, name=canonical)


def _make_brax(canonical: str, backend: str = "positional", episode_length: int = 1000) -> Env:
    import importlib.util

    if importlib.util.find_spec("brax") is None:
        raise ConfigError(
            "env", canonical, "is a brax environment and brax is not installed", "pip install 'jaxrl[brax]'"
        )
    from jaxrl.envs.brax_env import BraxEnv, quietly

    with quietly():
        from brax import envs as brax_envs

    inner = canonical.split(":", 1)[1] if canonical.startswith("brax:") else canonical
    if inner not in brax_envs._envs:  # brax's registry
        known = ", ".join(sorted(brax_envs._envs))
        raise ConfigError("env", canonical, f"is not a brax environment (brax has: {known})", "pick one of those")
    return BraxEnv(inner, backend=backend, episode_length=episode_length)


def from_gymnax(env: Any, params: Any = None) -> Env:
    """Adapt a gymnax ``Environment`` instance (e.g. a user's own subclass)."""

    return GymnaxEnv(env, params)


def as_env(env: Any) -> Env:
    """Accept a jaxrl :class:`Env` or a gymnax ``Environment``."""
    if isinstance(env, Env):
        return env
    if hasattr(env, "step_env") and hasattr(env, "reset_env"):
        return from_gymnax(env)
    raise TypeError(f"env must be a jaxrl.envs.Env or a gymnax Environment, got {type(env).__name__}")


# Parameters some gymnax envs store pre-computed; kept consistent when the
# inputs are changed (held-out evaluation, domain randomization).
_DERIVED = {
    "CartPole-v1": {
        "total_mass": lambda p: p.masspole + p.masscart,
        "polemass_length": lambda p: p.masspole * p.length,
    },
}


def param_names(env: Env) -> list[str]:
    """Names of the env's numeric parameters (fields of its params dataclass)."""
    import dataclasses

    params = env.default_params
    if not dataclasses.is_dataclass(params):
        return []
    derived = _DERIVED.get(env.name, {})
    return [f.name for f in dataclasses.fields(params) if f.name not in derived and f.name != "max_steps_in_episode"]


def with_params(env: Env, params: Any = None, **changes: float) -> Any:
    """``params`` (default: the env's) with ``changes`` applied and derived
    fields (e.g. CartPole's ``polemass_length``) recomputed."""
    params = env.default_params if params is None else params
    params = params.replace(**changes)
    derived = _DERIVED.get(env.name, {})
    if derived:
        params = params.replace(**{name: fn(params) for name, fn in derived.items()})
    return params
