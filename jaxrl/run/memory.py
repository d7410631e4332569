"""Does a job fit the machine? Checked before anything runs.

Sizes a machine cannot hold (a replay buffer of 10^12 transitions, a hidden
layer of 10^8 units, millions of envs) would otherwise fail deep inside XLA
with an allocation error, or drive the host into swap. Two checks, both
before the first chunk: the carried state (from ``jax.eval_shape``, before
compiling) and each compiled program's own figure (XLA's memory analysis:
arguments + outputs − donated + temporaries), against the memory of one device
(an accelerator's limit; for XLA:CPU devices, the host's memory, or its cgroup
limit, shared by the CPU devices).
"""

from __future__ import annotations

import os
from typing import Any

from jaxrl.core.config import Config
from jaxrl.core.errors import ConfigError
from jaxrl.run.parallel import carry_shardings

__all__ = ["device_bytes", "state_bytes", "program_bytes", "sizes_fix", "check"]

GIB = 1 << 30


def _host_bytes() -> int | None:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        total = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or int(text) < total):
            total = int(text)
    return total


def device_bytes(layout: Any) -> tuple[int | None, str]:
    """Memory of one device of ``layout`` (``None``: this process's first
    device) and a few words saying where the figure comes from."""
    import jax

    device = layout.mesh.devices.flat[0] if layout is not None else jax.local_devices()[0]
    stats = None
    try:
        stats = device.memory_stats()
    except Exception:  # not every backend reports memory
        stats = None
    if stats and stats.get("bytes_limit"):
        return int(stats["bytes_limit"]), f"one {device.platform} device has {stats['bytes_limit'] / GIB:.1f} GiB"
    host = _host_bytes()
    if host is None:
        return None, "unknown"
    sharing = sum(1 for d in jax.local_devices() if d.platform == device.platform) if device.platform == "cpu" else 1
    where = f"this machine has {host / GIB:.1f} GiB"
    return host // sharing, where + (f", shared by {sharing} CPU devices" if sharing > 1 else "")


def state_bytes(abstract: Any, layout: Any, env_fields: tuple[str, ...] = ()) -> int:
    """Bytes of a carry (``jax.eval_shape`` output) held by one device: leaves
    with a member (or env) axis split over the layout, the rest replicated."""
    import jax

    total = 0
    shardings = None
    if layout is not None:
        shardings = jax.tree.leaves(carry_shardings(layout, abstract, env_fields))
    for i, leaf in enumerate(jax.tree.leaves(abstract)):
        size = int(leaf.size) * leaf.dtype.itemsize
        if shardings is not None and not shardings[i].is_fully_replicated:
            size //= layout.size
        total += size
    return total


def program_bytes(compiled: Any) -> int | None:
    """Peak bytes of one compiled program on one device, per XLA (``None`` if unknown)."""
    try:
        m = compiled.memory_analysis()
        return int(m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes)
    except Exception:  # a backend without the analysis
        return None


def sizes_fix(config: Config, members: int) -> str:
    """The settings that size a training job, as a fix to quote."""
    algo = config.algo
    parts = [f"{'pbt.population' if config.pbt.population else 'members'} ({members})", f"num_envs ({config.num_envs})"]
    for name in ("num_steps", "hidden_sizes", "buffer_size", "batch_size"):
        if hasattr(algo, name):
            value = getattr(algo, name)
            parts.append(f"algo.{name} ({list(value) if isinstance(value, tuple) else value})")
    parts.append(f"eval.episodes ({config.eval.episodes})")
    return f"lower some of {', '.join(parts)}, or spread the members over more devices"


def check(need: int | None, layout: Any, what: str, fix: str) -> None:
    """ConfigError when ``need`` bytes per device exceed one device's memory."""
    if need is None:
        return
    have, where = device_bytes(layout)
    if have is None or need <= have:
        return
    raise ConfigError(
        "memory", f"{need / GIB:.1f} GiB per device", f"{what} needs more than one device holds ({where})", fix
    )
