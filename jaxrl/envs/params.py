"""Env parameters by name: the numeric fields of a gymnax ``EnvParams`` and
those derived from others (kept consistent when the inputs change: held-out
evaluation, domain randomization)."""

from __future__ import annotations

import dataclasses
from typing import Any

from jaxrl.envs.core import Env

__all__ = ["param_names", "with_params"]

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
    params = env.default_params
    if not dataclasses.is_dataclass(params):
        return []
    derived = _DERIVED.get(getattr(env, "base_name", env.name), {})
    return [f.name for f in dataclasses.fields(params) if f.name not in derived and f.name != "max_steps_in_episode"]


def with_params(env: Env, params: Any = None, **changes: float) -> Any:
    """``params`` (default: the env's) with ``changes`` applied and derived
    fields (e.g. CartPole's ``polemass_length``) recomputed."""
    params = env.default_params if params is None else params
    params = params.replace(**changes)
    derived = _DERIVED.get(getattr(env, "base_name", env.name), {})
    if derived:
        params = params.replace(**{name: fn(params) for name, fn in derived.items()})
    return params
