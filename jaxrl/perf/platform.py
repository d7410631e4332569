"""Process-level XLA settings, applied by the CLI entry points before jax
starts its backend, and the :class:`Process` record of what they chose.

The CLI reads jaxrl's environment variables (``JAXRL_CPU_DEVICES``,
``JAXRL_CPU_THREADS``, ``JAXRL_CPU_OPT_LEVEL``, ``JAXRL_COMPILE_CACHE``) once,
where a command starts (:func:`process_settings`), and passes the resulting
:class:`Process` down; nothing else in jaxrl reads them, and nothing here keeps
module state.

jaxlib 0.10.0–0.10.2 can deadlock deterministically on some vmapped PPO
programs on multi-core CPUs (every XLA worker idle, the caller blocked in
``block_until_ready``); turning off XLA:CPU's concurrency-optimized scheduler
avoids it. The supported version ranges exclude those releases
(pyproject.toml); this guard covers environments that have them anyway.
"""

from __future__ import annotations

import hashlib
import os
import platform as host
from dataclasses import dataclass
from importlib import metadata

from jaxrl.core.errors import ConfigError

__all__ = [
    "worker_env",
    "Process",
    "process_settings",
    "configure",
    "quiet_libraries",
    "request_deterministic",
    "compiler_options",
    "cpu_opt_level",
    "check_environment",
    "host_key",
    "cache_dir",
    "enable_compile_cache",
    "usable_cores",
    "split_cpu_devices",
    "cpu_threads_for",
    "size_cpu_pool",
]

_SCHEDULER_FLAG = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
_HANG_PRONE = ("0.10.0", "0.10.1", "0.10.2")


def _jaxlib_version() -> str | None:
    try:
        return metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return None


def configure() -> None:
    """Idempotent. Touches ``XLA_FLAGS`` only for the hang-prone jaxlib
    releases, and quiets XLA's C++ log below FATAL unless the user set
    ``TF_CPP_MIN_LOG_LEVEL`` (loading a cached CPU executable otherwise prints
    a spurious machine-feature warning; real errors still raise in Python)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if _jaxlib_version() in _HANG_PRONE:
        flags = os.environ.get("XLA_FLAGS", "")
        if "concurrency_optimized_scheduler" not in flags:
            os.environ["XLA_FLAGS"] = (flags + " " + _SCHEDULER_FLAG).strip()


def quiet_libraries() -> None:
    """CLI entry points only: third-party warnings logged through absl (orbax's
    "Metadata file does not exist" for a damaged checkpoint, …) stay off the
    terminal; the CLI's own one-line messages say what matters. Errors still show."""
    import logging

    logging.getLogger("absl").setLevel(logging.ERROR)


def request_deterministic() -> None:
    """Ask XLA for deterministic kernels (GPU scatter/reductions). Must run
    before jax starts its backend; the CPU backend is deterministic already."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_gpu_deterministic_ops" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_gpu_deterministic_ops=true").strip()


_OPT_LEVEL_OPTION = "xla_backend_optimization_level"


def compiler_options(level: int | None = 1) -> dict[str, int] | None:
    """Compile options for jaxrl's own programs: LLVM ``-O<level>`` on the CPU
    backend (``None``: XLA's own).

    XLA:CPU compiles each of a training program's many small fused loops with
    LLVM; at its default level most of the compile goes into optimizations
    that do not pay on loops this small. ``-O1`` took a fifth to a third off
    the compile of the CartPole PPO programs with equal or better run time
    (``python experiments/bench/peers.py cartpole``). Nothing on other
    backends. The CLI passes :attr:`Process.opt_level` (``JAXRL_CPU_OPT_LEVEL``)."""
    import jax

    if level is None or jax.default_backend() != "cpu":
        return None
    return {_OPT_LEVEL_OPTION: level}


def cpu_opt_level() -> int | None:
    """``JAXRL_CPU_OPT_LEVEL`` (default 1): an LLVM level 0–3, or ``None`` for
    ``default`` (XLA's own) or when ``XLA_FLAGS`` sets the level itself.
    Anything else is a :class:`jaxrl.core.errors.ConfigError`."""
    setting = os.environ.get("JAXRL_CPU_OPT_LEVEL", "1").strip()
    if setting == "default" or _OPT_LEVEL_OPTION in os.environ.get("XLA_FLAGS", ""):
        return None
    if setting not in ("0", "1", "2", "3"):
        raise ConfigError(
            "JAXRL_CPU_OPT_LEVEL", setting, "must be 0, 1, 2, 3 or default", "unset it (default 1) or pass one of those"
        )
    return int(setting)


def _env_count(name: str, minimum: int, constraint: str, fix: str) -> int | None:
    """Environment variable ``name`` as a whole number ≥ ``minimum`` (``None``
    when unset); anything else is a :class:`jaxrl.core.errors.ConfigError`."""
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < minimum:
        raise ConfigError(name, value, constraint, fix)
    return int(value)


def cpu_devices_wanted() -> int | None:
    """``JAXRL_CPU_DEVICES`` as a count (``None`` when unset: one per core).
    Anything but a non-negative integer is a :class:`jaxrl.core.errors.ConfigError`."""
    return _env_count(
        "JAXRL_CPU_DEVICES", 0, "must be a whole number of XLA:CPU devices", "unset it (one per core) or pass e.g. 1"
    )


def cpu_threads_wanted() -> int | None:
    """``JAXRL_CPU_THREADS`` as a count (``None`` when unset or ``auto``).
    Anything but ``auto`` or a positive integer is a :class:`jaxrl.core.errors.ConfigError`."""
    if os.environ.get("JAXRL_CPU_THREADS", "").strip() == "auto":
        return None
    return _env_count(
        "JAXRL_CPU_THREADS",
        1,
        "must be auto or a positive whole number of XLA:CPU threads",
        "unset it (auto) or pass e.g. 1",
    )


def check_environment() -> None:
    """Validate jaxrl's environment variables (CLI entry points, before
    anything is written): a bad value is a one-line ConfigError."""
    cpu_opt_level()
    cpu_devices_wanted()
    cpu_threads_wanted()


def host_key(cpuinfo: str | None = None) -> str:
    """``<machine>-<hash of the CPU's feature flags>`` (from ``cpuinfo``, the
    text of ``/proc/cpuinfo``, read when not given): XLA:CPU compiles for the
    instruction set of the host, so a program cached on one CPU must not be
    loaded on another (a home directory shared by a cluster's nodes)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    lines = (line for line in cpuinfo.splitlines() if line.startswith(("flags", "Features")))
    flags = next((line.split(":", 1)[1].strip() for line in lines), "")
    text = f"{host.machine()} {flags or host.processor()}"
    return f"{host.machine() or 'cpu'}-{hashlib.sha1(text.encode()).hexdigest()[:10]}"


def cache_dir(setting: str, auto: str = "") -> str | None:
    """The persistent compilation cache directory for ``compile_cache=setting``
    (``None``: off). ``auto`` is the ``auto`` given (the CLI passes
    ``$JAXRL_COMPILE_CACHE``: a directory or ``off``) if any, else
    ``$XDG_CACHE_HOME/jaxrl/xla/<host_key()>`` (default
    ``~/.cache/jaxrl/xla/<host_key()>``: one cache per kind of CPU). A
    directory given explicitly is used as it is."""
    setting = setting.strip()
    if setting == "auto":
        setting = auto.strip() or "auto"
    if setting.lower() in ("off", "false", "none", "0"):
        return None
    if setting == "auto":
        root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.join(root, "jaxrl", "xla", host_key())
    return os.path.abspath(os.path.expanduser(setting))


def enable_compile_cache(setting: str, auto: str = "") -> str | None:
    """Turn on JAX's persistent compilation cache (every compiled program of
    this process that takes ≥ 0.3 s to compile is stored; a later launch of the
    same program loads it instead of compiling). JAX stores no program with a
    host callback; jaxrl's training programs have none.

    Returns the directory in use, or ``None`` when off or not writable."""
    import jax

    path = cache_dir(setting, auto)
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None  # a read-only home must not stop training
    if not os.access(path, os.W_OK):
        return None
    if jax.config.jax_compilation_cache_dir != path:
        jax.config.update("jax_compilation_cache_dir", path)
        try:  # jax decides once per process whether a cache is in use: let it decide again
            from jax.experimental.compilation_cache import compilation_cache

            compilation_cache.reset_cache()
        except (ImportError, AttributeError):
            pass
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.3)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


def worker_env() -> dict[str, str]:
    """The environment of a worker process that runs jaxrl's programs on its own
    CPU (a Ray env runner): the CPU backend with one XLA device, and this
    process's working directory and ``PYTHONPATH`` on its import path (so a
    module ``env.module`` names imports there too, on this machine or a shared
    file system)."""
    path = os.pathsep.join([os.getcwd(), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=1", "PYTHONPATH": path}


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def split_cpu_devices() -> int:
    """CLI only, before jax starts: expose one XLA:CPU device per usable core
    (at most 8; ``JAXRL_CPU_DEVICES=N`` overrides, 1 turns it off) so that the
    members of a run are sharded over the cores and run side by side — on a
    2-core CPU the default ``env=cartpole seeds=16`` run trains ≈ 1.6× faster
    than on XLA's single CPU device, whose intra-op threads mostly idle on
    small RL networks. Affects only the CPU platform; GPUs/TPUs are untouched.
    Leaves an explicit ``--xla_force_host_platform_device_count`` alone.
    Returns the count set (0: none)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" in flags:
        return 0
    wanted = cpu_devices_wanted()
    n = min(8, usable_cores()) if wanted is None else wanted
    if n <= 1:
        return 0
    os.environ["XLA_FLAGS"] = (flags + f" --xla_force_host_platform_device_count={n}").strip()
    return n


# One member with at most this many envs counts as a small program (below).
SMALL_PROGRAM_ENVS = 64

_ACCELERATOR_PLUGINS = ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin", "jax_rocm7_plugin", "libtpu")


def _accelerator_plugin_installed() -> bool:
    from importlib.util import find_spec

    return any(find_spec(name) is not None for name in _ACCELERATOR_PLUGINS)


def cpu_threads_for(members: int, envs_per_member: int, one_device: bool = True) -> int | None:
    """The XLA:CPU thread count for a job, or ``None`` for XLA's default (one
    per usable core). ``JAXRL_CPU_THREADS=N`` gives ``N``; ``auto`` (default)
    gives 1 for a *small program* — one member with at most
    :data:`SMALL_PROGRAM_ENVS` envs, run on one device (not ``parallel=data``,
    not multi-process) — on a machine without an accelerator plugin, else ``None``.

    Why: the XLA:CPU client runs a program's independent kernels on its
    worker threads. A one-seed program with a few envs is thousands of
    kernels of a microsecond or two, and handing them between threads costs
    more than it overlaps: with one thread, one-seed PPO CartPole at
    PureJaxRL's settings (4 envs) ran 1.04–1.13× and one-seed SAC Pendulum
    1.09–1.15× faster. Larger programs need the threads — CartPole at 512
    envs ran 0.91× and at 2048 envs 0.60× with one — and several members are
    sharded over per-core devices (:func:`split_cpu_devices`), each device
    needing a thread of its own. The CLI does not split the CPU into devices
    when it sets one thread: one-seed SAC measured 1.09–1.15× faster with one
    thread on XLA's single CPU device, but no faster with a second device beside it."""
    wanted = cpu_threads_wanted()
    if wanted is not None:
        return wanted
    small = members == 1 and envs_per_member <= SMALL_PROGRAM_ENVS and one_device
    if small and not _accelerator_plugin_installed():
        return 1
    return None


def size_cpu_pool(members: int, envs_per_member: int, one_device: bool = True) -> int:
    """CLI only, before jax starts: size the XLA:CPU client's thread pool for
    the job (:func:`cpu_threads_for`) through ``PJRT_NPROC``. Leaves a
    ``PJRT_NPROC`` or ``NPROC`` the user set (or an earlier call of this
    process) alone. Returns the count set (0: none)."""
    if "PJRT_NPROC" in os.environ or "NPROC" in os.environ:
        return 0
    threads = cpu_threads_for(members, envs_per_member, one_device)
    if threads is None:
        return 0
    os.environ["PJRT_NPROC"] = str(threads)
    return threads


@dataclass(frozen=True)
class Process:
    """What a run takes from its process: the settings the CLI made before jax
    started and the environment variables it read. Library callers get the
    defaults (no CPU split, XLA's thread pool, ``-O1``, the user cache dir)."""

    cpu_devices: int = 0  # XLA:CPU devices the CLI split the host into (0: none)
    cpu_threads: int = 0  # the XLA:CPU client's threads the CLI chose (0: XLA's default)
    opt_level: int | None = 1  # LLVM level of jaxrl's programs on XLA:CPU (None: XLA's own)
    compile_cache: str = ""  # where compile_cache=auto points ($JAXRL_COMPILE_CACHE; "": the user cache dir)
    started: float = 0.0  # time.perf_counter() when the command began, imports included (0: unknown)


def process_settings(cpu_devices: int = 0, cpu_threads: int = 0, started: float = 0.0) -> Process:
    """The :class:`Process` of a command: the CPU split and pool it set, and
    jaxrl's environment variables, read once here (a bad value is a one-line
    :class:`~jaxrl.core.errors.ConfigError`)."""
    check_environment()
    cache = os.environ.get("JAXRL_COMPILE_CACHE", "").strip()
    return Process(cpu_devices, cpu_threads, cpu_opt_level(), cache, started)
