"""The chunk loop: a :class:`~jaxrl.run.spec.RunSpec`'s program run chunk by
chunk, and what Python does between chunks — records to ``metrics.jsonl`` and
the dashboards, the live progress line, the NaN policy, checkpoints, stop
requests — then the held-out evaluation and the summary, computed from the
records in memory.

:func:`execute` is the whole of it; :func:`open_session` (restore or start,
compile, dashboards) and :func:`run_chunk` are its two halves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from jaxrl.core.errors import ConfigError
from jaxrl.perf.platform import enable_compile_cache
from jaxrl.run import memory, parallel, program, records, stats, summary
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.io import JsonlWriter, jsonable, write_json
from jaxrl.run.logs import LiveProgress, flat, format_count, open_dashboards
from jaxrl.run.overrides import to_dict
from jaxrl.run.parallel import is_primary, to_host
from jaxrl.run.profile import breakdown, format_breakdown
from jaxrl.run.rundir import config_digests, discard, layout_note, save_checkpoint
from jaxrl.run.signals import StopRequest
from jaxrl.run.spec import RunSpec
from jaxrl.trainer.loop import Progress

__all__ = ["Outcome", "Session", "execute", "open_session", "run_chunk"]


class Outcome(NamedTuple):
    code: int  # exit status
    summary: dict[str, Any] | None = None  # None unless training finished
    records: list[Any] = []  # noqa: RUF012 (never mutated) every record of the run, when it finished


@dataclass
class Session:
    """A run in progress: what the chunk loop reads and updates between chunks."""

    spec: RunSpec
    log: Callable[[str], None]
    progress: LiveProgress
    programs: program.Compiled  # the compiled init/advance/close programs
    carry: Any  # program.Carry, on the run's devices
    checkpointer: Checkpointer | None
    metrics_log: JsonlWriter
    writers: list[Any]
    records: list[Any]  # every record of the run so far (a resumed run's read back once)
    chash: str  # the config hash every checkpoint carries
    layout: dict[str, Any]  # the layout record every checkpoint carries
    start_chunk: int
    compile_s: float
    t_start: float
    train_s_before: float = 0.0  # training time of earlier launches (resume)
    train_s: float = 0.0
    last_saved: int = 0  # chunk of the newest checkpoint
    failed_at: Any = None  # int [M]: each member's first non-finite update (0: healthy)
    profile: dict[str, Any] | None = None

    def close(self) -> None:
        self.progress.close()
        for writer in self.writers:
            writer.close()
        if self.checkpointer is not None:
            self.checkpointer.close()


def execute(
    spec: RunSpec,
    *,
    stop_after_chunks: int | None = None,
    log: Callable[[str], None] | None = None,
    stopper: StopRequest | None = None,
) -> Outcome:
    """Run ``spec`` to the end (or to a stop), writing ``spec.run_dir``.

    ``stop_after_chunks`` stops (with a checkpoint, like SIGINT) after that many
    chunks of this invocation — for tests and scripted preemption."""
    log = _logger(log)
    stopper = stopper or StopRequest()
    session = open_session(spec, log)
    try:
        if stopper.signum is not None:
            return _stop(session, stopper)
        num_chunks = spec.trainer.num_chunks
        for chunk in range(session.start_chunk, num_chunks):
            ended = run_chunk(session, chunk)
            if ended is not None:
                return ended
            scripted = stop_after_chunks is not None and chunk + 1 - session.start_chunk >= stop_after_chunks
            if chunk + 1 < num_chunks and (stopper.signum is not None or scripted):
                return _stop(session, stopper)
        return _finish(session)
    finally:
        session.close()


def _logger(log: Callable[[str], None] | None) -> Callable[[str], None]:
    """``log`` (default: stderr); on processes other than 0 of a multi-process run, errors only."""
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    if is_primary():
        return log
    return lambda text: log(text) if text.startswith("error") else None


# ---------------------------------------------------------------------------
# Opening a run: restore or start, compile, dashboards
# ---------------------------------------------------------------------------


def open_session(spec: RunSpec, log: Callable[[str], None]) -> Session:
    """Everything before the first chunk: the compilation cache, the program and
    its memory checks, the checkpoint to resume from (or a new run directory),
    the compile, ``profile=true``'s breakdown and the dashboards."""
    config, trainer = spec.config, spec.trainer
    t_start = spec.process.started or time.perf_counter()  # the wall time counts the imports too
    cache = enable_compile_cache(config.compile_cache, spec.process.compile_cache)
    primary = is_primary()
    progress = LiveProgress(
        trainer.num_updates,
        trainer.steps_per_update,
        spec.num_members,
        enabled=bool(config.progress) and primary,
        warmup_steps=trainer.warmup_steps,
    )
    built = program.build(spec)
    too_big = memory.sizes_fix(config, spec.num_members)
    state_bytes = memory.state_bytes(built.abstract, spec.layout, spec.algorithm.env_fields)
    _fits(spec, lambda: memory.check(state_bytes, spec.layout, "the state", too_big))
    digests, layout = config_digests(spec), parallel.layout_record(spec.layout)
    chash = digests[0]
    restored = _restore(spec, built, digests, layout) if spec.resuming else None
    checkpointer = restored[0] if restored else _new_run(spec)
    _announce(spec, log)
    metrics_log = JsonlWriter(os.path.join(spec.run_dir, "metrics.jsonl"))
    start_chunk, kept = (restored[2], _keep_records(metrics_log, restored[2], primary)) if restored else (0, [])
    if restored:
        log(f"resuming after chunk {start_chunk}/{trainer.num_chunks}")
        for note in restored[4]:
            log(note)
    compiled = program.compile_programs(spec, built, restored is None, lambda check: _fits(spec, check))
    carry = restored[1] if restored else compiled.init(built.keys, spec.members.hparams)
    log(f"compiled in {compiled.seconds:.1f} s" + (f" (compilation cache: {cache})" if cache else ""))
    session = Session(
        spec, log, progress, compiled, carry, checkpointer, metrics_log, [], kept, chash, layout, start_chunk,
        compiled.seconds, t_start, restored[3] if restored else 0.0, last_saved=start_chunk,
    )  # fmt: skip
    session.profile = _profile(spec, carry, log) if config.profile else None
    progress.update = start_chunk * trainer.chunk_updates
    session.failed_at = to_host(carry.states.failed_at)
    session.writers = _start_writers(spec, trainer.env_steps(start_chunk * trainer.chunk_updates) if start_chunk else 0)
    return session


def _fits(spec: RunSpec, check: Callable[[], None]) -> None:
    """Run a memory check; on a ConfigError, leave no run directory this run made."""
    try:
        check()
    except ConfigError:
        discard(spec)
        raise


def _restore(spec: RunSpec, built: program.Program, digests: tuple[str, ...], layout: dict[str, Any]) -> tuple:
    """``(checkpointer, carry, chunk, train_s before, notes)`` of the newest intact
    checkpoint — checked before anything is printed or compiled; unreadable newer
    ones moved aside so that their chunks can be written again."""
    checkpointer = Checkpointer(spec.run_dir, keep=spec.config.keep)
    restored = checkpointer.restore(built.abstract, built.shardings)
    meta = restored.meta
    if meta.get("config_hash") not in digests:  # this version's digest, or an older version's of the same run
        raise ConfigError("resume", spec.run_dir, "checkpoint was written by a different config", "start a new run")
    notes = []
    note = program.fallback_note(restored, spec.trainer)
    if note:
        where = checkpointer.set_aside([s for s, _ in restored.skipped]) if is_primary() else None
        parallel.sync("jaxrl-set-aside")
        checkpointer.manager.reload()
        notes.append(note + (f"; they are moved to {where}" if where else ""))
    note = layout_note(meta, layout, "the run continues")
    if note:
        notes.append(note)
    return checkpointer, restored.state, int(meta["chunk"]), float(meta.get("train_time_s", 0.0)), notes


def _new_run(spec: RunSpec) -> Checkpointer | None:
    """The new run's directory (process 0) and checkpointer (``checkpoint=true``)."""
    if is_primary():
        os.makedirs(spec.run_dir, exist_ok=True)
    return Checkpointer(spec.run_dir, keep=spec.config.keep) if spec.config.checkpoint else None


def _keep_records(metrics_log: JsonlWriter, start_chunk: int, primary: bool) -> list[Any]:
    """A resumed run's records up to its checkpoint (later ones are dropped from the file too)."""
    if not primary:
        return []
    metrics_log.truncate(lambda r: int(r.get("chunk", 0)) < start_chunk)
    return records.read(metrics_log.path)


def _announce(spec: RunSpec, log: Callable[[str], None]) -> None:
    """The run directory and one line saying what trains on what."""
    import jax

    config, trainer, members = spec.config, spec.trainer, spec.members
    configs, n = len(members.labels), spec.num_members
    if config.pbt.population:
        what = f"population {n}"
    elif configs == 1:
        what = f"{n} seeds"
    else:
        what = f"{configs} configurations × {n // configs} seeds"
    log(f"run directory: {spec.run_dir}")
    log(
        f"{spec.env.name} · {config.algo.name} · {what} × {config.num_envs} envs · "
        f"{format_count(trainer.total_env_steps)} steps each in {trainer.num_chunks} chunks of {trainer.chunk_updates} updates"
        f" · {jax.default_backend()} ({_devices_text(spec)})"
    )
    if trainer.total_env_steps != config.total_timesteps:
        log(
            f"total_timesteps={config.total_timesteps} rounds up to {trainer.total_env_steps} env steps per seed: "
            f"{trainer.num_chunks} chunks × {trainer.chunk_updates} updates × {trainer.steps_per_update} steps"
            + (f" after {trainer.warmup_steps} warm-up steps" if trainer.warmup_steps else "")
        )


def _devices_text(spec: RunSpec) -> str:
    import jax

    layout = spec.layout
    if layout is None:
        threads = spec.process.cpu_threads
        return "1 device" + (f", {threads} CPU thread{'s' if threads > 1 else ''}" if threads else "")
    what = "members sharded" if layout.mode == "seeds" else "envs split"
    hosts = f" on {jax.process_count()} processes" if jax.process_count() > 1 else ""
    return f"{layout.size} devices{hosts}, {what}"


def _profile(spec: RunSpec, carry: Any, log: Callable[[str], None]) -> dict[str, Any]:
    """profile=true: the per-update time breakdown and its kernel summary
    (written to profile.json and printed; a few calls of the update are traced
    into ``RUN_DIR/profile/update``); the first chunk is traced into
    ``RUN_DIR/profile``."""
    log("profile: timing the parts of one update as separate programs …")
    trace_dir = os.path.join(spec.run_dir, "profile")
    result = breakdown(
        spec.trainer, carry.states, carry.hparams, spec.process.opt_level, os.path.join(trace_dir, "update")
    )
    result["trace_dir"] = trace_dir
    if is_primary():
        write_json(os.path.join(spec.run_dir, "profile.json"), result)
    log(format_breakdown(result))
    log(f"profile: tracing the first chunk into {result['trace_dir']} (tensorboard --logdir, or Perfetto)")
    return result


def _start_writers(spec: RunSpec, start_env_steps: int) -> list[Any]:
    """TensorBoard / W&B writers (``logger=``; process 0): one curve per member and
    declared metric. One that cannot start is a setup problem: a ConfigError."""
    config, members = spec.config, spec.members
    if not is_primary():
        return []
    multi = len(members.labels) > 1
    names = [
        (f"{members.labels[c].replace(' ', ',')}/seed_{s}" if multi else f"seed_{s}")
        for s, c in zip(members.seeds, members.config_index, strict=True)
    ]
    return open_dashboards(
        config.logger,
        config.wandb_project,
        to_dict(dataclasses.replace(config, resume=None)),
        spec.run_dir,
        names,
        start_env_steps,
        spec.algorithm.metrics,
        lambda: discard(spec),
    )


# ---------------------------------------------------------------------------
# One chunk
# ---------------------------------------------------------------------------


def run_chunk(session: Session, chunk: int) -> Outcome | None:
    """Run chunk ``chunk`` and handle what it reports; an :class:`Outcome` when
    the run must end here (a failure, a checkpoint that cannot be written)."""
    import jax

    spec, trainer = session.spec, session.spec.trainer
    use_pbt = spec.config.pbt.population > 0
    hparams_now = jax.tree.map(to_host, session.carry.hparams) if use_pbt else None
    t_chunk = time.perf_counter()
    first = chunk * trainer.chunk_updates
    # progress=true feeds the line after every segment of the chunk, progress=chunk after the chunk
    report = None
    if spec.config.progress is True and is_primary():
        report = lambda done, loop: session.progress(_progress(loop, first + done))  # noqa: E731
    tracing = session.profile is not None and chunk == session.start_chunk
    with jax.profiler.trace(session.profile["trace_dir"]) if tracing else contextlib.nullcontext():
        session.carry, metrics, pbt_step = session.programs.chunk(session.carry, trainer.chunk_updates, report)
    seconds = time.perf_counter() - t_chunk
    session.train_s += seconds
    update = (chunk + 1) * trainer.chunk_updates
    if spec.config.progress == "chunk":
        session.progress(_progress(metrics.updates.loop, update))
    now_failed = to_host(session.carry.states.failed_at)
    new = _records(spec, chunk, metrics, now_failed, seconds, hparams_now, pbt_step)
    session.records += new
    if is_primary():
        session.metrics_log.write([r.to_json() for r in new])
    for writer in session.writers:
        writer.write([r.to_json() for r in new])
    ended = _failures(session, now_failed)
    if ended is None and session.checkpointer is not None:
        ended = _checkpoint(session, chunk + 1, update)
    if ended is None:
        ended = _report(session, new[-1], now_failed == 0, seconds)
    return ended


def _progress(loop: Any, update: int) -> Progress:
    """Some updates' episode statistics (LoopMetrics, leaves ``[M, n]``) as one progress report."""
    return Progress(
        np.int32(update),
        np.asarray(loop.episode_return_sum, np.float64).sum(axis=1),
        np.asarray(loop.episodes).sum(axis=1),
    )


def _records(
    spec: RunSpec, chunk: int, metrics: Any, failed: Any, seconds: float, hparams: Any, pbt_step: Any
) -> list[Any]:
    """The chunk's records: its updates' (unless strided), then its evaluation."""
    trainer, members = spec.trainer, spec.members
    first, update = chunk * trainer.chunk_updates, (chunk + 1) * trainer.chunk_updates
    out: list[Any] = []
    if members.record_updates:
        out = records.update_records(metrics.updates, chunk, first, trainer.steps_per_update, trainer.warmup_steps)
    alive = failed == 0
    returns = np.asarray(metrics.eval.returns, np.float64)  # [M, E]
    evaluated = records.EvalRecord(
        chunk=chunk,
        update=update,
        env_steps=trainer.env_steps(update),
        eval_return=jsonable(np.where(alive, returns.mean(axis=1), np.nan)),
        eval_return_std=jsonable(np.where(alive, returns.std(axis=1), np.nan)),
        eval_length=jsonable(np.asarray(metrics.eval.lengths).mean(axis=1)),
        failed_at_update=jsonable(failed),
        chunk_time_s=seconds,
        env_steps_per_s=trainer.chunk_updates * trainer.steps_per_update * spec.num_members / seconds,
    )
    if trainer.eval_sets:
        evaluated.eval_sets = {
            s.name: jsonable(np.where(alive, np.asarray(metrics.sets[s.name].returns, np.float64).mean(axis=1), np.nan))
            for s in trainer.eval_sets
        }
    if not members.record_updates:
        evaluated.training = records.chunk_training_stats(metrics.updates, spec.algorithm.metrics)
    if hparams is not None:
        evaluated.hparams = jsonable(hparams.to_dict())
        evaluated.parents = jsonable(np.asarray(pbt_step.parents))
    return [*out, evaluated]


def _failures(session: Session, now_failed: Any) -> Outcome | None:
    """Members that failed in this chunk: under ``on_nan=stop`` the run ends
    (its last checkpoint kept), under ``drop`` each is reported and the others go on."""
    spec, trainer, members = session.spec, session.spec.trainer, session.spec.members
    new = [
        (members.seeds[i], i, int(now_failed[i])) for i in np.flatnonzero((session.failed_at == 0) & (now_failed != 0))
    ]
    session.failed_at = now_failed
    for seed, member, bad_update in new:
        lo, hi = trainer.env_steps(bad_update - 1) + 1, trainer.env_steps(bad_update)
        who = (
            f"seed {seed}"
            if len(members.labels) == 1
            else f"seed {seed} of {members.labels[members.config_index[member]]}"
        )
        where = (
            f"{who}: non-finite loss, gradients or parameters at update {bad_update} (env steps {lo}–{hi} of that seed)"
        )
        if spec.config.on_nan == "stop":
            session.log(
                f"error: {where}; {_kept(session)}; fix: lower algo.lr or algo.max_grad_norm, or pass on_nan=drop to carry on without failed seeds"
            )
            return Outcome(1, None)
        session.progress.message(f"warning: {where}; on_nan=drop: it is marked failed, the others go on")
    return None


def _kept(session: Session) -> str:
    if session.last_saved:
        return f"the last good checkpoint (after chunk {session.last_saved}) is kept"
    return "no checkpoint was written"


def _checkpoint(session: Session, chunk: int, update: int) -> Outcome | None:
    """The checkpoint after ``chunk``; a failed write ends the run, the last good one kept."""
    meta = {
        "chunk": chunk,
        "update": update,
        "env_steps": session.spec.trainer.env_steps(update),
        "config_hash": session.chash,
        "train_time_s": session.train_s_before + session.train_s,
        "layout": session.layout,
    }
    error = save_checkpoint(session.checkpointer, chunk, session.carry, meta)
    if error:
        session.log(
            f"error: checkpoint after chunk {chunk} could not be written ({error}); {_kept(session)}; "
            f"fix: free disk space, then {session.spec.resume_cmd}"
        )
        return Outcome(1, None)
    session.last_saved = chunk
    return None


def _report(session: Session, evaluated: records.EvalRecord, alive: Any, seconds: float) -> Outcome | None:
    """The chunk's progress line; the run ends when every member has failed."""
    trainer = session.spec.trainer
    means = np.asarray([np.nan if v is None else v for v in evaluated.eval_return], np.float64)
    live = means[alive]
    sets = ""
    if evaluated.eval_sets and alive.any():
        sets = " · sets: " + ", ".join(
            f"{name} {stats.iqm(np.asarray(values, np.float64)[alive]):.1f}"
            for name, values in evaluated.eval_sets.items()
        )
    session.progress.message(
        f"chunk {evaluated.chunk + 1}/{trainer.num_chunks} · {format_count(evaluated.env_steps)} steps each"
        + (
            f" · eval IQM {stats.iqm(live):.1f} (min {live.min():.1f}, max {live.max():.1f})"
            if live.size
            else " · every member failed"
        )
        + sets
        + f" · {format_count(trainer.chunk_updates * trainer.steps_per_update * session.spec.num_members / seconds)} steps/s"
    )
    if not alive.any():
        session.log(
            "error: every member has failed (non-finite values); nothing left to train; fix: lower algo.lr or algo.max_grad_norm"
        )
        return Outcome(1, None)
    return None


# ---------------------------------------------------------------------------
# The end: a stop, or the held-out evaluation and the summary
# ---------------------------------------------------------------------------


def _stop(session: Session, stopper: StopRequest) -> Outcome:
    log = session.log
    if session.last_saved:
        log(f"stopped after chunk {session.last_saved}/{session.spec.trainer.num_chunks}; checkpoint saved")
        log(f"continue with: {session.spec.resume_cmd}")
    else:
        discard(session.spec)  # nothing worth keeping: leave no half-made run directory behind
        log("stopped before the first chunk finished; nothing was saved (start again to train)")
    return Outcome(stopper.exit_code if stopper.signum is not None else 0, None)


def _finish(session: Session) -> Outcome:
    """The held-out evaluation (``eval.perturb``), the summary and the dashboards' final values."""
    spec = session.spec
    heldout = program.heldout(spec, session.carry.states, session.log) if spec.heldout else None
    if not is_primary():
        return Outcome(0, None)
    times = summary.Times(
        session.compile_s, session.train_s_before + session.train_s, time.perf_counter() - session.t_start
    )
    result = summary.summarize(spec, session.records, times, heldout)
    result["devices"] = spec.layout.size if spec.layout else 1
    result["cpu_threads"] = (
        spec.process.cpu_threads or None
    )  # the XLA:CPU thread count the CLI set (None: XLA's default)
    if session.profile is not None:
        result["profile"] = session.profile
    block = result["configs"][0]
    finals = {k: block.get(k) for k in ("iqm", "mean", "solved_fraction")}
    for name, stats_of_set in (block.get("sets") or {}).items():  # eval.sets: final IQM and gap per set
        finals[f"sets/{name}/iqm"] = stats_of_set.get("iqm")
        finals[f"sets/{name}/gap"] = (block.get("generalization_gap") or {}).get(name, {}).get("gap")
    hyper = flat(to_dict(dataclasses.replace(spec.config, run_dir=None, resume=None)))
    for writer in session.writers:
        writer.finish(hyper, finals)
    return Outcome(0, result, session.records)
