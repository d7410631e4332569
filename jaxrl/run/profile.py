"""``profile=true``: where the time of one update goes.

The training update is one fused XLA program, so its parts cannot be timed
from inside it. Instead each part is compiled as its own program over the same
members and shapes and timed on the run's real state (pure functions: the
run's state and numbers are untouched):

* ``env only``: ``num_steps`` steps of every env with random actions — the
  environment's ceiling at this env count;
* the algorithm's cumulative prefixes of its update (``Agent.phases``; PPO:
  rollout, then rollout + advantages);
* ``full update``: the whole update as trained.

Each phase's own cost is the difference between consecutive prefixes; the
learner is the full update minus the last prefix. The probes are timed
round-robin (one call of each per round, median over rounds), so drift in the
machine's speed shifts them alike. A rollout-bound run spends
most of its time before the learner, a learner-bound one after it.

Below the phases, :func:`kernel_summary` reads a ``jax.profiler`` trace of a
few calls of the full update: how many kernels (XLA thunks) one update runs
and their mean time, what share of the update's wall time some kernel is
running, how many XLA threads run kernels at once on average, and the time by
kind of kernel (matrix products, fused elementwise loops, transposes and
copies, reductions). A program of many small kernels that run one at a time
is bound by dispatch and by one core's speed, however many cores the machine
has; more members or envs per program (or seeds over cores) is then the lever,
not a faster learner.
"""

from __future__ import annotations

import collections
import glob
import gzip
import json
import os
import re
import statistics
import time
from typing import Any

import jax

from jaxrl import perf
from jaxrl.core.errors import error_line
from jaxrl.envs.core import random_steps
from jaxrl.perf.platform import usable_cores

__all__ = [
    "breakdown",
    "format_breakdown",
    "kernel_summary",
    "median_seconds",
    "round_robin_seconds",
    "summarize_trace",
]


def median_seconds(fn: Any, *args: Any, repeats: int = 5) -> float:
    """Median wall seconds of ``fn(*args)`` (a compiled or jitted function) over
    ``repeats`` calls after one warm-up call, each waited for."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def round_robin_seconds(calls: list[tuple[Any, tuple]], repeats: int = 5) -> list[float]:
    """Median wall seconds of each ``fn(*args)`` in ``calls`` (compiled or
    jitted functions), after one warm-up call each, timed round-robin: one call
    of each per round, so that a machine speeding up or slowing down during
    the measurement shifts every function alike instead of skewing their
    comparison."""
    for fn, args in calls:
        jax.block_until_ready(fn(*args))
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for i, (fn, args) in enumerate(calls):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def _time_interleaved(
    calls: list[tuple[Any, tuple]], repeats: int, options: dict[str, Any] | None = None
) -> tuple[list[tuple[float, float]], list[Any]]:
    """(compile seconds, median seconds per call) of each ``jax.jit(fn)(*args)``,
    compiled first, then timed by :func:`round_robin_seconds`; and the compiled
    functions."""
    compiled, compile_s = [], []
    for fn, args in calls:
        t0 = time.perf_counter()
        compiled.append((jax.jit(fn).lower(*args).compile(options), args))
        compile_s.append(time.perf_counter() - t0)
    timed = list(zip(compile_s, round_robin_seconds(compiled, repeats), strict=True))
    return timed, [fn for fn, _ in compiled]


# A kernel's trace event is named after its HLO instruction (letters, digits,
# "_", ".", "-"); the runtime's own events ("ThunkExecutor::Execute", "end: …",
# "[0] CommonPjRtLoadedExecutable::Execute …") are not. Thunks that only run
# others (their time is their nested kernels') are left out too.
_HLO_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_CONTAINERS = ("while", "conditional", "call")
_CALL = "jaxrl.profile.update"  # the trace annotation around each traced call

ONE_AT_A_TIME = 1.25  # mean kernels running at once below which format_kernels says so
KERNEL_KINDS = ("matrix products", "fused elementwise loops", "transposes and copies", "reductions", "other kernels")


def kernel_kind(name: str) -> str:
    """One of :data:`KERNEL_KINDS` for an XLA kernel (thunk) named ``name``
    (the HLO instruction's name, e.g. ``dot.12``, ``ynn_fusion.2``,
    ``copy_bitcast_fusion.3``, ``multiply_add_fusion``)."""
    n = name.lower()
    products = ("dot", "convolution", "gemm", "matmul", "cublas")
    # newer XLA:CPU runs products as YNNPACK/XNNPACK fusions ("ynn_fusion.3")
    if any(p in n for p in products) or n.startswith(("ynn", "xnn")):
        return "matrix products"
    if n.startswith("copy") or "transpose" in n:
        return "transposes and copies"
    if "reduce" in n:
        return "reductions"
    if "fusion" in n or n.startswith("wrapped_"):
        return "fused elementwise loops"
    return "other kernels"


def _covered(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _kernel_events(events: list[dict[str, Any]]) -> tuple:
    """``(call windows, kernel intervals, kernel threads, time by kernel name,
    runs by kernel name)`` of a trace's complete events (see :func:`summarize_trace`)."""
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    windows: list[tuple[float, float]] = []
    intervals: list[tuple[float, float]] = []
    on_thread: collections.Counter = collections.Counter()
    time_by_name: dict[str, float] = collections.defaultdict(float)
    runs_by_name: collections.Counter = collections.Counter()
    for e in events:
        if e.get("ph") != "X":
            continue
        name, start, dur = e.get("name", ""), float(e["ts"]), float(e.get("dur", 0.0))
        if name == _CALL:
            windows.append((start, start + dur))
            continue
        where = (e.get("pid"), e.get("tid"))
        on_kernel_thread = "XLA" in threads.get(where, "") or processes.get(e.get("pid"), "").startswith("/device:")
        if not on_kernel_thread or not _HLO_NAME.fullmatch(name) or name.startswith(_CONTAINERS):
            continue
        intervals.append((start, start + dur))
        on_thread[where] += 1
        time_by_name[name] += dur
        runs_by_name[name] += 1
    return windows, intervals, len(on_thread), time_by_name, runs_by_name


def summarize_trace(events: list[dict[str, Any]], calls: int) -> dict[str, Any]:
    """Kernel statistics of a Chrome-format trace (``traceEvents``) of ``calls``
    calls of one program.

    Kernels are the complete (``"X"``) events named like an HLO instruction
    on XLA's threads (thread names containing ``XLA``) or in a device's process
    (``/device:…``), less the loop/call thunks that only run nested kernels.
    The update's wall time is that of the ``jaxrl.profile.update`` annotations
    around the calls when present, else the kernels' covered time.

    Returns:
      ``{"calls", "kernels_per_call", "mean_kernel_us", "wall_ms_per_call",
      "kernel_ms_per_call", "covered_share", "concurrency", "threads",
      "kinds": [{"kind", "ms_per_call", "share", "kernels_per_call"}],
      "top": [{"kernel", "kind", "us_per_call", "runs_per_call"}]}``;
      ``concurrency`` is the kernels' summed time over their covered time (the
      mean number running at once), ``covered_share`` the covered time over
      the wall time.
    """
    windows, intervals, threads, time_by_name, runs_by_name = _kernel_events(events)
    busy = sum(b - a for a, b in intervals)
    covered = _covered(intervals)
    wall = sum(b - a for a, b in windows) if windows else covered
    by_kind: dict[str, list[float]] = {kind: [0.0, 0.0] for kind in KERNEL_KINDS}
    for name, t in time_by_name.items():
        totals = by_kind[kernel_kind(name)]
        totals[0] += t
        totals[1] += runs_by_name[name]
    kinds = [
        {
            "kind": kind,
            "ms_per_call": t / calls / 1e3,
            "share": t / busy if busy else 0.0,
            "kernels_per_call": n / calls,
        }
        for kind, (t, n) in sorted(by_kind.items(), key=lambda kv: -kv[1][0])
        if n
    ]
    top = [
        {
            "kernel": name,
            "kind": kernel_kind(name),
            "us_per_call": t / calls,
            "runs_per_call": runs_by_name[name] / calls,
        }
        for name, t in sorted(time_by_name.items(), key=lambda kv: -kv[1])[:10]
    ]
    return {
        "calls": calls,
        "kernels_per_call": len(intervals) / calls,
        "mean_kernel_us": busy / len(intervals) if intervals else 0.0,
        "wall_ms_per_call": wall / calls / 1e3,
        "kernel_ms_per_call": busy / calls / 1e3,
        "covered_share": min(1.0, covered / wall) if wall else 0.0,
        "concurrency": busy / covered if covered else 0.0,
        "threads": threads,
        "kinds": kinds,
        "top": top,
    }


def kernel_summary(fn: Any, args: tuple, trace_dir: str, calls: int = 3) -> dict[str, Any]:
    """Trace ``calls`` calls of the compiled ``fn(*args)`` (each waited for,
    inside a ``jaxrl.profile.update`` annotation) into ``trace_dir`` with
    ``jax.profiler`` and summarize its kernels (:func:`summarize_trace`), plus
    ``"cores"`` (this process's CPU cores) and ``"trace_dir"``. If the trace
    cannot be taken or read, returns ``{"unavailable": reason, "trace_dir"}``."""
    pattern = os.path.join(trace_dir, "**", "perfetto_trace.json.gz")
    try:
        jax.block_until_ready(fn(*args))
        before = set(glob.glob(pattern, recursive=True))
        with jax.profiler.trace(trace_dir, create_perfetto_trace=True):
            for _ in range(calls):
                with jax.profiler.TraceAnnotation(_CALL):
                    jax.block_until_ready(fn(*args))
        written = sorted(set(glob.glob(pattern, recursive=True)) - before, key=os.path.getmtime)
        if not written:
            return {"unavailable": "jax.profiler wrote no perfetto_trace.json.gz", "trace_dir": trace_dir}
        with gzip.open(written[-1], "rt") as f:
            trace = json.load(f)
    except Exception as error:  # a profiler already running, an unreadable trace: the run goes on
        reason = error_line(error)
        return {"unavailable": reason, "trace_dir": trace_dir}
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return {**summarize_trace(events, calls), "cores": usable_cores(), "trace_dir": trace_dir}


def format_kernels(kernels: dict[str, Any]) -> str:
    """:func:`kernel_summary`'s result as a few indented lines."""
    if "unavailable" in kernels:
        return f"  kernels: no trace summary ({kernels['unavailable']})"
    kinds = " · ".join(f"{k['kind']} {k['share'] * 100:.0f}%" for k in kernels["kinds"])
    lines = [
        f"  kernels ({kernels['calls']} traced calls of the full update, in {kernels['trace_dir']}):",
        f"    {kernels['kernels_per_call']:,.0f} per update, {kernels['mean_kernel_us']:.1f} µs each on average "
        f"(traced: the small ones run slower than untraced); some kernel is running "
        f"{kernels['covered_share'] * 100:.0f}% of the update's wall time, {kernels['concurrency']:.2f} at once "
        f"on average ({kernels['threads']} XLA threads, {kernels['cores']} cores)",
        f"    time by kind: {kinds}",
    ]
    if kernels["cores"] > 1 and kernels["concurrency"] < ONE_AT_A_TIME:
        lines.append(
            f"    one kernel at a time: the update uses one of the {kernels['cores']} cores; more members or envs "
            "per program, or several seeds over cores (the CLI's default), put the others to work"
        )
    return "\n".join(lines)


def _phase_rows(measured: list[tuple[str, float, float]], env_steps: int, algo: str) -> tuple[list[dict], float]:
    """The breakdown's rows from ``(label, compile s, seconds)`` of the env-only
    probe, the cumulative phases and the full update; and the seconds of the
    last phase before the learner."""
    full = measured[-1][2]
    rows = [
        {
            "phase": measured[0][0],
            "ms": measured[0][2] * 1e3,
            "share": measured[0][2] / full,
            "env_steps_per_s": env_steps / measured[0][2],
            "cumulative": False,
        }
    ]
    previous = 0.0
    for label, _, seconds in measured[1:-1]:
        rows.append(
            {
                "phase": label,
                "ms": (seconds - previous) * 1e3,
                "share": (seconds - previous) / full,
                "cumulative_ms": seconds * 1e3,
                "env_steps_per_s": env_steps / seconds,
                "cumulative": True,
            }
        )
        previous = seconds
    rows.append(
        {
            "phase": "learner: epochs × minibatches of forward/backward + optimizer"
            if algo == "ppo"
            else "learner: gradient steps on replayed batches",
            "ms": (full - previous) * 1e3,
            "share": (full - previous) / full,
            "cumulative": True,
        }
    )
    return rows, previous


def breakdown(
    trainer: Any,
    states: Any,
    hparams: Any,
    opt_level: int | None = 1,
    kernel_trace_dir: str | None = None,
    repeats: int = 5,
) -> dict[str, Any]:
    """Time the phases of one update over every member of ``states``.

    Args:
      trainer: the run's :class:`jaxrl.trainer.loop.Trainer`.
      states: TrainState with leaves ``[M, ...]``.
      hparams: hyperparameters with leaves ``[M]``.
      opt_level: the LLVM level of the run's programs on XLA:CPU
        (:attr:`jaxrl.perf.platform.Process.opt_level`).
      kernel_trace_dir: where to write a ``jax.profiler`` trace of a few calls of
        the full update, summarized into ``"kernels"`` (:func:`kernel_summary`);
        ``None`` skips it.
      repeats: timed rounds (medians over them).

    Returns:
      ``{"members", "env_steps_per_update", "phases": [{"phase", "ms", "share",
      "env_steps_per_s"}], "full_update_ms", "kernels", ...}``; shares are of
      the full update.
    """
    agent, env = trainer.agent, trainer.env
    steps = trainer.config.algo.num_steps
    members = int(jax.tree.leaves(hparams)[0].shape[0])
    params = env.default_params

    def env_only(state: Any) -> Any:
        return random_steps(env, state.agent.env_state, state.eval_key, steps, params)

    probes: list[tuple[str, Any]] = [("env only: random actions, no policy", jax.vmap(env_only))]
    for label, fn in agent.phases:
        probes.append((label, jax.vmap(lambda s, hp, fn=fn: fn(s.agent, hp))))
    probes.append(("full update", jax.vmap(lambda s, hp: trainer.update(s, hp))))

    calls = [(fn, (states,) if label.startswith("env only") else (states, hparams)) for label, fn in probes]
    timed, compiled = _time_interleaved(calls, repeats, perf.compile_options(perf.of(trainer.config), opt_level))
    measured = [(label, c, seconds) for (label, _), (c, seconds) in zip(probes, timed, strict=True)]
    full = measured[-1][2]
    env_steps = trainer.steps_per_update * members
    rows, previous = _phase_rows(measured, env_steps, trainer.config.algo.name)
    learner_share = (full - previous) / full
    return {
        "members": members,
        "env_steps_per_update": env_steps,
        "full_update_ms": full * 1e3,
        "full_update_env_steps_per_s": env_steps / full,
        "phases": rows,
        "bound": "learner-bound" if learner_share >= 0.5 else "rollout-bound",
        "compile_s": {label: round(c, 2) for label, c, _ in measured},
        "repeats": repeats,
        "kernels": None if kernel_trace_dir is None else kernel_summary(compiled[-1], calls[-1][1], kernel_trace_dir),
    }


def format_breakdown(result: dict[str, Any]) -> str:
    """The breakdown as a small text table."""
    lines = [
        f"profile: one update of {result['members']} members × {result['env_steps_per_update'] // result['members']} "
        f"env steps = {result['full_update_ms']:.2f} ms "
        f"({result['full_update_env_steps_per_s']:,.0f} env steps/s) · {result['bound']}",
        f"  {'phase':<62} {'ms':>9} {'share':>7}",
    ]
    for row in result["phases"]:
        share = f"{row['share'] * 100:6.1f}%" if row["cumulative"] else f"({row['share'] * 100:4.0f}%)"
        lines.append(f"  {row['phase']:<62} {row['ms']:9.2f} {share:>7}")
    lines.append("  (env only is the ceiling of the environment alone, not a part of the update; parts are")
    lines.append("   timed as separate programs, so they add up to the fused update only approximately)")
    if result.get("kernels"):
        lines.append(format_kernels(result["kernels"]))
    return "\n".join(lines)
