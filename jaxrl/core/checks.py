"""Shared validators: each raises a one-line :class:`~jaxrl.core.errors.ConfigError`
naming the field, the value, the constraint and a fix. Algorithms call them from
their ``validate`` hook; configs are duck-typed (``config.algo``, ``num_envs``, …)."""

from __future__ import annotations

from typing import Any

from jaxrl.core.errors import ConfigError

__all__ = [
    "ACTIVATIONS",
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
