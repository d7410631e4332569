"""From ``key=value`` overrides (or a run's ``config.yaml``) to a validated run
config (the dataclasses: :mod:`jaxrl.core.config`).

The command line is parsed by hydra (``key=value`` overrides on structured
configs). Parsing order: dataclass defaults ← the env/algo preset ← the user's
overrides. :func:`resolve` is the one place a run's config is parsed and
validated (:mod:`jaxrl.run.validation`), ``resume=RUN_DIR`` included; every
mistake is a :class:`~jaxrl.core.errors.ConfigError`: one line naming the
field, the value, the constraint and a fix.

>>> config = jaxrl.config_for("cartpole", seeds=4)     # the CLI's config, from Python
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Mapping
from typing import Any

import jaxrl.algos  # noqa: F401  (registers the built-in algorithms, which the schema lists)
from jaxrl.core.config import RESUMABLE, SECTIONS, Config, EnvConfig
from jaxrl.core.contract import configs as algo_configs
from jaxrl.core.contract import get, names
from jaxrl.core.errors import ConfigError, error_line
from jaxrl.envs import canonical_name
from jaxrl.envs.host import is_host, preset_name
from jaxrl.run.validation import validate

__all__ = [
    "ALGOS",
    "PRESETS",
    "config_for",
    "from_dict",
    "load_run_config",
    "normalize_overrides",
    "parse",
    "resolve",
    "schema",
    "to_dict",
]


# {name: config class} of every registered algorithm (the hydra group `algo`).
ALGOS: Mapping[str, type] = algo_configs


# ---------------------------------------------------------------------------
# Presets: settings per (env, algo), applied under the user's overrides
# ---------------------------------------------------------------------------


HOST_PRESET = "host"  # the preset key of an algorithm's settings for every host env (env=gymnasium:ID, …)


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


def schema(algo: str = "ppo") -> dict[str, dataclasses.Field]:
    """Every settable dotted key → its dataclass field."""
    out: dict[str, dataclasses.Field] = {}
    for f in dataclasses.fields(Config):
        if f.name == "algo":
            for g in dataclasses.fields(ALGOS[algo] if algo in ALGOS else ALGOS["ppo"]):
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
    ``env=X`` → ``env.name=X``, ``actor=X`` → ``actor.kind=X``, ``2e5`` for integers, quoting of free text."""
    int_keys, str_keys = _int_keys(), _str_keys()
    items = ["env.name=" + o.partition("=")[2] if o.partition("=")[0].strip() == "env" else o for o in items]
    items = ["actor.kind=" + o.partition("=")[2] if o.partition("=")[0].strip() == "actor" else o for o in items]
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
        if canonical is None and is_host(env):  # classic control ids are gymnax's envs: their presets
            canonical = preset_name(env) or canonical_name(f"gymnax:{env.partition(':')[2]}")
        preset = _preset(algo, canonical, str(values.get("preset", "default")))
        if is_host(env):  # the algorithm's settings for every host env, under the env's own preset
            preset = {**get(algo).presets.get(HOST_PRESET, {}), **preset}
    preset_overrides = [f"{k}={_to_override_value(v)}" for k, v in preset.items()]
    try:
        composed = _hydra_compose(preset_overrides + overrides)
        config = OmegaConf.to_object(composed)
    except Exception as error:  # hydra/omegaconf raise many types
        raise _explain_hydra_error(error, original) from None
    return _freeze(config)


def _preset(algo: str, env: str | None, name: str) -> dict[str, Any]:
    """The overrides of ``env``'s preset for ``algo``, then (``name`` other than
    ``default``) those of the named preset ``ENV@NAME`` over them."""
    presets = get(algo).presets
    merged = dict(presets.get(env, {})) if env is not None else {}
    if name == "default":
        return merged
    named = presets.get(f"{env}@{name}") if env is not None else None
    if named is None:
        names = sorted(k.partition("@")[2] for k in presets if env is not None and k.startswith(f"{env}@"))
        where = f"env={env or 'this env'} algo={algo}"
        fix = f"pass one of preset={', preset='.join(names)}" if names else "drop preset= (the env's own preset)"
        raise ConfigError("preset", name, f"is not a named preset of {where}", fix + " or preset=default")
    merged.update(named)
    return merged


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
# A run's config: from the command line, from config.yaml, from Python
# ---------------------------------------------------------------------------


def resolve(argv: list[str] | tuple[str, ...], check: bool = True) -> Config:
    """``key=value`` overrides → the validated :class:`Config` they run
    (``check=False``: parsed only, for a sweep's shared base).

    With ``resume=RUN_DIR`` it is that run's own config (its ``config.yaml``)
    with only the resumable settings (:data:`jaxrl.core.config.RESUMABLE`:
    how a run is watched or laid out) changed; anything else is refused."""
    overrides = [str(a) for a in argv if str(a).strip()]
    resume = None
    for item in overrides:
        key, _, value = item.partition("=")
        if key.strip() == "resume" and value not in ("", "null", "None"):
            resume = os.path.abspath(os.path.expanduser(value))
    if resume is None:
        config = parse(overrides)
        return validate(config) if check else config
    stored = load_run_config(resume)
    changed = [item for item in overrides if item.partition("=")[0].strip() != "resume"]
    for item in changed:
        key, _, value = item.partition("=")
        if key.strip() not in RESUMABLE:
            raise ConfigError(
                key.strip(),
                value,
                "cannot be changed when resuming (it would change the run)",
                "drop it, or start a new run",
            )
    given = parse(changed)
    changes: dict[str, Any] = {}
    for item in changed:
        section, _, name = item.partition("=")[0].strip().rpartition(".")
        if section:  # e.g. dist.process_id: each process of a multi-process run passes its own
            changes[section] = dataclasses.replace(
                changes.get(section, getattr(stored, section)), **{name: getattr(getattr(given, section), name)}
            )
        else:
            changes[name] = getattr(given, name)
    return validate(dataclasses.replace(stored, run_dir=resume, resume=resume, **changes))


def load_run_config(run_dir: str, field: str = "resume") -> Config:
    """The Config stored in ``run_dir/config.yaml`` (ConfigError naming ``field``)."""
    import yaml

    path = os.path.join(run_dir, "config.yaml")
    if not os.path.isdir(run_dir):
        raise ConfigError(
            field, run_dir, "directory does not exist", "pass the run directory printed at the start of a run"
        )
    if not os.path.isfile(path):
        raise ConfigError(
            field,
            run_dir,
            "is not a run directory (no config.yaml)",
            "pass the run directory printed at the start of a run",
        )
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
        if not isinstance(data, dict):
            raise ValueError("not a mapping")
        config = from_dict(data)
    except ConfigError as error:
        raise ConfigError(field, run_dir, f"config.yaml is invalid ({error})", "start a new run") from None
    except Exception as error:
        raise ConfigError(
            field, run_dir, f"config.yaml is corrupt ({type(error).__name__})", "start a new run"
        ) from None
    return config


def config_for(env: str, *overrides: str, **keys: Any) -> Config:
    """The validated config ``python -m jaxrl.train env=ENV …`` runs — the
    env's preset for the algorithm applied, then the overrides — for research
    code that calls :func:`jaxrl.make_train` itself.

    ``overrides`` are the CLI's own ``"key=value"`` strings; ``keys`` the same
    as keyword arguments, a section's keys as a dict::

        jaxrl.config_for("cartpole", seeds=4)
        jaxrl.config_for("pendulum", "algo.lr=1e-3", algo="sac", eval={"episodes": 4})

    Raises :class:`~jaxrl.core.errors.ConfigError` for a bad env, key or value.
    """
    items = [f"env={env}", *overrides]
    for key, value in keys.items():
        if isinstance(value, dict):
            items += [f"{key}.{k}={_to_override_value(v)}" for k, v in value.items()]
        else:
            items.append(f"{key}={_to_override_value(value)}")
    return resolve(items)
