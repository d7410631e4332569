"""orbax checkpoints of the full (seed-batched) training state.

Layout: ``<run_dir>/checkpoints/<chunk>/{state,meta}``. orbax writes each step
to a temporary directory and renames it when complete, so an interrupted save
never replaces the previous checkpoint; ``keep`` bounds how many stay on disk.
Nothing is unpickled on restore: arrays come from tensorstore, metadata from JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from jaxrl.config import ConfigError, error_line

__all__ = ["Checkpointer", "config_hash", "keys_to_data"]

FORMAT_VERSION = 2  # 2: Adam moments over the raveled parameters (jaxrl.optim)


def config_hash(config_dict: dict[str, Any]) -> str:
    """Stable hash of everything that shapes the compiled program and its numbers."""
    ignored = {"run_dir", "runs_root", "resume", "progress", "plots", "keep", "checkpoint", "logger", "wandb_project"}
    relevant = {k: v for k, v in config_dict.items() if k not in ignored}
    text = json.dumps(relevant, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _is_key(x: Any) -> bool:
    import jax

    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def keys_to_data(tree: Any) -> Any:
    """Typed PRNG keys → their uint32 data (what orbax stores)."""
    import jax

    return jax.tree.map(lambda x: jax.random.key_data(x) if _is_key(x) else x, tree)


def data_to_keys(tree: Any, abstract: Any) -> Any:
    import jax

    return jax.tree.map(lambda x, a: jax.random.wrap_key_data(x) if _is_key(a) else x, tree, abstract)


def _major_minor(version: str) -> tuple[str, ...]:
    return tuple(str(version).split(".")[:2])


class Checkpointer:
    """Save/restore ``(state, meta)`` pairs keyed by chunk index."""

    def __init__(self, run_dir: str, keep: int = 2):
        import orbax.checkpoint as ocp

        self._ocp = ocp
        self.directory = os.path.abspath(os.path.join(run_dir, "checkpoints"))
        options = ocp.CheckpointManagerOptions(max_to_keep=keep, enable_async_checkpointing=False, create=True)
        self.manager = ocp.CheckpointManager(self.directory, options=options)

    def save(self, chunk: int, state: Any, meta: dict[str, Any]) -> None:
        ocp = self._ocp
        meta = dict(meta, format_version=FORMAT_VERSION)
        self.manager.save(
            chunk,
            args=ocp.args.Composite(state=ocp.args.StandardSave(keys_to_data(state)), meta=ocp.args.JsonSave(meta)),
            force=True,
        )
        self.manager.wait_until_finished()

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def restore(
        self, abstract_state: Any, chunk: int | None = None, field: str = "resume", shardings: Any = None
    ) -> tuple[Any, dict[str, Any]]:
        """Restore into the structure of ``abstract_state`` (``jax.eval_shape`` of
        init), laid out as ``shardings`` (a NamedSharding per leaf) when given."""
        import jax

        from jaxrl import __version__

        ocp = self._ocp
        step = self.latest() if chunk is None else chunk
        if step is None:
            raise ConfigError(
                field,
                os.path.dirname(self.directory),
                "holds no complete checkpoint",
                "start a new run without resume=",
            )
        run_dir = os.path.dirname(self.directory)
        try:
            meta = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))["meta"]
        except Exception:
            meta = None
        if not isinstance(meta, dict):
            raise ConfigError(
                field,
                run_dir,
                f"checkpoint {step} has no readable metadata",
                "start a new run, or resume a run directory with an intact checkpoint",
            )
        if meta.get("format_version") != FORMAT_VERSION or _major_minor(meta.get("jaxrl_version", "")) != _major_minor(
            __version__
        ):
            raise ConfigError(
                field,
                run_dir,
                f"checkpoint was written by jaxrl {meta.get('jaxrl_version', '?')} (format {meta.get('format_version', '?')}), "
                f"this is jaxrl {__version__} (format {FORMAT_VERSION})",
                f"resume with jaxrl {meta.get('jaxrl_version', '?')}, or start a new run",
            )
        raw_abstract = jax.eval_shape(keys_to_data, abstract_state)
        if shardings is not None:  # key data keeps the key's layout (its extra axis is last)
            raw_abstract = jax.tree.map(
                lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh), raw_abstract, shardings
            )
        try:
            restored = self.manager.restore(
                step,
                args=ocp.args.Composite(state=ocp.args.StandardRestore(raw_abstract), meta=ocp.args.JsonRestore()),
            )
        except Exception as error:  # orbax/tensorstore raise many types for damaged files
            reason = error_line(error)
            raise ConfigError(
                field,
                run_dir,
                f"checkpoint {step} is unreadable or does not match this config ({reason})",
                "start a new run, or resume a run directory with an intact checkpoint",
            ) from None
        return data_to_keys(restored["state"], abstract_state), dict(restored["meta"])

    def close(self) -> None:
        self.manager.wait_until_finished()
        self.manager.close()
