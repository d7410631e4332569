"""Env parameters by name: the numeric fields of a gymnax ``EnvParams`` and
those derived from others (kept consistent when the inputs change: held-out
evaluation, domain randomization)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from jaxrl.core.errors import ConfigError
from jaxrl.envs.core import Env

__all__ = ["param_names", "with_params", "parse_grid_term", "grid"]

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


def parse_grid_term(
    part: str, env: Env, field: str, text: str, names: list[str] | None = None
) -> tuple[str, list[float]]:
    """``"length=0.25,0.5"`` → ``("length", [0.25, 0.5])``; ConfigError naming
    ``field`` (its whole value ``text``) for a malformed term, a parameter the
    env does not have or values that are not numbers."""
    names = param_names(env) if names is None else names
    key, sep, values = part.partition("=")
    if not sep or not values:
        raise ConfigError(field, text, f"{part!r} is not name=v1,v2,…", f'write e.g. {field}="length=0.5,1.0"')
    if key not in names:
        known = ", ".join(names) if names else "none"
        raise ConfigError(
            field, text, f"{key!r} is not a parameter of {env.name} (parameters: {known})", "use one of those names"
        )
    try:
        numbers = [float(v) for v in values.split(",") if v != ""]
    except ValueError:
        raise ConfigError(field, text, f"values of {key} must be numbers", f"write e.g. {key}=0.5,1.0") from None
    if not numbers:
        raise ConfigError(field, text, f"{key} has no values", f"write e.g. {key}=0.5,1.0")
    return key, numbers


def grid(axes: dict[str, list[float]]) -> list[dict[str, float]]:
    """Every combination of the axes' values (one dict per grid point; ``[{}]``
    for no axes)."""
    return [dict(zip(axes, combo, strict=True)) for combo in itertools.product(*axes.values())]
