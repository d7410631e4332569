"""Shared validators: each raises a one-line :class:`~jaxrl.core.errors.ConfigError`
naming the field, the value, the constraint and a fix. Algorithms call them from
their ``validate`` hook; configs are duck-typed (``config.algo``, ``num_envs``, …)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jaxrl.core.errors import ConfigError

__all__ = [
    "ACTIVATIONS",
    "Range",
    "POSITIVE",
    "NON_NEGATIVE",
    "UNIT",
    "OPEN_UNIT",
    "POSITIVE_INT",
    "NON_NEGATIVE_INT",
    "check_mlp",
    "check_non_negative",
    "check_positive",
    "check_rollout",
    "divisor_near",
    "require_non_negative",
    "require_one_of",
    "require_positive_int",
    "require_unit_interval",
    "require_update_count",
]


ACTIVATIONS = ("tanh", "relu", "elu", "gelu", "silu")


@dataclass(frozen=True)
class Range:
    """A one-value range check for a config field's metadata
    (:func:`jaxrl.core.fields.setting` / :func:`~jaxrl.core.fields.traced`):
    ``Range(0, 1)`` is ``[0, 1]``, ``Range(0, lo_open=True)`` is ``> 0``; ``note``
    is said after the range. Called as ``check(key, value, default)``; the fix
    quotes the field's default."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    note: str = ""
    integer: bool = False  # the value must be an int (not a bool)

    def describe(self) -> str:
        if self.integer and self.lo == 1 and self.hi is None:
            return "must be a positive integer" + (f" ({self.note})" if self.note else "")
        if self.hi is None:
            text = f"must be {'>' if self.lo_open else '≥'} {self.lo:g}"
        elif self.lo is None:
            text = f"must be {'<' if self.hi_open else '≤'} {self.hi:g}"
        else:
            text = f"must lie in {'(' if self.lo_open else '['}{self.lo:g}, {self.hi:g}{')' if self.hi_open else ']'}"
        return text + (f" ({self.note})" if self.note else "")

    def holds(self, value: Any) -> bool:
        if self.integer and (isinstance(value, bool) or not isinstance(value, int)):
            return False
        value = float(value)
        if self.lo is not None and not (value > self.lo if self.lo_open else value >= self.lo):
            return False
        return self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)

    def __call__(self, key: str, value: Any, default: Any) -> None:
        if not self.holds(value):
            raise ConfigError(key, value, self.describe(), f"pass e.g. {key}={default}")


POSITIVE = Range(0.0, lo_open=True)
NON_NEGATIVE = Range(0.0)
UNIT = Range(0.0, 1.0)
OPEN_UNIT = Range(0.0, 1.0, lo_open=True)  # (0, 1]: a Polyak rate

POSITIVE_INT = Range(1, integer=True)
NON_NEGATIVE_INT = Range(0, integer=True)


def require_positive_int(name: str, value: Any, example: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(name, value, "must be a positive integer", f"pass e.g. {name}={example}")


def require_unit_interval(name: str, value: float, default: float) -> None:
    if not (0.0 <= float(value) <= 1.0):
        raise ConfigError(name, value, "must lie in [0, 1]", f"pass e.g. {name}={default}")


def check_mlp(algo: Any, example: str = "[64,64]") -> None:
    """``algo.hidden_sizes`` (positive ints, at least one) and ``algo.activation``."""
    if not algo.hidden_sizes or any(isinstance(h, bool) or not isinstance(h, int) or h <= 0 for h in algo.hidden_sizes):
        raise ConfigError(
            "algo.hidden_sizes",
            list(algo.hidden_sizes),
            "must be a non-empty list of positive integers",
            f"pass algo.hidden_sizes={example}",
        )
    if algo.activation not in ACTIVATIONS:
        raise ConfigError(
            "algo.activation",
            algo.activation,
            f"must be one of {', '.join(ACTIVATIONS)}",
            f"pass algo.activation={type(algo).activation}",
        )


def check_positive(algo: Any, *names: str) -> None:
    """Each ``algo.<name>`` > 0 (the fix quotes the config class's default)."""
    for name in names:
        if not float(getattr(algo, name)) > 0:
            raise ConfigError(
                f"algo.{name}", getattr(algo, name), "must be > 0", f"pass e.g. algo.{name}={getattr(type(algo), name)}"
            )


def check_non_negative(algo: Any, *names: str) -> None:
    """Each ``algo.<name>`` ≥ 0 (the fix quotes the config class's default)."""
    for name in names:
        require_non_negative(f"algo.{name}", getattr(algo, name), getattr(type(algo), name))


def check_rollout(config: Any, example_steps: int) -> int:
    """``algo.num_steps`` > 0, a budget of at least one rollout, an update count
    that fits the program's int32; returns the rollout size ``num_envs × num_steps``."""
    algo = config.algo
    require_positive_int("algo.num_steps", algo.num_steps, example_steps)
    batch = config.num_envs * algo.num_steps
    if config.total_timesteps < batch:
        raise ConfigError(
            "total_timesteps",
            config.total_timesteps,
            f"is below one rollout (num_envs × algo.num_steps = {batch})",
            f"pass total_timesteps≥{batch} or fewer num_envs/algo.num_steps",
        )
    require_update_count(config, batch)
    return batch


def require_one_of(name: str, value: Any, choices: tuple[str, ...], default: str) -> None:
    """``value`` is one of ``choices`` ("must be a, b or c"; the fix passes ``default``)."""
    if value not in choices:
        listed = ", ".join(choices[:-1]) + " or " + choices[-1]
        raise ConfigError(name, value, f"must be {listed}", f"pass {name}={default}")


def require_non_negative(name: str, value: float, default: float) -> None:
    if not float(value) >= 0.0:
        raise ConfigError(name, value, "must be ≥ 0", f"pass e.g. {name}={default}")


def require_update_count(config: Any, steps_per_update: int, warmup: int = 0) -> None:
    """The update counter is an int32 inside the program."""
    updates = max(0, config.total_timesteps - warmup) // steps_per_update
    if updates >= 2**31 - 1:
        raise ConfigError(
            "total_timesteps",
            config.total_timesteps,
            f"gives {updates:,} updates of {steps_per_update:,} env steps; the program counts at most {2**31 - 2:,}",
            f"pass total_timesteps≤{(2**31 - 2) * steps_per_update + warmup:.3g} or more envs per update",
        )


def divisor_near(n: int, target: int) -> int:
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    return min(divisors, key=lambda d: (abs(d - target), d))
