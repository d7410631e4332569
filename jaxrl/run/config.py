"""Parsing and validation of run configs (the dataclasses: :mod:`jaxrl.core.config`).

The command line is parsed by hydra (``key=value`` overrides on structured
configs). Parsing order: dataclass defaults ← the env/algo preset ← the user's
overrides. Every mistake is reported as a :class:`~jaxrl.core.errors.ConfigError`:
one line naming the field, the value, the constraint and a fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from typing import Any

from jaxrl import envs
from jaxrl.algos.ppo import PPOConfig
from jaxrl.core.checks import require_one_of, require_positive_int
from jaxrl.core.config import (
    MAX_MEMBERS,
    PBT_BOUNDS,
    Config,
    DistConfig,
    EnvConfig,
    EvalConfig,
    PBTConfig,
    SweepConfig,
    seed_ids,
)
from jaxrl.core.contract import configs as algo_configs
from jaxrl.core.contract import get, names
from jaxrl.core.errors import ConfigError, error_line
from jaxrl.envs import canonical_name
from jaxrl.nets.networks import make_torso, torso_names

__all__ = [
    "ALGOS",
    "check_env_actions",
    "MAX_MEMBERS",
    "PBT_BOUNDS",
    "PRESETS",
    "from_dict",
    "normalize_overrides",
    "parse",
    "schema",
    "seed_ids",
    "to_dict",
    "validate",
]


# {name: config class} of every registered algorithm (the hydra group `algo`).
ALGOS: Mapping[str, type] = algo_configs


# ---------------------------------------------------------------------------
# Presets: settings per (env, algo), applied under the user's overrides
# ---------------------------------------------------------------------------


class _Presets(Mapping):
    """``{(env id, algo name): overrides}`` over the registered algorithms'
    presets (each algorithm declares its own: :attr:`jaxrl.algos.Algorithm.presets`)."""

    def _items(self) -> dict[tuple[str, str], Mapping[str, Any]]:

        return {(env, name): p for name in names() for env, p in get(name).presets.items()}

    def __getitem__(self, key: tuple[str, str]) -> Mapping[str, Any]:
        return self._items()[key]

    def __iter__(self):
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


PRESETS: Mapping[tuple[str, str], Mapping[str, Any]] = _Presets()


# ---------------------------------------------------------------------------
# Parsing (hydra compose API on structured configs)
# ---------------------------------------------------------------------------


def _field_types(cls: type) -> dict[str, Any]:
    return {f.name: f.type for f in dataclasses.fields(cls)}


SECTIONS: dict[str, type] = {
    "env": EnvConfig,
    "eval": EvalConfig,
    "pbt": PBTConfig,
    "sweep": SweepConfig,
    "dist": DistConfig,
}


def schema(algo: str = "ppo") -> dict[str, dataclasses.Field]:
    """Every settable dotted key → its dataclass field."""
    out: dict[str, dataclasses.Field] = {}
    for f in dataclasses.fields(Config):
        if f.name == "algo":
            for g in dataclasses.fields(ALGOS.get(algo, PPOConfig)):
                if g.name != "name":
                    out[f"algo.{g.name}"] = g
        elif f.name in SECTIONS:
            for g in dataclasses.fields(SECTIONS[f.name]):
                out[f"{f.name}.{g.name}"] = g
        else:
            out[f.name] = f
    return out


def _int_keys() -> set[str]:
    keys: set[str] = set()
    for algo in ALGOS:
        keys |= {k for k, f in schema(algo).items() if f.type in ("int", int)}
    return keys


def _all_keys(algo: str) -> list[str]:
    return list(schema(algo))


_FLOAT_INT = re.compile(r"^[+-]?\d+(\.\d*)?[eE][+-]?\d+$|^[+-]?\d+\.0*$")


def _str_keys() -> set[str]:
    return {k for k, f in schema().items() if f.type in ("str", str, "str | None")}


def _normalize_override(item: str, int_keys: set[str], str_keys: set[str] | None = None) -> str:
    """Accept ``total_timesteps=2e5`` for integer fields (exact integers only)
    and any text for string fields (quoted for hydra's grammar, so
    ``eval.perturb=length=0.5,1 gravity=9.8`` needs no extra quoting)."""
    key, sep, value = item.partition("=")
    if sep and key in int_keys and _FLOAT_INT.match(value.strip()):
        number = float(value)
        if number.is_integer():
            return f"{key}={int(number)}"
    if sep and str_keys and key in str_keys and value[:1] not in ("'", '"') and any(c in value for c in "= \t"):
        return f"{key}='" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return item


def normalize_overrides(items: list[str]) -> list[str]:
    """The override rewriting :func:`parse` applies (for other hydra parsers):
    ``env=X`` → ``env.name=X``, ``2e5`` for integers, quoting of free text."""
    int_keys, str_keys = _int_keys(), _str_keys()
    items = ["env.name=" + o.partition("=")[2] if o.partition("=")[0].strip() == "env" else o for o in items]
    return [_normalize_override(o, int_keys, str_keys) for o in items]


def _split_override(item: str) -> tuple[str, str]:
    if "=" not in item:
        fix = f"write env={item}" if canonical_name(item) else f"write e.g. {item}=VALUE"
        raise ConfigError(item, "(no value)", "overrides are key=value", fix)
    key, _, value = item.partition("=")
    if not key.strip():
        raise ConfigError("(no key)", value, f"{item!r} has nothing before '='", "write KEY=VALUE, e.g. seeds=4")
    return key.strip(), value


def _check_override_syntax(item: str) -> None:
    key, value = _split_override(item)
    if key.startswith(("+", "~")) or key.startswith("hydra"):
        raise ConfigError(
            key,
            value,
            "adding or deleting config keys is not allowed",
            f"set an existing key without the prefix, e.g. {key.lstrip('+~')}={value}",
        )
    if "_target_" in key or "_target_" in value:
        raise ConfigError(
            key,
            value,
            "object instantiation (_target_) from configs is not allowed",
            "remove the _target_ override",
        )


def _hydra_compose(overrides: list[str]):
    from hydra import compose, initialize
    from hydra.core.config_store import ConfigStore
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    def node(cls: type):
        # Frozen dataclasses become read-only OmegaConf nodes; overrides must be
        # able to write them during composition (the result is frozen again
        # when converted back to the dataclass).
        n = OmegaConf.structured(cls)
        _writable(n)
        return n

    def _writable(container) -> None:
        OmegaConf.set_readonly(container, False)
        keys = range(len(container)) if OmegaConf.is_list(container) else list(container.keys())
        for key in keys:
            child = container._get_node(key)
            if OmegaConf.is_config(child):
                _writable(child)

    store = ConfigStore.instance()
    base = node(Config)
    base.algo = "???"  # filled by the algo group (ppo, sac, …), whatever its dataclass
    store.store(name="jaxrl_base", node=base)
    for name, cls in ALGOS.items():
        store.store(group="algo", name=name, node=node(cls))
    store.store(name="jaxrl", node={"defaults": ["jaxrl_base", {"algo": "ppo"}, "_self_"]})

    GlobalHydra.instance().clear()
    with initialize(version_base=None, config_path=None):
        return compose(config_name="jaxrl", overrides=overrides)


def _explain_hydra_error(error: Exception, overrides: list[str]) -> ConfigError:
    """Turn a hydra/omegaconf composition error into a one-line ConfigError."""
    cause = error.__cause__ or error
    text = str(cause)
    full_key = re.search(r"full_key: (\S+)", text)
    key = full_key.group(1) if full_key else None
    values = dict(_split_override(o) for o in overrides if "=" in o)
    algo = values.get("algo", "ppo")
    if "Could not find 'algo/" in str(error):
        return ConfigError(
            "algo",
            algo,
            f"unknown algorithm; known: {', '.join(sorted(ALGOS))}",
            "pass algo=ppo or algo=sac",
        )
    missing = re.search(r"Key '([^']+)' not in '(\w+)'", text) or re.search(r"Could not override '([^']+)'", str(error))
    if missing:
        name = key or missing.group(1)
        if name not in values and missing.group(1) in values:
            name = missing.group(1)
        if name not in values:  # hydra names the first unknown part of a dotted key
            name = next((k for k in values if k.startswith(name + ".")), name)
        close = difflib.get_close_matches(name, _all_keys(algo), n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}?" if close else "see `python -m jaxrl.train --help`"
        return ConfigError(name, values.get(name, "?"), "unknown config key", hint)
    convert = re.search(r"Value '([^']*)' of type '(\w+)' could not be converted to (\w+)", text)
    if convert:
        name = key or "?"
        wanted = convert.group(3).lower()
        article = "an" if wanted[0] in "aeiou" else "a"
        return ConfigError(
            name,
            values.get(name, convert.group(1)),
            f"must be {article} {wanted}",
            f"pass {article} {wanted}, e.g. {name}={_example(name, wanted)}",
        )
    invalid = re.search(r"Value '([^']*)' is not a valid (\w+)", text)
    if invalid and key:
        kind = invalid.group(2).lower()
        rule, example = ("must be true or false", "true") if kind == "bool" else (f"must be a {kind}", "…")
        return ConfigError(key, values.get(key, invalid.group(1)), rule, f"pass {key}={example}")
    if key and "is not a ListConfig" in text:
        return ConfigError(key, values.get(key, "?"), "must be a list", f"pass {key}=[{_example(key, 'list')}]")
    if key and key in values:
        return ConfigError(key, values[key], error_line(cause), "check the override syntax key=value")
    return ConfigError(
        key or "overrides", " ".join(overrides), error_line(cause), "check the override syntax key=value"
    )


def _example(name: str, kind: str) -> str:
    """The field's default value as an example, else a generic one of its type."""
    f = schema().get(name)
    if f is not None and not isinstance(f.default, type(dataclasses.MISSING)):
        value = f.default
        if isinstance(value, tuple):
            return ",".join(str(v) for v in value)
        return str(value).lower() if isinstance(value, bool) else str(value)
    return {"integer": "4", "float": "0.001", "boolean": "true", "string": "name"}.get(kind, "VALUE")


def _freeze(obj: Any) -> Any:
    """Lists → tuples, recursively through dataclasses, so configs are hashable."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        values = {f.name: _freeze(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return type(obj)(**values)
    if isinstance(obj, list):
        return tuple(_freeze(v) for v in obj)
    return obj


def parse(overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Build a validated-for-syntax :class:`Config` from ``key=value`` overrides.

    Presets for the chosen env and algorithm apply first; the user's overrides
    win over them. Raises :class:`ConfigError` for unknown keys, wrong types and
    malformed overrides. Semantic checks (sizes, ranges, env names) are done by
    :func:`validate`.
    """
    from omegaconf import OmegaConf

    overrides = [str(o) for o in overrides]
    for item in overrides:
        _check_override_syntax(item)
    values = dict(_split_override(o) for o in overrides)
    original = overrides
    overrides = normalize_overrides(overrides)
    algo = values.get("algo", "ppo")
    env = values.get("env", values.get("env.name", EnvConfig.name))
    preset: dict[str, Any] = {}
    if algo in ALGOS:
        canonical = canonical_name(env)
        if canonical is not None:
            preset = dict(get(algo).presets.get(canonical, {}))
    preset_overrides = [f"{k}={_to_override_value(v)}" for k, v in preset.items()]
    try:
        composed = _hydra_compose(preset_overrides + overrides)
        config = OmegaConf.to_object(composed)
    except Exception as error:  # hydra/omegaconf raise many types
        raise _explain_hydra_error(error, original) from None
    return _freeze(config)


def _to_override_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_to_override_value(v) for v in value) + "]"
    return str(value)


def to_dict(config: Config) -> dict[str, Any]:
    """Plain-dict view (for config.yaml and summary.json)."""
    out = dataclasses.asdict(config)
    return _lists(out)


def _lists(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _lists(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_lists(v) for v in obj]
    return obj


def from_dict(data: dict[str, Any]) -> Config:
    """Inverse of :func:`to_dict` (used by ``resume=``)."""
    data = dict(data)
    algo = dict(data.pop("algo"))
    algo_cls = ALGOS.get(algo.get("name", "ppo"))
    if algo_cls is None:
        raise ConfigError("algo", algo.get("name"), "unknown algorithm", "pass algo=ppo")
    known = {f.name for f in dataclasses.fields(algo_cls)}
    unknown = sorted(set(algo) - known)
    if unknown:
        raise ConfigError(f"algo.{unknown[0]}", algo[unknown[0]], "unknown config key", "edit config.yaml")
    top_known = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(data) - top_known)
    if unknown:
        raise ConfigError(unknown[0], data[unknown[0]], "unknown config key", "edit config.yaml")
    if isinstance(data.get("env"), str):  # older run directories
        data["env"] = {"name": data["env"]}
    sections = {}
    for name, cls in SECTIONS.items():
        values = dict(data.pop(name, None) or {})
        known_fields = {f.name for f in dataclasses.fields(cls)}
        extra = sorted(set(values) - known_fields)
        if extra:
            raise ConfigError(f"{name}.{extra[0]}", values[extra[0]], "unknown config key", "edit config.yaml")
        sections[name] = cls(**values)
    return _freeze(Config(algo=algo_cls(**algo), **sections, **data))


# ---------------------------------------------------------------------------
# Semantic validation (before anything compiles)
# ---------------------------------------------------------------------------


def validate(config: Config) -> Config:
    """Check sizes, ranges and choices; return the config or raise ConfigError."""
    if envs.canonical_name(config.env.name) is None:
        close = envs.suggest(config.env.name)
        hint = f"did you mean {' or '.join(close)}?" if close else "list names with jaxrl.envs.names()"
        raise ConfigError("env", config.env.name, "unknown environment", hint)
    if config.env.backend not in ("positional", "generalized", "spring", "mjx"):
        raise ConfigError(
            "env.backend",
            config.env.backend,
            "must be positional, generalized, spring or mjx",
            "pass env.backend=positional",
        )
    if config.env.episode_length < 0:
        raise ConfigError(
            "env.episode_length", config.env.episode_length, "must be ≥ 0 (0 = 1000)", "pass env.episode_length=1000"
        )

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
    _finite_floats(config)
    require_positive_int("num_envs", config.num_envs, 4)
    require_positive_int("total_timesteps", config.total_timesteps, 500000)
    require_positive_int("num_evals", config.num_evals, 20)
    require_positive_int("eval.episodes", config.eval.episodes, 16)
    require_positive_int("keep", config.keep, 2)
    if config.resume is not None and not str(config.resume).strip():
        raise ConfigError("resume", "", "needs the run directory to continue", "pass resume=RUN_DIR, or drop resume=")
    _validate_logger(config.logger)
    if config.progress not in (True, False, "chunk"):
        raise ConfigError("progress", config.progress, "must be true, false or chunk", "pass progress=chunk")
    if not isinstance(config.compile_cache, str) or not config.compile_cache.strip():
        raise ConfigError(
            "compile_cache", config.compile_cache, "must be auto, off or a directory", "pass compile_cache=off"
        )
    _validate_parallel(config)
    require_one_of("perf", config.perf, ("auto", "on", "off"), "auto")
    require_one_of("on_nan", config.on_nan, ("stop", "drop"), "stop")
    if config.eval.max_steps < 0:
        raise ConfigError(
            "eval.max_steps", config.eval.max_steps, "must be ≥ 0 (0 = env's limit)", "pass eval.max_steps=0"
        )
    _validate_pbt(config.pbt)
    if config.sweep.samples < 0:
        raise ConfigError("sweep.samples", config.sweep.samples, "must be ≥ 0 (0 = grid)", "pass sweep.samples=64")
    if config.sweep.max_members < 0:
        raise ConfigError(
            "sweep.max_members", config.sweep.max_members, "must be ≥ 0 (0 = one program per group)", "pass e.g. 4096"
        )

    algorithm = get(config.algo.name)
    _validate_actions(config, algorithm)
    algorithm.validate(config)
    if config.pbt.population:
        for name in config.pbt.hparams:
            if name not in algorithm.traced:
                raise ConfigError(
                    "pbt.hparams",
                    list(config.pbt.hparams),
                    f"{name!r} is not a float hyperparameter of {algorithm.name}",
                    f"pick from {', '.join(algorithm.pbt_bounds)}",
                )
            if name not in algorithm.pbt_bounds:
                raise ConfigError(
                    "pbt.hparams",
                    list(config.pbt.hparams),
                    f"{name!r} cannot evolve in {algorithm.name}; evolvable: {', '.join(algorithm.pbt_bounds)}",
                    f"pass pbt.hparams=[{','.join(list(algorithm.pbt_bounds)[:2])}]",
                )
    return config


def _validate_actions(config: Config, algorithm: Any) -> None:
    """The env's action kind must be one the algorithm handles (its backend
    says which, :func:`jaxrl.envs.action_kind`)."""
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
    import math

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
    import importlib.util

    choices = ("jsonl", "tensorboard", "wandb", "tensorboard+wandb")
    if logger not in choices:
        raise ConfigError("logger", logger, f"must be one of {', '.join(choices)}", "pass logger=tensorboard")
    needs = {"tensorboard": ("tensorboardX", "tensorboard"), "wandb": ("wandb", "wandb")}
    for name, (module, extra) in needs.items():
        if name in logger and importlib.util.find_spec(module) is None:
            raise ConfigError(
                "logger", logger, f"needs the {module} package, which is not installed", f"pip install 'jaxrl[{extra}]'"
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
    require_positive_int("dist.heartbeat_s", dist.heartbeat_s, 30)


def _validate_pbt(pbt: PBTConfig) -> None:
    if pbt.population < 0 or pbt.population == 1:
        raise ConfigError("pbt.population", pbt.population, "must be 0 (off) or ≥ 2", "pass pbt.population=16")
    if pbt.interval < 0:
        raise ConfigError("pbt.interval", pbt.interval, "must be ≥ 0 updates (0 = one chunk)", "pass pbt.interval=0")
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
