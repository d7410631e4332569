"""orbax checkpoints of the full (seed-batched) training state.

Layout: ``<run_dir>/checkpoints/<chunk>/{state,meta}``. orbax writes each step
to a temporary directory and renames it when complete, so an interrupted save
never replaces the previous checkpoint; ``keep`` bounds how many stay on disk.
Nothing is unpickled on restore: arrays come from tensorstore, metadata from JSON.

A checkpoint is portable: arrays are restored into the shardings the caller
asks for (whatever device count, platform or process count wrote them), and
the metadata records the layout that wrote it (:func:`layout_of`) so a resume
on another layout can say that its last bits may differ.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from typing import Any, NamedTuple

from jaxrl.core.errors import ConfigError, error_line
from jaxrl.core.version import __version__

__all__ = ["Checkpointer", "Restored", "config_hash", "keys_to_data", "layout_of", "describe_layout"]

FORMAT_VERSION = 3  # 2: Adam moments over the raveled parameters; 3: optimizer state is an optax chain (jaxrl.rl.optim)

# What every state checkpoint holds besides its array chunks (orbax's tree
# metadata and the OCDBT manifest).
STATE_FILES = ("_METADATA", "manifest.ocdbt")
# Where resume= moves checkpoints it found damaged (orbax ignores the folder).
DAMAGED_DIR = "damaged"


def config_hash(data: dict[str, Any]) -> str:
    """Stable hash of a JSON-able dict (what shapes the compiled program and its
    numbers: :func:`jaxrl.run.rundir.config_digest` chooses it)."""
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _is_key(x: Any) -> bool:
    import jax

    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def keys_to_data(tree: Any) -> Any:
    """Typed PRNG keys → their uint32 data (what orbax stores)."""
    import jax

    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def _drop_empty(tree: Any) -> Any:
    """Zero-size leaves (e.g. an MJX model's empty actuator state) → None:
    orbax cannot store them, and their value is their shape."""
    import jax

    return jax.tree.map(lambda x: None if 0 in tuple(x.shape) else x, tree)


def _refill_empty(restored: Any, abstract: Any) -> Any:
    """:func:`_drop_empty` undone: the zero-size leaves of ``abstract`` (with shardings) back as arrays."""
    import jax
    import jax.numpy as jnp

    return jax.tree.map(
        lambda a, r: jnp.zeros(a.shape, a.dtype, device=a.sharding) if 0 in tuple(a.shape) else r, abstract, restored
    )


def data_to_keys(tree: Any, abstract: Any) -> Any:
    import jax

    return jax.tree.map(lambda x, a: jax.random.wrap_key_data(x) if _is_key(a) else x, tree, abstract)


def _major_minor(version: str) -> tuple[str, ...]:
    return tuple(str(version).split(".")[:2])


def layout_of(devices: int, mode: str) -> dict[str, Any]:
    """What fixes a run's rounding besides its config: the platform, the jax
    version and how many devices the members (or envs, ``mode=data``) were
    spread over. XLA:CPU's thread count and the process count do not."""
    import jax

    return {"platform": jax.default_backend(), "devices": int(devices), "mode": mode, "jax_version": jax.__version__}


def describe_layout(layout: dict[str, Any]) -> str:
    """``"2 cpu devices (members sharded), jax 0.9.2"``."""
    n = layout.get("devices", "?")
    what = {"seeds": "members sharded", "data": "envs split"}.get(layout.get("mode", ""), "")
    text = f"{n} {layout.get('platform', '?')} device{'' if n == 1 else 's'}" + (
        f" ({what})" if what and n != 1 else ""
    )
    return text + f", jax {layout.get('jax_version', '?')}"


class Restored(NamedTuple):
    """A restored checkpoint, and the newer ones that could not be read."""

    state: Any  # the caller's abstract structure, laid out as asked
    meta: dict[str, Any]
    chunk: int
    skipped: tuple[tuple[int, str], ...]  # (chunk, why) of newer, unreadable checkpoints


class _Damaged(Exception):
    """One checkpoint cannot be read; an older one may still be intact."""


def _reason(error: BaseException) -> str:
    """A failed orbax/tensorstore restore, in words."""
    text = str(error)
    low = text.lower()
    if isinstance(error, json.JSONDecodeError) or "expecting value" in low or "unterminated" in low:
        return "its files are damaged (truncated or corrupt)"
    if isinstance(error, FileNotFoundError) or "not_found" in low or "no such file" in low or "not found" in low:
        return "files of it are missing"
    if "topology mismatch" in low:
        return "it was saved for another device layout and could not be re-laid out"
    if "shape" in low and ("mismatch" in low or "does not match" in low or "incompatible" in low):
        return "its arrays have other shapes than this run's config gives"
    if "tree" in low and ("structure" in low or "mismatch" in low or "missing" in low):
        return "it holds other arrays than this run's config gives"
    if any(
        word in low for word in ("data_loss", "corrupt", "decode", "truncat", "checksum", "invalid", "error reading")
    ):
        return "its files are damaged (truncated or corrupt)"
    return f"it could not be read ({error_line(error, 120)})"


class Checkpointer:
    """Save/restore ``(state, meta)`` pairs keyed by chunk index."""

    def __init__(self, run_dir: str, keep: int = 2):
        import orbax.checkpoint as ocp

        self._ocp = ocp
        self.run_dir = os.path.abspath(run_dir)
        self.directory = os.path.join(self.run_dir, "checkpoints")
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False, create=True)
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def save(self, chunk: int, state: Any, meta: dict[str, Any]) -> None:
        ocp = self._ocp
        meta = dict(meta, format_version=FORMAT_VERSION)
        self.manager.save(
            chunk,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(_drop_empty(keys_to_data(state))), meta=ocp.args.JsonSave(meta)
            ),
            force=True,
        )
        self.manager.wait_until_finished()

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def steps(self) -> list[int]:
        """Complete checkpoints, newest first."""
        return sorted(self.manager.all_steps(), reverse=True)

    def restore(self, abstract_state: Any, shardings: Any, chunk: int | None = None, field: str = "resume") -> Restored:
        """The newest intact checkpoint (or ``chunk``) in the structure of
        ``abstract_state`` (``jax.eval_shape`` of init), laid out as
        ``shardings`` (one ``jax.sharding.Sharding`` per leaf) whatever layout
        wrote it. Newer checkpoints that cannot be read are listed in
        :attr:`Restored.skipped`; when none is intact, a ConfigError names why."""
        import jax

        steps = self.steps() if chunk is None else [chunk]
        if not steps:
            raise ConfigError(
                field,
                self.run_dir,
                "holds no complete checkpoint",
                "start a new run without resume="
                if field == "resume"
                else "train it with checkpoint=true (the default)",
            )
        raw_abstract = jax.tree.map(
            lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh),
            jax.eval_shape(keys_to_data, abstract_state),
            shardings,
        )  # key data keeps the key's layout (its extra axis is last)
        skipped: list[tuple[int, str]] = []
        for step in steps:
            try:
                state, meta = self._restore_step(step, raw_abstract, field)
            except _Damaged as damaged:
                skipped.append((step, str(damaged)))
                continue
            return Restored(data_to_keys(state, abstract_state), meta, step, tuple(skipped))
        why = "; ".join(f"checkpoint {s}: {r}" for s, r in skipped)
        raise ConfigError(
            field,
            self.run_dir,
            f"holds no intact checkpoint ({why})",
            "start a new run"
            if field == "resume"
            else "train it again, or pass a run directory with an intact checkpoint",
        )

    def _restore_step(self, step: int, raw_abstract: Any, field: str) -> tuple[Any, dict[str, Any]]:

        ocp = self._ocp
        try:
            meta = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
        except Exception as error:
            raise _Damaged(f"its metadata is unreadable ({_reason(error)})") from None
        if not isinstance(meta, dict):
            raise _Damaged("its metadata is unreadable")
        if meta.get("format_version") != FORMAT_VERSION or _major_minor(meta.get("jaxrl_version", "")) != _major_minor(
            __version__
        ):
            raise ConfigError(
                field,
                self.run_dir,
                f"checkpoint was written by jaxrl {meta.get('jaxrl_version', '?')} (format {meta.get('format_version', '?')}), "
                f"this is jaxrl {__version__} (format {FORMAT_VERSION})",
                f"use jaxrl {meta.get('jaxrl_version', '?')} for this run directory, or start a new run",
            )
        state_dir = os.path.join(self.directory, str(step), "state")
        missing = [name for name in STATE_FILES if not os.path.exists(os.path.join(state_dir, name))]
        if missing:  # orbax would guess the tree from what is left, and fail obscurely
            raise _Damaged(f"files of it are missing (state/{missing[0]})")
        try:
            restored = self.manager.restore(
                step, args=ocp.args.Composite(state=ocp.args.StandardRestore(_drop_empty(raw_abstract)))
            )
        except Exception as error:  # orbax/tensorstore raise many types for damaged files
            raise _Damaged(_reason(error)) from None
        return _refill_empty(restored["state"], raw_abstract), dict(meta)

    def set_aside(self, steps: list[int]) -> str:
        """Move checkpoints (found damaged) out of orbax's sight, into
        ``checkpoints/damaged/``, so that training can write those chunks again."""
        target = os.path.join(self.directory, DAMAGED_DIR)
        os.makedirs(target, exist_ok=True)
        for step in steps:
            source = os.path.join(self.directory, str(step))
            if os.path.isdir(source):
                destination = os.path.join(target, str(step))
                shutil.rmtree(destination, ignore_errors=True)
                os.replace(source, destination)
        self.manager.reload()
        return target

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()
