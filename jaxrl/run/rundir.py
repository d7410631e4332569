"""Run directories: where a run lives (:func:`new_run_dir`), its ``config.yaml``,
the config hash a checkpoint must match (:func:`config_digest`, from the fields'
own policies), writing a checkpoint with a reason when it fails, the one-line
notes about an older checkpoint or another device layout, and leaving nothing
half-made behind."""

from __future__ import annotations

import dataclasses
import errno
import os
import shutil
import time
from typing import Any

from jaxrl.core.config import Config
from jaxrl.core.errors import ConfigError, error_line
from jaxrl.core.fields import policy_of
from jaxrl.core.version import __version__
from jaxrl.envs import canonical_name
from jaxrl.run.checkpoint import Checkpointer, config_hash, describe_layout
from jaxrl.run.io import jsonable
from jaxrl.run.overrides import to_dict
from jaxrl.run.parallel import is_primary

__all__ = [
    "new_run_dir",
    "shared_run_dir",
    "write_config",
    "config_digest",
    "config_digests",
    "accepted_hashes",
    "drop_added_at_default",
    "save_checkpoint",
    "layout_note",
    "discard",
]


def new_run_dir(config: Config, prefix: str = "", again: str = "continue") -> str:
    """``config.run_dir`` (which must be empty or absent), else a fresh
    ``<runs_root>/<prefix><env>-<algo>-<timestamp>`` (the sweep's too)."""
    if config.run_dir:
        path = os.path.abspath(os.path.expanduser(config.run_dir))
        if os.path.exists(path) and not os.path.isdir(path):
            raise ConfigError("run_dir", config.run_dir, "is a file, not a directory", "pick a new run_dir")
        if os.path.exists(path) and os.listdir(path):
            raise ConfigError(
                "run_dir",
                config.run_dir,
                "already exists and is not empty",
                f"pick a new run_dir, or {again} it with resume={config.run_dir}",
            )
        return path
    root = os.path.abspath(os.path.expanduser(config.runs_root))
    if os.path.exists(root) and not os.path.isdir(root):
        raise ConfigError("runs_root", config.runs_root, "is a file, not a directory", "pass runs_root=DIR")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    # a JAX env's canonical id; a host env's id as written, its backend prefix and any "/" made file-name safe
    env = canonical_name(config.env.name) or str(config.env.name).replace(":", "-").replace("/", "-")
    base = os.path.join(config.runs_root, f"{prefix}{env}-{config.algo.name}-{stamp}")
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    return os.path.abspath(path)


def shared_run_dir(config: Config) -> str:
    """Process 0 picks (and checks) the run directory; every process gets it."""
    import numpy as np
    from jax.experimental import multihost_utils

    buffer = np.zeros(4096, np.uint8)
    error = None
    if is_primary():
        try:
            path = new_run_dir(config).encode()
            buffer[: len(path)] = np.frombuffer(path, np.uint8)
        except ConfigError as e:
            error = e
    buffer = np.asarray(multihost_utils.broadcast_one_to_all(buffer))
    if error is not None:
        raise error
    text = bytes(buffer[buffer != 0]).decode()
    if not text:
        raise ConfigError("run_dir", config.run_dir, "process 0 could not create it", "see process 0's message")
    return text


def write_config(path: str, config: Config) -> None:
    """``config`` as ``config.yaml`` at ``path``, written atomically."""
    import yaml

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(to_dict(config), f, sort_keys=False)
    os.replace(tmp, path)


# (section, field, algorithm or None: every one) of hashed fields added after runs
# were written: at their defaults they are left out of the hash, so runs written
# before they existed still resume. Section "": a top-level field.
_CRITIC = tuple(("algo", name, algo) for algo in ("td3", "sac") for name in ("critic", "atoms", "v_min", "v_max"))
_FAST = (
    ("", "preset", None),
    *(("algo", name, algo) for algo in ("td3", "sac") for name in ("critic_hidden_sizes", "norm", "weight_decay")),
    ("algo", "noise_scales", "td3"),
    ("algo", "noise_min", "td3"),
)
ADDED_AT_DEFAULT = (
    ("env", "module", None),
    *_CRITIC,
    *_FAST,
    ("algo", "policy_delay", "sac"),
    ("algo", "n_step", "td3"),
    ("algo", "n_step", "sac"),
)
# What earlier versions wrote, as the added fields each kept in the hash at their defaults:
# the compiled runs of the version that added _FAST kept them; host runs kept every field
# that existed (before _FAST: env.module and _CRITIC; then those and _FAST).
COMPILED_KEPT_BEFORE = (_FAST,)
HOST_KEPT_BEFORE = ((("env", "module", None), *_CRITIC, *_FAST), (("env", "module", None), *_CRITIC))


def drop_added_at_default(
    data: dict[str, Any], config: Config, keep: tuple[tuple[str, str, str | None], ...] = ()
) -> dict[str, Any]:
    """``data`` (``config`` as a dict) without the :data:`ADDED_AT_DEFAULT` fields
    (but those in ``keep``) that are at their defaults."""
    for section, name, algo in ADDED_AT_DEFAULT:
        if (section, name, algo) in keep or (algo is not None and config.algo.name != algo):
            continue
        if not section:
            default = next(f.default for f in dataclasses.fields(Config) if f.name == name)
            if name in data and data[name] == default:
                data.pop(name)
            continue
        default = type(getattr(config, section))()  # the section's own defaults (algo: its algorithm's)
        kept = data.get(section, {})
        if name in kept and kept[name] == to_dict(default)[name]:
            kept.pop(name)
    return data


def accepted_hashes(
    data: dict[str, Any], config: Config, before: tuple[tuple[tuple[str, str, str | None], ...], ...]
) -> tuple[str, ...]:
    """The hashes a checkpoint of ``config`` (``data``: its hashed dict) may carry: this
    version's first, then each earlier version's (``before``: the added fields it kept)."""
    import copy

    return tuple(config_hash(drop_added_at_default(copy.deepcopy(data), config, keep)) for keep in ((), *before))


def config_digest(spec: Any) -> str:
    """Hash of everything that fixes a run's program and its numbers: the
    config's hashed fields (a field's policy, :mod:`jaxrl.core.fields`: not
    where the run lives, nor how it is watched or laid out) and its members'
    seeds, configurations and hyperparameters."""
    return config_digests(spec)[0]


def config_digests(spec: Any) -> tuple[str, ...]:
    """:func:`config_digest`, then the digests older versions wrote for the same run
    (fields added since at their defaults: :data:`ADDED_AT_DEFAULT`); a checkpoint with any resumes."""
    import jax
    import numpy as np

    data = to_dict(spec.config)
    for f in dataclasses.fields(Config):
        if not policy_of(f).hashed:
            data.pop(f.name, None)
    members = spec.members
    hparams = jax.tree.map(np.asarray, members.hparams)
    data["_members"] = {
        "seeds": list(members.seeds),
        "config_index": list(members.config_index),
        "labels": list(members.labels),
        "hparams": jsonable(hparams.to_dict()),
    }
    return accepted_hashes(data, spec.config, COMPILED_KEPT_BEFORE)


def save_checkpoint(checkpointer: Checkpointer, chunk: int, carry: Any, meta: dict[str, Any]) -> str | None:
    """Write a checkpoint (``meta`` plus jaxrl's version); return None, or a
    short reason when the write failed."""
    try:
        checkpointer.save(chunk, carry, {**meta, "jaxrl_version": __version__})
    except Exception as error:  # orbax wraps OS errors in its own types
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
                return "no space left on device"
            cause = cause.__cause__ or cause.__context__
        return f"{type(error).__name__}: {error_line(error)}"
    return None


def layout_note(meta: dict[str, Any], now: dict[str, Any], what: str) -> str | None:
    """One line when a checkpoint was written on another layout than ``now``."""
    saved = meta.get("layout")
    if not isinstance(saved, dict) or saved == now:
        return None
    return (
        f"note: checkpoint {meta.get('chunk', '?')} was written on {describe_layout(saved)}; {what} on "
        f"{describe_layout(now)}, so the last bits may differ from the same layout"
    )


def discard(spec: Any) -> None:
    """Remove a run directory this run made and wrote no checkpoint into
    (process 0; nothing else is touched)."""
    if spec.created and is_primary():
        shutil.rmtree(spec.run_dir, ignore_errors=True)
