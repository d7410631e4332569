"""Process-level XLA settings, applied before jax starts its backend.

jaxlib 0.10.0–0.10.2 can deadlock deterministically on some vmapped PPO
programs on multi-core CPUs (every XLA worker idle, the caller blocked in
``block_until_ready``); turning off XLA:CPU's concurrency-optimized scheduler
avoids it. The supported version ranges exclude those releases
(pyproject.toml); this guard covers environments that have them anyway.
"""

from __future__ import annotations

import os
from importlib import metadata

_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
_HANG_PRONE = ("0.10.0", "0.10.1", "0.10.2")


def _jaxlib_version() -> str | None:
    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return None


def configure() -> None:
    """Idempotent; only touches ``XLA_FLAGS`` for the hang-prone jaxlib releases."""
    if _jaxlib_version() in _HANG_PRONE:
        flags = os.environ.get("XLA_FLAGS", "")
        if "concurrency_optimized_scheduler" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " " + _SCHEDULER_FLAG).strip()


def request_deterministic() -> None:
    """Ask XLA for deterministic kernels (GPU scatter/reductions). Must run
    before jax starts its backend; the CPU backend is deterministic already."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_deterministic_ops" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_deterministic_ops=true").strip()
