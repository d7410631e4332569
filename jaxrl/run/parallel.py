"""Devices and hosts, with JAX's own machinery.

* ``parallel=seeds`` (default): the member axis (seeds × configurations, or the
  PBT population) of the training state is sharded over the devices of a
  :class:`jax.sharding.Mesh` (``NamedSharding``); members never talk to each
  other, so each device runs its members' share of the same program and the
  numbers are those of one device. PBT's exploit step is the only
  cross-member operation; XLA inserts its collectives.
* ``parallel=data``: ONE run's envs (``num_envs``, the total) are split over
  the devices; parameters and optimizer state are replicated. The program is
  the one-device program with all envs, partitioned by XLA (GSPMD): each
  device steps its own envs (no collective inside the rollout loop), and
  normalizer-statistic reductions over the env axis become all-reduces.
  Minibatches are drawn from the whole batch as on one device, which XLA
  implements by gathering the batch onto every device once per update and
  running the learner replicated: the rollout scales with the devices, the
  learner does not. Only reduction order differs from a one-device run with
  the same total ``num_envs``.
* Multi-host: :func:`start_distributed` calls :func:`jax.distributed.initialize`
  (explicit coordinator, or cluster auto-detection); the mesh then spans every
  process's devices. Only process 0 writes logs, summaries and plots; orbax
  checkpoints are written by all processes together.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from jaxrl.core.config import Config
from jaxrl.core.errors import ConfigError, error_line
from jaxrl.run.checkpoint import layout_of

__all__ = [
    "Plan",
    "start_distributed",
    "is_primary",
    "plan",
    "reading_plan",
    "member_shardings",
    "carry_shardings",
    "layout_record",
    "sync",
    "to_host",
    "place",
]

AXIS = "devices"


@dataclass(frozen=True)
class Plan:
    """How a job's carry is laid out over devices."""

    mesh: Any  # jax.sharding.Mesh with one axis, AXIS
    mode: str  # seeds | data

    @property
    def size(self) -> int:
        return int(self.mesh.devices.size)


def start_distributed(config: Config) -> bool:
    """Join a multi-process run if ``dist.*`` asks for one (before any other JAX
    work). Returns whether this is a multi-process run."""
    dist = config.dist
    if not dist.coordinator and not dist.auto:
        return False
    import jax

    if jax.distributed.is_initialized():
        return jax.process_count() > 1
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU collectives across processes
    try:
        if dist.auto and not dist.coordinator:
            jax.distributed.initialize(heartbeat_timeout_seconds=dist.heartbeat_s)
        else:
            jax.distributed.initialize(
                dist.coordinator,
                dist.num_processes,
                dist.process_id,
                heartbeat_timeout_seconds=dist.heartbeat_s,
            )
    except Exception as error:
        raise ConfigError(
            "dist.coordinator",
            dist.coordinator or "auto",
            f"could not join the run ({error_line(error)})",
            "start process 0 first and check HOST:PORT, dist.num_processes and dist.process_id",
        ) from None
    return jax.process_count() > 1


def is_primary() -> bool:
    """Process 0 (the only one that writes files other than checkpoints)."""
    import jax

    return jax.process_index() == 0


def plan(config: Config, num_members: int, cpu_devices: int = 0) -> Plan | None:
    """The device layout of a job with ``num_members`` members (None: one
    device); ``cpu_devices``: the XLA:CPU devices the CLI split the host into
    (:attr:`jaxrl.perf.platform.Process.cpu_devices`)."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    devices = jax.devices()
    multi = jax.process_count() > 1
    n = config.devices or len(devices)
    if not config.devices and not multi and cpu_devices and devices[0].platform == "cpu":
        # the CLI's one-device-per-core split: use as many cores as divide the members
        # evenly (data parallelism over CPU cores does not pay: one device)
        n = max(d for d in range(1, n + 1) if num_members % d == 0) if config.parallel == "seeds" else 1
    if n > len(devices):
        raise ConfigError(
            "devices", config.devices, f"only {len(devices)} devices are visible", f"pass devices={len(devices)} or 0"
        )
    if multi and n != len(devices):
        raise ConfigError(
            "devices",
            config.devices,
            f"a multi-process run uses every device of every process ({len(devices)})",
            "pass devices=0",
        )
    if n == 1:
        return None
    if config.parallel == "seeds" and num_members % n:
        fit = [d for d in range(1, n + 1) if num_members % d == 0][-1]
        raise ConfigError(
            "seeds" if config.pbt.population == 0 else "pbt.population",
            num_members,
            f"{num_members} members do not split evenly over {n} devices",
            f"run a multiple of {n} (e.g. {math.ceil(num_members / n) * n}) or pass devices={fit}",
        )
    if config.parallel == "data" and config.num_envs % n:
        raise ConfigError(
            "num_envs",
            config.num_envs,
            f"parallel=data splits the envs over {n} devices: it must be a multiple of {n}",
            f"pass num_envs={math.ceil(config.num_envs / n) * n}",
        )
    return Plan(Mesh(np.asarray(devices[:n]), (AXIS,)), config.parallel)


def reading_plan(config: Config, num_members: int) -> Plan | None:
    """The layout for evaluating ``num_members`` members of a finished run in
    this process: the members over as many local devices as divide them
    (at most the run's ``devices=`` when it set one), as training lays them out
    on the same machine; ``None`` for one device."""
    import jax
    import numpy as np
    from jax.sharding import Mesh

    devices = jax.local_devices()
    n = config.devices if 0 < config.devices <= len(devices) else len(devices)
    n = max(d for d in range(1, n + 1) if num_members % d == 0)
    return None if n == 1 else Plan(Mesh(np.asarray(devices[:n]), (AXIS,)), "seeds")


def member_shardings(layout: Plan, tree: Any) -> Any:
    """Every leaf's leading (member) axis split over the layout's devices."""
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    return jax.tree.map(lambda _: NamedSharding(layout.mesh, P(AXIS)), tree)


def carry_shardings(layout: Plan | None, abstract: Any, env_fields: tuple[str, ...] = ()) -> Any:
    """A sharding per leaf of the driver's carry (``abstract`` from
    ``jax.eval_shape``): seeds mode shards every leaf with a member axis on it;
    data mode shards the env axis (second, after members) of the agent-state
    fields ``env_fields`` (the algorithm's
    :attr:`~jaxrl.algos.Algorithm.env_fields`) and replicates the rest; no
    layout (one device) puts every leaf on this process's first device."""
    import jax
    from jax.sharding import NamedSharding, SingleDeviceSharding
    from jax.sharding import PartitionSpec as P

    if layout is None:
        device = SingleDeviceSharding(jax.local_devices()[0])
        return jax.tree.map(lambda _: device, abstract)
    mesh = layout.mesh
    replicated = NamedSharding(mesh, P())

    def spec(path: Any, leaf: Any) -> Any:
        name = jax.tree_util.keystr(path)
        ndim = len(leaf.shape)
        if layout.mode == "seeds":
            member_axis = name.startswith((".states", ".hparams")) and ndim >= 1
            return NamedSharding(mesh, P(AXIS)) if member_axis else replicated
        if (
            name.startswith(".states.agent")
            and any(name.startswith(f".states.agent.{f}") for f in env_fields)
            and ndim >= 2
        ):
            return NamedSharding(mesh, P(None, AXIS))
        return replicated

    return jax.tree_util.tree_map_with_path(spec, abstract)


def layout_record(layout: Plan | None) -> dict[str, Any]:
    """The layout as checkpoint metadata (:func:`jaxrl.run.checkpoint.layout_of`)."""

    return layout_of(layout.size if layout else 1, layout.mode if layout else "seeds")


def sync(name: str) -> None:
    """A barrier across the processes of a multi-process run (nothing otherwise)."""
    import jax

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def replicated(layout: Plan) -> Any:
    """The sharding that holds a whole array on every device of ``layout``."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    return NamedSharding(layout.mesh, P())


def place(tree: Any, shardings: Any) -> Any:
    """Put a host or one-device pytree onto the layout."""
    import jax

    return jax.device_put(tree, shardings)


def to_host(x: Any) -> Any:
    """A numpy copy of a (possibly multi-process) array; a collective when the
    array is spread over processes, so every process must call it."""
    import jax
    import numpy as np

    if getattr(x, "is_fully_addressable", True) or getattr(x, "is_fully_replicated", False):
        return np.asarray(jax.device_get(x))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))
