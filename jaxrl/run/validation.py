"""Semantic validation of a run config, before anything is built or written:
sizes, ranges (each field's own check, :mod:`jaxrl.core.fields`), choices,
seeds, devices and hosts, PBT, the algorithm's action kinds and its own
cross-field checks. Every mistake is a one-line
:class:`~jaxrl.core.errors.ConfigError` naming the field, the value, the
constraint and a fix."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from typing import Any

from jaxrl import envs
from jaxrl.core.checks import require_one_of, require_positive_int
from jaxrl.core.config import MAX_MEMBERS, SECTIONS, Config, PBTConfig
from jaxrl.core.contract import Algorithm, get
from jaxrl.core.errors import ConfigError, install_command
from jaxrl.core.fields import walk
from jaxrl.envs.host import is_host
from jaxrl.nets.networks import make_torso, torso_names

__all__ = ["validate", "check_env_actions"]

BRAX_BACKENDS = ("positional", "generalized", "spring", "mjx")


def validate(config: Config) -> Config:
    """Check sizes, ranges and choices; return the config or raise ConfigError."""
    _check_env(config)
    _check_seeds(config)
    _finite_floats(config)
    _check_fields(config, "", Config)
    _check_choices(config)
    _validate_parallel(config)
    _validate_pbt(config.pbt)
    algorithm = get(config.algo.name)
    _validate_actions(config, algorithm)
    _check_fields(config.algo, "algo.", type(config.algo))
    algorithm.validate(config)
    _check_evolvable(config, algorithm)
    return config


def _check_env(config: Config) -> None:
    """A known env name and brax backend (a host env, ``gymnasium:ID``, is
    checked where its run is prepared: knowing its ids means importing its package)."""
    if is_host(config.env.name):
        return
    if envs.canonical_name(config.env.name) is None:
        close = envs.suggest(config.env.name)
        hint = f"did you mean {' or '.join(close)}?" if close else "list names with jaxrl.envs.names()"
        raise ConfigError("env", config.env.name, "unknown environment", hint)
    if config.env.backend not in BRAX_BACKENDS:
        raise ConfigError(
            "env.backend",
            config.env.backend,
            "must be positional, generalized, spring or mjx",
            "pass env.backend=positional",
        )


def _check_seeds(config: Config) -> None:
    """Seed ids: distinct integers ≥ 0 below 2³², at most :data:`MAX_MEMBERS` members."""
    seeds = config.seeds
    if isinstance(seeds, (list, tuple)):
        if not seeds:
            raise ConfigError("seeds", list(seeds), "must name at least one seed", "pass seeds=16 or seeds=[0,1]")
        for s in seeds:
            if isinstance(s, bool) or not isinstance(s, int) or s < 0:
                raise ConfigError("seeds", list(seeds), "seed ids must be integers ≥ 0", "pass seeds=[0,1,2]")
        if len(set(seeds)) != len(seeds):
            raise ConfigError("seeds", list(seeds), "seed ids must be distinct", "remove the repeated ids")
    else:
        require_positive_int("seeds", seeds, 16)
    if isinstance(config.seed, bool) or not isinstance(config.seed, int) or config.seed < 0:
        raise ConfigError("seed", config.seed, "must be an integer ≥ 0", "pass seed=0")
    members = config.pbt.population or (len(seeds) if isinstance(seeds, (list, tuple)) else seeds)
    if members > MAX_MEMBERS:
        raise ConfigError(
            "pbt.population" if config.pbt.population else "seeds",
            members,
            f"at most {MAX_MEMBERS:,} members fit one program (every record holds a value per member)",
            "split the seeds over several runs (seed=, seeds=[…])",
        )
    last = max(seeds) if isinstance(seeds, (list, tuple)) else config.seed + members - 1
    if last >= 2**32:
        raise ConfigError(
            "seeds" if isinstance(seeds, (list, tuple)) else "seed",
            list(seeds) if isinstance(seeds, (list, tuple)) else config.seed,
            f"seed ids must be below 2^32 = {2**32} (jax.random.key takes a uint32; the last id would be {last})",
            "pass smaller seed ids, e.g. seed=0",
        )


def _check_fields(section: Any, prefix: str, cls: type) -> None:
    """Every field's own range check (the ``check`` of its declaration)."""
    for key, f, policy in walk(cls, prefix):
        if policy.check is None:
            continue
        value = section
        for part in key[len(prefix) :].split("."):
            value = getattr(value, part)
        policy.check(key, value, f.default)


def _check_choices(config: Config) -> None:
    """The run's one-of settings."""
    if config.resume is not None and not str(config.resume).strip():
        raise ConfigError("resume", "", "needs the run directory to continue", "pass resume=RUN_DIR, or drop resume=")
    _validate_logger(config.logger)
    if config.progress not in (True, False, "chunk"):
        raise ConfigError("progress", config.progress, "must be true, false or chunk", "pass progress=chunk")
    if not isinstance(config.compile_cache, str) or not config.compile_cache.strip():
        raise ConfigError(
            "compile_cache", config.compile_cache, "must be auto, off or a directory", "pass compile_cache=off"
        )
    require_one_of("perf", config.perf, ("auto", "on", "off"), "auto")
    require_one_of("on_nan", config.on_nan, ("stop", "drop"), "stop")


def _check_evolvable(config: Config, algorithm: Algorithm) -> None:
    """``pbt.hparams`` names traced hyperparameters the algorithm lets PBT evolve."""
    if not config.pbt.population:
        return
    bounds = algorithm.pbt_bounds
    for name in config.pbt.hparams:
        if name not in algorithm.traced:
            raise ConfigError(
                "pbt.hparams",
                list(config.pbt.hparams),
                f"{name!r} is not a float hyperparameter of {algorithm.name}",
                f"pick from {', '.join(bounds)}",
            )
        if name not in bounds:
            raise ConfigError(
                "pbt.hparams",
                list(config.pbt.hparams),
                f"{name!r} cannot evolve in {algorithm.name}; evolvable: {', '.join(bounds)}",
                f"pass pbt.hparams=[{','.join(list(bounds)[:2])}]",
            )


def _validate_actions(config: Config, algorithm: Any) -> None:
    """The env's action kind must be one the algorithm handles (its backend
    says which, :func:`jaxrl.envs.action_kind`)."""
    if is_host(config.env.name):
        return  # known once the env is built (jaxrl.run.host)
    _refuse_actions(algorithm, envs.canonical_name(config.env.name), envs.action_kind(config.env.name))


def check_env_actions(config: Config, env: envs.Env) -> None:
    """:func:`validate`'s action check on the built ``env`` — for backends
    that cannot tell the kind before building (``Backend.actions`` → None) —
    and the torso's check of the env's observation shape (``algo.network=cnn``
    on vector observations). Called before a run writes anything."""
    kind = "discrete" if isinstance(env.action_space, envs.Discrete) else "continuous"
    _refuse_actions(get(config.algo.name), envs.canonical_name(config.env.name) or env.name, kind)
    network = getattr(config.algo, "network", None)
    if network in torso_names():  # the torso takes the env's observation rank (e.g. a CNN needs [H, W, C])
        make_torso(network, config.algo, tuple(env.obs_shape))


def _refuse_actions(algorithm: Any, env: str | None, kind: str | None) -> None:
    if kind is not None and kind not in algorithm.actions:
        other = " or ".join(algorithm.actions)
        examples = "pendulum, mountaincar-continuous, brax envs" if kind == "discrete" else "cartpole, acrobot"
        raise ConfigError(
            "algo",
            algorithm.name,
            f"needs {other} actions and {env} has {kind} ones",
            f"use algo=ppo, or a {other} env ({examples})",
        )


# Integer settings that never reach the program as an int32 (counted exactly on the host).
_WIDE_INTS = {"total_timesteps", "seed", "seeds"}


def _finite_floats(config: Config) -> None:
    """Every float setting is a finite number (NaN and ±inf pass no range check
    by themselves) and every integer one fits the program's int32."""
    for prefix, section in [("", config), ("algo.", config.algo), *((f"{n}.", getattr(config, n)) for n in SECTIONS)]:
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            ints = [v for v in (value if isinstance(value, tuple) else (value,)) if type(v) is int]
            if f.name not in _WIDE_INTS and any(abs(v) >= 2**31 for v in ints):
                raise ConfigError(
                    f"{prefix}{f.name}",
                    list(value) if isinstance(value, tuple) else value,
                    f"must be below 2^31 = {2**31} (an int32 inside the program)",
                    f"pass a smaller {prefix}{f.name}",
                )
            if isinstance(value, float) and not math.isfinite(value):
                default = f.default if isinstance(f.default, float) else 1.0
                raise ConfigError(
                    f"{prefix}{f.name}", value, "must be a finite number", f"pass e.g. {prefix}{f.name}={default}"
                )
            if isinstance(value, tuple) and any(isinstance(v, float) and not math.isfinite(v) for v in value):
                raise ConfigError(
                    f"{prefix}{f.name}",
                    list(value),
                    "must hold finite numbers",
                    f"drop the nan/inf from {prefix}{f.name}",
                )


def _validate_logger(logger: str) -> None:
    choices = ("jsonl", "tensorboard", "wandb", "tensorboard+wandb")
    if logger not in choices:
        raise ConfigError("logger", logger, f"must be one of {', '.join(choices)}", "pass logger=tensorboard")
    needs = {"tensorboard": ("tensorboardX", "tensorboard"), "wandb": ("wandb", "wandb")}
    for name, (module, extra) in needs.items():
        if name in logger and importlib.util.find_spec(module) is None:
            raise ConfigError(
                "logger", logger, f"needs the {module} package, which is not installed", install_command(extra)
            )


def _validate_parallel(config: Config) -> None:
    require_one_of("parallel", config.parallel, ("seeds", "data"), "seeds")
    if isinstance(config.devices, bool) or not isinstance(config.devices, int) or config.devices < 0:
        raise ConfigError("devices", config.devices, "must be an integer ≥ 0 (0: all devices)", "pass devices=0")
    if config.parallel == "data":
        if not get(config.algo.name).data_parallel:
            raise ConfigError(
                "parallel",
                "data",
                f"splits one run's envs over devices, which {config.algo.name} does not support (it shards seeds only)",
                "pass parallel=seeds",
            )
    dist = config.dist
    if isinstance(dist.num_processes, bool) or not isinstance(dist.num_processes, int) or dist.num_processes < 1:
        raise ConfigError(
            "dist.num_processes", dist.num_processes, "must be an integer ≥ 1", "pass dist.num_processes=2"
        )
    if not 0 <= dist.process_id < dist.num_processes:
        raise ConfigError(
            "dist.process_id",
            dist.process_id,
            f"must lie in [0, {dist.num_processes - 1}] (dist.num_processes={dist.num_processes})",
            "number the processes 0 … N-1",
        )
    if dist.num_processes > 1 and not dist.coordinator and not dist.auto:
        raise ConfigError(
            "dist.coordinator",
            "",
            "is needed when dist.num_processes > 1",
            "pass dist.coordinator=HOST:PORT of process 0",
        )
    if dist.coordinator:
        host, sep, port = dist.coordinator.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(
                "dist.coordinator", dist.coordinator, "must be HOST:PORT", "pass e.g. dist.coordinator=10.0.0.1:1234"
            )


def _validate_pbt(pbt: PBTConfig) -> None:
    """The population and its exploit/explore settings."""
    if pbt.population < 0 or pbt.population == 1:
        raise ConfigError("pbt.population", pbt.population, "must be 0 (off) or ≥ 2", "pass pbt.population=16")
    if not 0.0 < pbt.fraction <= 0.5:
        raise ConfigError("pbt.fraction", pbt.fraction, "must lie in (0, 0.5]", "pass pbt.fraction=0.25")
    if not 0.0 <= pbt.resample_prob <= 1.0:
        raise ConfigError("pbt.resample_prob", pbt.resample_prob, "must lie in [0, 1]", "pass pbt.resample_prob=0.25")
    if not pbt.perturb_factors or any(f <= 0 for f in pbt.perturb_factors):
        raise ConfigError(
            "pbt.perturb_factors",
            list(pbt.perturb_factors),
            "must be positive numbers",
            "pass pbt.perturb_factors=[0.8,1.25]",
        )
    if pbt.init_spread < 1.0:
        raise ConfigError("pbt.init_spread", pbt.init_spread, "must be ≥ 1", "pass pbt.init_spread=2")
