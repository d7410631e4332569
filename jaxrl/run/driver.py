"""The host driver: runs one compiled program over a batch of *members* chunk
by chunk, and writes the run directory.

A member is one (configuration, seed) pair. ``python -m jaxrl.train`` runs one
configuration over its seeds; ``python -m jaxrl.sweep`` runs every traced
hyperparameter configuration × every seed in one program; PBT runs a
population whose hyperparameters evolve inside the program. All three are a
:class:`Job` for :func:`execute`, which owns what Python does between chunks:
metrics to JSON lines, orbax checkpoints, live progress, NaN policy, signals,
resume, held-out evaluation and the summary.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from flax import struct

from jaxrl import perf
from jaxrl.core.config import Config
from jaxrl.core.errors import ConfigError, error_line
from jaxrl.core.version import __version__
from jaxrl.envs import param_names, with_params
from jaxrl.envs.params import grid, parse_grid_term
from jaxrl.perf import platform
from jaxrl.perf.platform import enable_compile_cache
from jaxrl.run import memory, parallel, stats
from jaxrl.run.checkpoint import Checkpointer, config_hash, describe_layout
from jaxrl.run.config import to_dict
from jaxrl.run.logs import JsonlWriter, LiveProgress, flat, format_count, jsonable, make_writers
from jaxrl.run.parallel import is_primary, to_host
from jaxrl.run.profile import breakdown, format_breakdown
from jaxrl.trainer import pbt as pbt_lib
from jaxrl.trainer.loop import Progress, make_batched, make_heldout, make_train
from jaxrl.trainer.pbt import lineage

__all__ = ["StopRequest", "Job", "Outcome", "execute", "parse_perturb", "write_json", "version"]


class StopRequest:
    """SIGINT/SIGTERM → finish the current chunk, checkpoint, exit 130/143."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.getsignal(signum)
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:  # second signal: give up immediately
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signum = signum
        sys.stderr.write(f"\n{signal.Signals(signum).name}: stopping after the current chunk (again to abort)\n")

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signum or 0)


@dataclass(frozen=True)
class Job:
    """One compiled program's worth of training."""

    config: Config  # static settings (shapes, counts, flags) shared by every member
    seeds: tuple[int, ...]  # seed id of each member
    config_index: tuple[int, ...]  # configuration of each member
    labels: tuple[str, ...]  # one per configuration
    hparams: Any  # traced hyperparameters, every leaf [M] (PBT: the initial population)
    run_dir: str
    resuming: bool = False
    record_updates: bool = True  # one metrics record per update; else one per chunk
    created: bool = True  # run_dir was made for this job (removed if stopped before any checkpoint)


class Outcome(NamedTuple):
    code: int  # exit status
    summary: dict[str, Any] | None  # None unless training finished


@struct.dataclass
class Carry:
    """What the compiled program carries from chunk to chunk (and checkpoints)."""

    states: Any  # loop.TrainState, leaves [M, ...]
    hparams: Any  # leaves [M]
    pbt_key: Any  # typed PRNG key []


def _is_key(x: Any) -> bool:
    import jax

    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def version() -> str:

    return __version__


def write_json(path: str, data: dict[str, Any]) -> None:

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(jsonable(data), f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def parse_perturb(text: str, env: Any) -> list[dict[str, float]]:
    """``"length=0.25,0.5 gravity=9.8,12"`` → every combination as a dict.

    Raises ConfigError naming unknown parameters or non-numeric values."""
    text = (text or "").strip()
    if not text:
        return []
    names = param_names(env)
    axes = dict(parse_grid_term(part, env, "eval.perturb", text, names) for part in text.replace(";", " ").split())
    return grid(axes)


# ---------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------


def update_records(
    metrics: Any, chunk: int, first_update: int, steps_per_update: int, offset: int = 0
) -> list[dict[str, Any]]:
    """One JSON record per update, every field a per-member list."""
    import numpy as np

    fields = metrics._asdict()
    episodes = np.asarray(fields["episodes"])  # [M, U]
    with np.errstate(invalid="ignore", divide="ignore"):
        ep_return = np.where(episodes > 0, np.asarray(fields["episode_return_sum"]) / episodes, np.nan)
        ep_length = np.where(episodes > 0, np.asarray(fields["episode_length_sum"]) / episodes, np.nan)
    skip = {"episode_return_sum", "episode_length_sum", "episodes", "finite"}
    records = []
    for u in range(episodes.shape[1]):
        update = first_update + u + 1
        record = {
            "type": "update",
            "chunk": chunk,
            "update": update,
            "env_steps": offset + update * steps_per_update,
            "episode_return": ep_return[:, u],
            "episode_length": ep_length[:, u],
            "episodes": episodes[:, u],
        }
        for name, value in fields.items():
            if name not in skip:
                record[name] = np.asarray(value)[:, u]
        records.append(record)
    return records


def chunk_training_stats(metrics: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """Per-member training statistics of a whole chunk (for strided records):
    episode statistics over the chunk's completed episodes, and the mean over
    its updates of each metric in ``names`` (the algorithm's declared metrics)."""
    import numpy as np

    fields = metrics._asdict()
    episodes = np.asarray(fields["episodes"]).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "episode_return": np.where(
                episodes > 0, np.asarray(fields["episode_return_sum"]).sum(axis=1) / episodes, np.nan
            ),
            "episode_length": np.where(
                episodes > 0, np.asarray(fields["episode_length_sum"]).sum(axis=1) / episodes, np.nan
            ),
            "episodes": episodes,
        }
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a member whose every update failed: NaN
        for name in names:
            out[name] = np.nanmean(np.asarray(fields[name], np.float64), axis=1)
    return out


# ---------------------------------------------------------------------------
# The chunk loop
# ---------------------------------------------------------------------------


def _save(
    checkpointer, chunk: int, carry, chash: str, update: int, env_steps: int, train_s: float, layout: dict[str, Any]
) -> str | None:
    """Write a checkpoint; return None, or a short reason when the write failed."""
    meta = {
        "chunk": chunk,
        "update": update,
        "env_steps": env_steps,
        "config_hash": chash,
        "train_time_s": train_s,
        "jaxrl_version": version(),
        "layout": layout,
    }
    try:
        checkpointer.save(chunk, carry, meta)
    except Exception as error:  # orbax wraps OS errors in its own types
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
                return "no space left on device"
            cause = cause.__cause__ or cause.__context__
        return f"{type(error).__name__}: {error_line(error)}"
    return None


def _stop(log, stopper: StopRequest, job: Job, last_saved: int, num_chunks: int, resume_cmd: str) -> Outcome:
    if last_saved:
        log(f"stopped after chunk {last_saved}/{num_chunks}; checkpoint saved")
        log(f"continue with: {resume_cmd}")
    else:
        if job.created and is_primary():  # nothing worth keeping: leave no half-made run directory behind
            import shutil

            shutil.rmtree(job.run_dir, ignore_errors=True)
        log("stopped before the first chunk finished; nothing was saved (start again to train)")
    return Outcome(stopper.exit_code if stopper.signum is not None else 0, None)


# Config fields that may change between a run and its resume.
NOT_HASHED = (
    "progress",
    "plots",
    "keep",
    "checkpoint",
    "logger",
    "wandb_project",
    "compile_cache",
    "profile",
    "devices",
    "dist",
)


def config_digest(job: Job, hparams_host: Any) -> str:
    """Hash of everything that fixes the program and its numbers."""

    data = to_dict(dataclasses.replace(job.config, run_dir=None, resume=None))
    for name in NOT_HASHED:  # how a run is watched or laid out, not what it computes
        data.pop(name, None)
    data["_members"] = {
        "seeds": list(job.seeds),
        "config_index": list(job.config_index),
        "labels": list(job.labels),
        "hparams": jsonable({k: v for k, v in dataclasses.asdict(hparams_host).items()}),
    }
    return config_hash(data)


def build(job: Job, trainer: Any, progress: Any = None, layout: Any = None) -> tuple[Any, Callable, Callable, Any]:
    """``(keys, init, program, abstract_carry)`` of a job: ``init(keys, hparams)
    -> Carry`` and ``program(carry) -> (carry, ChunkMetrics, PBTStep | None)``;
    ``layout`` (a :class:`jaxrl.run.parallel.Plan`) replicates the live progress
    reports before their host call."""
    import jax
    import numpy as np

    config = job.config
    algorithm = trainer.algorithm
    use_pbt = config.pbt.population > 0
    keys = jax.vmap(jax.random.key)(np.asarray(job.seeds, np.uint32))
    # at most ~32 host round trips per chunk (each costs ≈ 2 ms on a small CPU)
    every = -(-trainer.chunk_updates // 32)
    replicated = parallel.replicated(layout) if progress is not None and layout is not None else None
    init_b, chunk_b = make_batched(
        trainer, hparams_batched=True, progress=progress, progress_every=every, progress_sharding=replicated
    )

    def init(keys, hparams):
        return Carry(init_b(keys, hparams), hparams, jax.random.key(config.pbt.seed))

    def program(carry: Carry):
        states, metrics = chunk_b(carry.states, carry.hparams)
        if not use_pbt:
            return carry.replace(states=states), metrics, None
        pbt_key, key = jax.random.split(carry.pbt_key)
        ranked = metrics.sets[config.pbt.fitness] if config.pbt.fitness else metrics.eval
        fitness = ranked.returns.mean(axis=-1)
        new_states, new_hparams, step = pbt_lib.exploit_explore(
            states, carry.hparams, fitness, key, config.pbt, algorithm.pbt_bounds, algorithm.own_fields
        )
        last = states.update[0] >= trainer.num_updates  # no PBT step after the final evaluation

        def pick(new, old):  # keys are never copied, so they pass through untouched
            return jax.tree.map(lambda a, b: a if _is_key(a) else jax.lax.select(last, b, a), new, old)

        new_states = pick(new_states, states)
        new_hparams = pick(new_hparams, carry.hparams)
        step = step._replace(parents=jax.numpy.where(last, -1, step.parents))
        return Carry(new_states, new_hparams, pbt_key), metrics, step

    return keys, init, program, jax.eval_shape(init, keys, job.hparams)


def load_carry(job: Job, env: Any, chunk: int | None = None, field: str = "resume", layout: Any = None) -> Any:
    """The checkpointed :class:`Carry` of ``job.run_dir`` (the newest intact one,
    or ``chunk``) as a :class:`jaxrl.run.checkpoint.Restored`, laid out as
    ``layout`` (a :class:`jaxrl.run.parallel.Plan`; ``None``: this process's first
    device), whatever layout wrote it."""

    trainer = make_train(job.config, env)
    _, _, _, abstract = build(job, trainer)
    shardings = parallel.carry_shardings(layout, abstract, trainer.algorithm.env_fields)
    return Checkpointer(job.run_dir, keep=job.config.keep).restore(abstract, shardings, chunk, field=field)


def fallback_note(restored: Any, trainer: Any) -> str | None:
    """One line when newer checkpoints than the restored one were unreadable:
    which ones, why, and how many env steps per member that loses."""
    if not restored.skipped:
        return None

    newest = max(s for s, _ in restored.skipped)
    lost = trainer.env_steps(newest * trainer.chunk_updates) - trainer.env_steps(restored.chunk * trainer.chunk_updates)
    why = "; ".join(f"checkpoint {s}: {r}" for s, r in restored.skipped)
    return (
        f"warning: newer checkpoints are unreadable ({why}); using checkpoint {restored.chunk} "
        f"({format_count(trainer.env_steps(restored.chunk * trainer.chunk_updates))} env steps per member, "
        f"{format_count(lost)} fewer)"
    )


def layout_note(meta: dict[str, Any], now: dict[str, Any], what: str) -> str | None:
    """One line when a checkpoint was written on another layout than ``now``."""

    saved = meta.get("layout")
    if not isinstance(saved, dict) or saved == now:
        return None
    return (
        f"note: checkpoint {meta.get('chunk', '?')} was written on {describe_layout(saved)}; {what} on "
        f"{describe_layout(now)}, so the last bits may differ from the same layout"
    )


def execute(
    job: Job,
    env: Any,
    *,
    stop_after_chunks: int | None = None,
    log: Callable[[str], None] | None = None,
    stopper: StopRequest | None = None,
    resume_cmd: str = "",
) -> Outcome:
    """Run ``job`` to the end (or to a stop), writing ``job.run_dir``."""
    import jax
    import numpy as np

    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    stopper = stopper or StopRequest()
    config = job.config
    t_start = time.perf_counter()
    trainer = make_train(config, env)
    num_members = len(job.seeds)
    hparams_host = jax.tree.map(np.asarray, job.hparams)
    chash = config_digest(job, hparams_host)
    use_pbt = config.pbt.population > 0
    resume_cmd = resume_cmd or f"python -m jaxrl.train resume={job.run_dir}"
    heldout_settings = parse_perturb(config.eval.perturb, env)  # checked before anything compiles

    cache = enable_compile_cache(config.compile_cache)
    primary = parallel.is_primary()
    if not primary:  # other processes of a multi-process run only report errors
        outer_log = log
        log = lambda text: outer_log(text) if text.startswith("error") else None  # noqa: E731
    progress = LiveProgress(
        trainer.num_updates, trainer.steps_per_update, num_members, enabled=bool(config.progress) and primary
    )
    # progress=true feeds the line from inside the program after every update (a
    # host callback, so JAX cannot keep that program in the persistent cache);
    # progress=chunk feeds it between chunks.
    layout = parallel.plan(config, num_members)  # None: one device
    keys, init, program, abstract = build(
        job, trainer, progress if config.progress is True and primary else None, layout
    )
    shardings = parallel.carry_shardings(layout, abstract, trainer.algorithm.env_fields) if layout else None
    too_big = memory.sizes_fix(config, num_members)
    _fits(
        job,
        lambda: memory.check(
            memory.state_bytes(abstract, layout, trainer.algorithm.env_fields), layout, "the state", too_big
        ),
    )
    checkpointer = None
    metrics_log = JsonlWriter(os.path.join(job.run_dir, "metrics.jsonl"))
    start_chunk, train_s_before, carry = 0, 0.0, None
    layout_now = parallel.layout_record(layout)
    notes: list[str] = []
    if job.resuming:  # check the checkpoint before printing or compiling anything
        checkpointer = Checkpointer(job.run_dir, keep=config.keep)
        restored = checkpointer.restore(
            abstract, parallel.carry_shardings(layout, abstract, trainer.algorithm.env_fields)
        )
        carry, meta = restored.state, restored.meta
        if meta.get("config_hash") != chash:
            raise ConfigError("resume", job.run_dir, "checkpoint was written by a different config", "start a new run")
        start_chunk = int(meta["chunk"])
        train_s_before = float(meta.get("train_time_s", 0.0))
        note = fallback_note(restored, trainer)
        if note:  # the unreadable ones move aside, so that their chunks can be written again
            where = checkpointer.set_aside([s for s, _ in restored.skipped]) if primary else None
            parallel.sync("jaxrl-set-aside")
            checkpointer.manager.reload()
            notes.append(note + (f"; they are moved to {where}" if where else ""))
        note = layout_note(meta, layout_now, "the run continues")
        if note:
            notes.append(note)
    else:
        if primary:
            os.makedirs(job.run_dir, exist_ok=True)
        if config.checkpoint:
            checkpointer = Checkpointer(job.run_dir, keep=config.keep)
    configs = len(job.labels)
    what = (
        f"{num_members} seeds"
        if configs == 1 and not use_pbt
        else (f"population {num_members}" if use_pbt else f"{configs} configurations × {num_members // configs} seeds")
    )
    log(f"run directory: {job.run_dir}")
    log(
        f"{env.name} · {config.algo.name} · {what} × {config.num_envs} envs · "
        f"{format_count(trainer.total_env_steps)} steps each in {trainer.num_chunks} chunks of {trainer.chunk_updates} updates"
        f" · {jax.default_backend()} ({_devices_text(layout)})"
    )
    if job.resuming and primary:
        metrics_log.truncate(lambda r: int(r.get("chunk", 0)) < start_chunk)
        log(f"resuming after chunk {start_chunk}/{trainer.num_chunks}")
        for note in notes:
            log(note)

    t0 = time.perf_counter()
    if layout is None:
        init_jit, program_jit = jax.jit(init), jax.jit(program, donate_argnums=0)
    else:
        rep = parallel.replicated(layout)
        init_jit = jax.jit(init, out_shardings=shardings)
        program_jit = jax.jit(program, donate_argnums=0, in_shardings=(shardings,), out_shardings=(shardings, rep, rep))
    options = perf.compile_options(perf.of(job.config))
    init_c = init_jit.lower(keys, job.hparams).compile(options) if carry is None else None
    program_c = program_jit.lower(abstract).compile(options)
    compile_s = time.perf_counter() - t0
    for name, compiled in (("the init program", init_c), ("the training program", program_c)):
        if compiled is not None:
            _fits(job, lambda: memory.check(memory.program_bytes(compiled), layout, name, too_big))
    if carry is None:
        carry = init_c(keys, job.hparams)
    log(f"compiled in {compile_s:.1f} s" + (f" (compilation cache: {cache})" if cache else ""))
    profile_result = None
    if config.profile:
        profile_result = _profile(job, trainer, carry, log)

    progress.update = start_chunk * trainer.chunk_updates
    failed_at = parallel.to_host(carry.states.failed_at)
    train_s, last_saved = 0.0, start_chunk
    try:
        writers = (
            _writers(
                job, trainer.env_steps(start_chunk * trainer.chunk_updates) if start_chunk else 0, trainer.algorithm
            )
            if primary
            else []
        )
    except Exception as error:  # a dashboard that cannot start is a setup problem
        if job.created:
            import shutil

            shutil.rmtree(job.run_dir, ignore_errors=True)
        reason = error_line(error)
        raise ConfigError(
            "logger", config.logger, f"could not start ({reason})", "check the logger's setup, or pass logger=jsonl"
        ) from None
    try:
        if stopper.signum is not None:
            return _stop(log, stopper, job, last_saved, trainer.num_chunks, resume_cmd)
        for chunk in range(start_chunk, trainer.num_chunks):
            hparams_now = jax.tree.map(parallel.to_host, carry.hparams) if use_pbt else None
            t_chunk = time.perf_counter()
            if profile_result is not None and chunk == start_chunk:
                with jax.profiler.trace(profile_result["trace_dir"]):
                    carry, metrics, step = program_c(carry)
                    metrics, step = jax.device_get((metrics, step))
            else:
                carry, metrics, step = program_c(carry)
                metrics, step = jax.device_get((metrics, step))
            dt = time.perf_counter() - t_chunk
            if config.progress == "chunk":
                progress(_chunk_progress(metrics.updates, update=(chunk + 1) * trainer.chunk_updates))
            train_s += dt
            first = chunk * trainer.chunk_updates
            update = first + trainer.chunk_updates
            records = (
                update_records(metrics.updates, chunk, first, trainer.steps_per_update, trainer.warmup_steps)
                if job.record_updates
                else []
            )
            now_failed = parallel.to_host(carry.states.failed_at)
            alive = now_failed == 0
            eval_returns = np.asarray(metrics.eval.returns, np.float64)  # [M, E]
            seed_means = np.where(alive, eval_returns.mean(axis=1), np.nan)
            record = {
                "type": "eval",
                "chunk": chunk,
                "update": update,
                "env_steps": trainer.env_steps(update),
                "eval_return": seed_means,
                "eval_return_std": np.where(alive, eval_returns.std(axis=1), np.nan),
                "eval_length": np.asarray(metrics.eval.lengths).mean(axis=1),
                "failed_at_update": now_failed,
                "chunk_time_s": dt,
                "env_steps_per_s": trainer.chunk_updates * trainer.steps_per_update * num_members / dt,
            }
            if trainer.eval_sets:
                record["eval_sets"] = set_means(trainer, metrics.sets, alive)
            if not job.record_updates:
                record.update(chunk_training_stats(metrics.updates, trainer.algorithm.metrics))
            if use_pbt:
                record["hparams"] = {k: v for k, v in dataclasses.asdict(hparams_now).items()}
                record["parents"] = np.asarray(step.parents)
            records.append(record)
            if primary:
                metrics_log.write(records)
            for writer in writers:
                writer.write(records)
            new_failures = [(job.seeds[i], i, int(now_failed[i])) for i in np.flatnonzero((failed_at == 0) & ~alive)]
            failed_at = now_failed
            for seed, member, bad_update in new_failures:
                lo = trainer.env_steps(bad_update - 1) + 1
                hi = trainer.env_steps(bad_update)
                who = f"seed {seed}" if configs == 1 else f"seed {seed} of {job.labels[job.config_index[member]]}"
                where = f"{who}: non-finite loss, gradients or parameters at update {bad_update} (env steps {lo}–{hi} of that seed)"
                if config.on_nan == "stop":
                    kept = (
                        f"the last good checkpoint (after chunk {last_saved}) is kept"
                        if last_saved
                        else "no checkpoint was written"
                    )
                    log(
                        f"error: {where}; {kept}; fix: lower algo.lr or algo.max_grad_norm, or pass on_nan=drop to carry on without failed seeds"
                    )
                    return Outcome(1, None)
                progress.message(f"warning: {where}; on_nan=drop: it is marked failed, the others go on")
            if checkpointer is not None:
                error = _save(
                    checkpointer,
                    chunk + 1,
                    carry,
                    chash,
                    update,
                    trainer.env_steps(update),
                    train_s_before + train_s,
                    layout_now,
                )
                if error:
                    kept = (
                        f"the last good checkpoint (after chunk {last_saved}) is kept"
                        if last_saved
                        else "no checkpoint was written"
                    )
                    log(
                        f"error: checkpoint after chunk {chunk + 1} could not be written ({error}); {kept}; fix: free disk space, then {resume_cmd}"
                    )
                    return Outcome(1, None)
                last_saved = chunk + 1
            live = seed_means[alive]
            progress.message(
                f"chunk {chunk + 1}/{trainer.num_chunks} · {format_count(trainer.env_steps(update))} steps each"
                + (
                    f" · eval IQM {stats.iqm(live):.1f} (min {live.min():.1f}, max {live.max():.1f})"
                    if live.size
                    else " · every member failed"
                )
                + _sets_text(record.get("eval_sets"), alive)
                + f" · {format_count(trainer.chunk_updates * trainer.steps_per_update * num_members / dt)} steps/s"
            )
            if not alive.any():
                log(
                    "error: every member has failed (non-finite values); nothing left to train; fix: lower algo.lr or algo.max_grad_norm"
                )
                return Outcome(1, None)
            last = chunk + 1 == trainer.num_chunks
            scripted = stop_after_chunks is not None and chunk + 1 - start_chunk >= stop_after_chunks
            if not last and (stopper.signum is not None or scripted):
                return _stop(log, stopper, job, last_saved, trainer.num_chunks, resume_cmd)
        heldout = None
        if heldout_settings:
            heldout = _heldout(trainer, env, carry.states, heldout_settings, log)
        if not primary:
            return Outcome(0, None)
        records = metrics_log.read()
        summary = summarize(
            job, trainer, env, records, compile_s, train_s_before + train_s, time.perf_counter() - t_start, heldout
        )
        summary["devices"] = layout.size if layout else 1
        # the XLA:CPU thread count the CLI set for this run (None: XLA's default)
        summary["cpu_threads"] = platform.AUTO_CPU_THREADS or None
        if profile_result is not None:
            summary["profile"] = profile_result
        block = summary["configs"][0]
        results = {k: block.get(k) for k in ("iqm", "mean", "solved_fraction")}
        for name, stats_of_set in (block.get("sets") or {}).items():  # eval.sets: final IQM and gap per set
            results[f"sets/{name}/iqm"] = stats_of_set.get("iqm")
            results[f"sets/{name}/gap"] = (block.get("generalization_gap") or {}).get(name, {}).get("gap")
        for writer in writers:
            writer.finish(_flat_config(job), results)
        return Outcome(0, summary)
    finally:
        progress.close()
        for writer in writers:
            writer.close()
        if checkpointer is not None:
            checkpointer.close()


def set_means(trainer: Any, sets: dict[str, Any], alive: Any) -> dict[str, Any]:
    """Each evaluation set's mean return per member ``[M]`` (NaN for failed
    members), in ``eval.sets`` order."""
    import numpy as np

    return {
        s.name: np.where(alive, np.asarray(sets[s.name].returns, np.float64).mean(axis=1), np.nan)
        for s in trainer.eval_sets
    }


def _sets_text(sets: dict[str, Any] | None, alive: Any) -> str:
    """`` · sets: nominal 81.2, test 40.3`` (IQM over the live members) for the progress line."""
    if not sets or not alive.any():
        return ""
    return " · sets: " + ", ".join(f"{name} {stats.iqm(values[alive]):.1f}" for name, values in sets.items())


def _fits(job: Job, check: Callable[[], None]) -> None:
    """Run a memory check; on a ConfigError, leave no run directory this job made."""
    try:
        check()
    except ConfigError:
        if job.created and is_primary():
            import shutil

            shutil.rmtree(job.run_dir, ignore_errors=True)
        raise


def _devices_text(layout: Any) -> str:
    import jax

    if layout is None:
        threads = platform.AUTO_CPU_THREADS
        return "1 device" + (f", {threads} CPU thread{'s' if threads > 1 else ''}" if threads else "")
    what = "members sharded" if layout.mode == "seeds" else "envs split"
    hosts = f" on {jax.process_count()} processes" if jax.process_count() > 1 else ""
    return f"{layout.size} devices{hosts}, {what}"


def _chunk_progress(updates: Any, update: int) -> Any:
    """A whole chunk's episode statistics as one progress report."""
    import numpy as np

    return Progress(
        np.int32(update),
        np.asarray(updates.episode_return_sum, np.float64).sum(axis=1),
        np.asarray(updates.episodes).sum(axis=1),
    )


def _profile(job: Job, trainer: Any, carry: Any, log: Callable[[str], None]) -> dict[str, Any]:
    """profile=true: the per-update time breakdown and its kernel summary
    (written to profile.json and printed; a few calls of the update are traced
    into ``RUN_DIR/profile/update``); the first chunk is traced into
    ``RUN_DIR/profile``."""

    log("profile: timing the parts of one update as separate programs …")
    trace_dir = os.path.join(job.run_dir, "profile")
    result = breakdown(trainer, carry.states, carry.hparams, kernel_trace_dir=os.path.join(trace_dir, "update"))
    result["trace_dir"] = trace_dir

    if is_primary():
        write_json(os.path.join(job.run_dir, "profile.json"), result)
    log(format_breakdown(result))
    log(f"profile: tracing the first chunk into {result['trace_dir']} (tensorboard --logdir, or Perfetto)")
    return result


def _flat_config(job: Job) -> dict[str, Any]:

    return flat(to_dict(dataclasses.replace(job.config, run_dir=None, resume=None)))


def _writers(job: Job, start_env_steps: int, algorithm: Any) -> list[Any]:
    """TensorBoard / W&B writers (``logger=``); one curve per member and
    declared metric of ``algorithm``."""

    if job.config.logger == "jsonl":
        return []
    multi = len(job.labels) > 1
    members = [
        (f"{job.labels[c].replace(' ', ',')}/seed_{s}" if multi else f"seed_{s}")
        for s, c in zip(job.seeds, job.config_index, strict=True)
    ]
    config = to_dict(dataclasses.replace(job.config, run_dir=job.run_dir, resume=None))
    return make_writers(
        job.config.logger,
        job.run_dir,
        members,
        config,
        job.config.wandb_project,
        start_env_steps or None,
        metrics=algorithm.metrics,
    )


def _heldout(trainer, env, states, settings: list[dict[str, float]], log) -> dict[str, Any]:
    """Evaluate the final policies under the training parameters and each setting."""
    import jax
    import numpy as np

    params = [env.default_params] + [with_params(env, **s) for s in settings]
    stacked = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *params)
    t0 = time.perf_counter()
    result = jax.jit(make_heldout(trainer), compiler_options=perf.compile_options(perf.of(trainer.config)))(
        states, stacked
    )

    returns = np.asarray(to_host(result.returns), np.float64).mean(axis=-1)  # [K, M]
    log(
        f"held-out evaluation: {len(settings)} settings × {returns.shape[1]} members in {time.perf_counter() - t0:.1f} s"
    )
    return {"settings": [{}] + settings, "returns": returns}


# ---------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------


def _setting_label(setting: dict[str, float]) -> str:
    return " ".join(f"{k}={v:g}" for k, v in setting.items()) or "training setting"


def summarize(job: Job, trainer, env, records, compile_s, train_s, wall_s, heldout) -> dict[str, Any]:
    """The run's summary: per configuration, the final deterministic returns of
    its members and their statistics (failed members excluded from the
    statistics and counted as unsolved)."""
    import jax
    import numpy as np

    evals = [r for r in records if r["type"] == "eval"]
    last = evals[-1]
    final = [None if v is None else float(v) for v in last["eval_return"]]
    failed_at = last.get("failed_at_update") or [0] * len(job.seeds)
    solved = env.solved_return
    configs = []
    for c, label in enumerate(job.labels):
        members = [i for i, ci in enumerate(job.config_index) if ci == c]
        values = [final[i] for i in members]
        alive = np.asarray([v for v in values if v is not None], np.float64)
        if alive.size:
            block = stats.summarize(alive, solved)
        else:
            block = {k: None for k in ("mean", "median", "iqm", "ci95", "std", "min", "max", "solved_fraction")}
        if solved is not None:
            block["solved_fraction"] = float(np.sum(alive >= solved)) / len(members)
        if "eval_sets" in last:
            block.update(set_blocks(last["eval_sets"], final, members, solved))
        hp = {k: float(np.asarray(v)[members[0]]) for k, v in dataclasses.asdict(job.hparams).items()}
        configs.append(
            {
                "label": label,
                "hparams": hp,
                "seeds": [job.seeds[i] for i in members],
                "final_eval_return": values,
                **block,
                "failed_seeds": [
                    {
                        "seed": job.seeds[i],
                        "update": int(failed_at[i]),
                        "env_steps": trainer.env_steps(int(failed_at[i])),
                    }
                    for i in members
                    if failed_at[i]
                ],
            }
        )
    total = trainer.total_env_steps
    summary: dict[str, Any] = {
        "env": env.name,
        "algo": job.config.algo.name,
        "total_timesteps": total,
        "solved_threshold": solved,
        "eval_episodes": job.config.eval.episodes,
        "configs": configs,
        "compile_time_s": compile_s,
        "train_time_s": train_s,
        "wall_time_s": wall_s,
        "env_steps_per_s": total * len(job.seeds) / train_s if train_s > 0 else None,
        "num_updates": trainer.num_updates,
        "num_chunks": trainer.num_chunks,
        "members": len(job.seeds),
        "run_dir": job.run_dir,
        "jaxrl_version": version(),
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
    }
    if heldout is not None:
        rows = []
        for k, setting in enumerate(heldout["settings"]):
            per_config = []
            for c, label in enumerate(job.labels):
                members = [i for i, ci in enumerate(job.config_index) if ci == c and final[i] is not None]
                values = heldout["returns"][k, members]
                block = stats.summarize(values, solved) if len(members) else {}
                per_config.append({"label": label, "returns": values.tolist(), **block})
            rows.append({"setting": setting, "label": _setting_label(setting), "configs": per_config})
        summary["heldout"] = rows
    if job.config.pbt.population:
        ranked = job.config.pbt.fitness
        values = last["eval_sets"][ranked] if ranked else final
        scores = [None if f is None else v for v, f in zip(values, final, strict=True)]
        summary["pbt"] = _pbt_summary(evals, scores, job.config.pbt.hparams, ranked)
    return summary


def set_blocks(
    sets: dict[str, list[float | None]], final: list[float | None], members: list[int], solved: float | None
) -> dict[str, Any]:
    """``{"sets": {name: statistics}, "generalization_gap": {name: {gap, ci95}}}``
    of one configuration's members: the final evaluation of every set, and each
    set's IQM minus the training distribution's (the run's own evaluation) with
    a paired bootstrap CI over seeds (failed members left out)."""
    import numpy as np

    live = [i for i in members if final[i] is not None]
    train = np.asarray([final[i] for i in live], np.float64)
    blocks: dict[str, Any] = {}
    gaps: dict[str, Any] = {}
    for name, values in sets.items():
        x = np.asarray([values[i] for i in live], np.float64)
        blocks[name] = {"returns": x.tolist(), **(stats.summarize(x, solved) if x.size else {})}
        if name != "train" and x.size:
            gaps[name] = stats.paired_difference(x, train)
    return {"sets": blocks, "generalization_gap": gaps}


def sets_table(summary: dict[str, Any]) -> str:
    """Text table of the evaluation sets: per set (and configuration) IQM
    [95% CI], mean, solved fraction and the gap to the training distribution."""
    configs = [c for c in summary.get("configs") or [summary] if c.get("sets")]
    if not configs:
        return ""
    multi = len(configs) > 1
    solved = summary.get("solved_threshold") is not None
    lines = ["evaluation sets (final policies, deterministic; gap: set IQM − train IQM, paired bootstrap over seeds):"]
    header = (
        f"  {'set':<12}" + (f" {'configuration':<28}" if multi else "") + f" {'IQM':>9}  {'95% CI':>19} {'mean':>9}"
    )
    header += ("  solved" if solved else "") + f"  {'gap':>9}  {'95% CI':>19}"
    lines.append(header)
    names = list(configs[0]["sets"])
    for name in names:
        for config in configs:
            block = config["sets"].get(name) or {}
            if block.get("iqm") is None:
                continue
            lo, hi = block["ci95"]
            line = f"  {name:<12}" + (f" {config.get('label', ''):<28}" if multi else "")
            line += f" {block['iqm']:>9.2f}  [{lo:>8.2f}, {hi:>8.2f}] {block['mean']:>9.2f}"
            if solved:
                line += f"  {block['solved_fraction'] * 100:5.0f}%"
            gap = config.get("generalization_gap", {}).get(name)
            if gap is not None:
                glo, ghi = gap["ci95"]
                line += f"  {gap['gap']:>+9.2f}  [{glo:>+8.2f}, {ghi:>+8.2f}]"
            lines.append(line)
    return "\n".join(lines)


def _pbt_summary(
    evals: list[dict[str, Any]], final: list[float | None], evolved: tuple[str, ...], fitness: str = ""
) -> dict[str, Any]:
    """The best member by ``final`` (its fitness: the run's evaluation, or the
    ``pbt.fitness`` set's) and its lineage's hyperparameters chunk by chunk."""
    import numpy as np

    scores = np.asarray([-np.inf if v is None else v for v in final])
    best = int(np.argmax(scores))
    parents = [list(map(int, r["parents"])) for r in evals[:-1]]
    slots = lineage(parents, best)
    trajectory = []
    for r, slot in zip(evals, slots, strict=True):
        trajectory.append(
            {
                "chunk": r["chunk"],
                "env_steps": r["env_steps"],
                "slot": slot,
                "eval_return": r["eval_return"][slot],
                **({"fitness": r["eval_sets"][fitness][slot]} if fitness else {}),
                "hparams": {k: r["hparams"][k][slot] for k in evolved},
            }
        )
    replaced = sum(int(np.sum(np.asarray(p) >= 0)) for p in parents)
    return {
        "best_member": best,
        "best_final_return": final[best],
        "fitness": fitness or "eval",
        "copies": replaced,
        "best_trajectory": trajectory,
    }


def heldout_table(summary: dict[str, Any]) -> str:
    """Text table: IQM [95% CI] and mean per held-out setting (and configuration)."""
    rows = summary.get("heldout") or []
    if not rows:
        return ""
    multi = len(rows[0]["configs"]) > 1
    lines = ["held-out evaluation (final policies, deterministic):"]
    header = (
        f"  {'setting':<28}" + (f" {'configuration':<28}" if multi else "") + f" {'IQM':>9}  {'95% CI':>19} {'mean':>9}"
    )
    if summary.get("solved_threshold") is not None:
        header += "  solved"
    lines.append(header)
    for row in rows:
        for block in row["configs"]:
            if block.get("iqm") is None:
                continue
            lo, hi = block["ci95"]
            line = f"  {row['label']:<28}" + (f" {block['label']:<28}" if multi else "")
            line += f" {block['iqm']:>9.2f}  [{lo:>8.2f}, {hi:>8.2f}] {block['mean']:>9.2f}"
            if block.get("solved_fraction") is not None:
                line += f"  {block['solved_fraction'] * 100:5.0f}%"
            lines.append(line)
    return "\n".join(lines)


def plot_run(run_dir: str, records: list[dict[str, Any]], title: str, solved: float | None) -> None:
    """``curves.png``: deterministic-eval and training returns, IQM ± CI over members."""
    import numpy as np

    evals = [r for r in records if r["type"] == "eval"]
    updates = [r for r in records if r["type"] == "update"]

    def to_array(rs, key):
        return np.asarray([[np.nan if v is None else v for v in r[key]] for r in rs], np.float64).T

    panels = [
        ("deterministic eval return", np.asarray([r["env_steps"] for r in evals]), to_array(evals, "eval_return"))
    ]
    source = updates or [r for r in evals if "episode_return" in r]
    if source:
        train = to_array(source, "episode_return")  # NaN where no episode ended
        for row in train:  # carry the last completed-episode return forward
            last = np.nan
            for i, v in enumerate(row):
                last = v if np.isfinite(v) else last
                row[i] = last
        panels.append(("training episode return", np.asarray([r["env_steps"] for r in source]), train))
    if evals and "eval_sets" in evals[-1]:
        panels.append(
            (
                "eval return by evaluation set",
                np.asarray([r["env_steps"] for r in evals]),
                {
                    name: np.asarray([[np.nan if v is None else v for v in r["eval_sets"][name]] for r in evals]).T
                    for name in evals[-1]["eval_sets"]
                },
            )
        )
    stats.plot_curves(os.path.join(run_dir, "curves.png"), panels, title=title, solved_return=solved)
