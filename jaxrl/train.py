"""``python -m jaxrl.train env=NAME [algo=ppo] [seeds=N] [key=value ...]``

Trains one algorithm on one environment over many seeds in one compiled
program, then prints a robustness table. The run directory (printed at start
and end) holds ``config.yaml``, ``metrics.jsonl``, ``summary.json``,
``curves.png`` and orbax checkpoints; ``resume=<run_dir>`` continues a stopped
run with the same numbers an uninterrupted run gives.

Exit codes: 0 done, 2 bad input (one line on stderr), 130/143 stopped by
SIGINT/SIGTERM after writing a checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from typing import Any

from jaxrl import _platform

_platform.configure()  # XLA/CPU settings must precede jax's backend start

from jaxrl.config import Config, ConfigError, parse, seed_ids, to_dict, validate  # noqa: E402

__all__ = ["main", "run", "resolve"]

# Overrides that may accompany resume= (they do not change the numbers).
RESUME_OK = {"progress", "plots", "keep", "checkpoint", "resume"}

USAGE = """usage: python -m jaxrl.train env=NAME [algo=ppo] [seeds=N] [key=value ...]

  env=cartpole            short name (cartpole, acrobot, mountaincar, pendulum,
                          mountaincar-continuous) or any gymnax id (Breakout-MinAtar)
  seeds=16 | seeds=[0,5]  number of seeds (ids seed..seed+N-1) or explicit ids
  num_envs=4 total_timesteps=5e5 num_evals=20 eval_episodes=16
  algo.lr=2.5e-4 algo.num_steps=128 algo.update_epochs=4 algo.num_minibatches=4
  algo.gamma=0.99 algo.gae_lambda=0.95 algo.clip_eps=0.2 algo.ent_coef=0.01
  algo.vf_coef=0.5 algo.max_grad_norm=0.5 algo.lr_schedule=linear|constant|adaptive
  algo.hidden_sizes=[64,64] algo.activation=tanh algo.normalize_obs=false
  run_dir=PATH resume=RUN_DIR progress=true plots=true keep=2

Per-env presets apply first; your overrides win. Defaults: see jaxrl/config.py.
"""


class _StopRequest:
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


def _load_run_config(run_dir: str) -> Config:
    import yaml

    from jaxrl.config import from_dict

    path = os.path.join(run_dir, "config.yaml")
    if not os.path.isdir(run_dir):
        raise ConfigError(
            "resume", run_dir, "directory does not exist", "pass the run directory printed at the start of a run"
        )
    if not os.path.isfile(path):
        raise ConfigError(
            "resume",
            run_dir,
            "is not a run directory (no config.yaml)",
            "pass the run directory printed at the start of a run",
        )
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
        if not isinstance(data, dict):
            raise ValueError("not a mapping")
        config = from_dict(data)
    except ConfigError as error:
        raise ConfigError("resume", run_dir, f"config.yaml is invalid ({error})", "start a new run") from None
    except Exception as error:
        raise ConfigError(
            "resume", run_dir, f"config.yaml is corrupt ({type(error).__name__})", "start a new run"
        ) from None
    return config


def resolve(argv: list[str]) -> Config:
    """Overrides → validated Config (for ``resume=`` the run's own config)."""
    overrides = [a for a in argv if a.strip()]
    resume = None
    for item in overrides:
        key, _, value = item.partition("=")
        if key.strip() == "resume" and value not in ("", "null", "None"):
            resume = value
    if resume is None:
        return validate(parse(overrides))
    resume = os.path.abspath(os.path.expanduser(resume))
    config = _load_run_config(resume)
    changes: dict[str, Any] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in RESUME_OK:
            raise ConfigError(
                key, value, "cannot be changed when resuming (it would change the run)", "drop it, or start a new run"
            )
        if key != "resume":
            parsed = parse([item])
            changes[key] = getattr(parsed, key)
    config = dataclasses.replace(config, run_dir=resume, resume=resume, **changes)
    return validate(config)


def _new_run_dir(config: Config) -> str:
    if config.run_dir:
        path = os.path.abspath(os.path.expanduser(config.run_dir))
        if os.path.exists(path) and os.listdir(path):
            raise ConfigError(
                "run_dir",
                config.run_dir,
                "already exists and is not empty",
                f"pick a new run_dir, or continue it with resume={config.run_dir}",
            )
        return path
    from jaxrl.envs import canonical_name

    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(config.runs_root, f"{canonical_name(config.env)}-{config.algo.name}-{stamp}")
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    return os.path.abspath(path)


def _write_config(path: str, config: Config) -> None:
    import yaml

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(to_dict(config), f, sort_keys=False)
    os.replace(tmp, path)


def _update_records(metrics: Any, chunk: int, first_update: int, steps_per_update: int) -> list[dict[str, Any]]:
    """One JSON record per update, every field a per-seed list."""
    import numpy as np

    fields = metrics._asdict()
    episodes = np.asarray(fields["episodes"])  # [S, U]
    num_updates = episodes.shape[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        ep_return = np.where(episodes > 0, np.asarray(fields["episode_return_sum"]) / episodes, np.nan)
        ep_length = np.where(episodes > 0, np.asarray(fields["episode_length_sum"]) / episodes, np.nan)
    skip = {"episode_return_sum", "episode_length_sum", "episodes"}
    records = []
    for u in range(num_updates):
        update = first_update + u + 1
        record = {
            "type": "update",
            "chunk": chunk,
            "update": update,
            "env_steps": update * steps_per_update,
            "episode_return": ep_return[:, u],
            "episode_length": ep_length[:, u],
            "episodes": episodes[:, u],
        }
        for name, value in fields.items():
            if name not in skip:
                record[name] = np.asarray(value)[:, u]
        records.append(record)
    return records


def run(config: Config, stop_after_chunks: int | None = None, log=None, stopper: _StopRequest | None = None) -> int:
    """Train ``config`` (validated), writing its run directory. Returns an exit code.

    ``stop_after_chunks`` stops (with a checkpoint, like SIGINT) after that many
    chunks of this invocation — for tests and scripted preemption.
    """
    if config.deterministic:
        _platform.request_deterministic()
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    t_start = time.perf_counter()
    own = stopper is None
    if own:
        stopper = _StopRequest()
        stopper.install()
    try:
        return _run(config, stop_after_chunks, log, stopper, t_start)
    finally:
        if own:
            stopper.restore()


def _run(config: Config, stop_after_chunks: int | None, log, stopper: _StopRequest, t_start: float) -> int:
    import jax
    import numpy as np

    from jaxrl import envs as envs_lib
    from jaxrl import stats
    from jaxrl.checkpoint import Checkpointer, config_hash
    from jaxrl.logs import JsonlWriter, LiveProgress, format_count
    from jaxrl.loop import make_batched, make_train, seed_keys

    resuming = config.resume is not None
    run_dir = config.run_dir if resuming else _new_run_dir(config)
    try:
        env = envs_lib.make(config.env)
    except Exception as error:  # e.g. an env that needs a download
        raise ConfigError(
            "env",
            config.env,
            f"could not be built ({str(error).splitlines()[0][:120]})",
            "pick another env from jaxrl.envs.names()",
        ) from None
    trainer = make_train(config, env)
    ids = seed_ids(config)
    keys = seed_keys(config)
    hp = trainer.hparams
    chash = config_hash(to_dict(dataclasses.replace(config, run_dir=run_dir, resume=None)))

    progress = LiveProgress(trainer.num_updates, trainer.steps_per_update, len(ids), enabled=config.progress)
    init_b, chunk_b = make_batched(trainer, progress=progress if config.progress else None)
    abstract = jax.eval_shape(init_b, keys, hp)

    checkpointer = None
    metrics_log = JsonlWriter(os.path.join(run_dir, "metrics.jsonl"))
    start_chunk, train_s_before, states = 0, 0.0, None
    if resuming:  # check the checkpoint before printing or compiling anything
        checkpointer = Checkpointer(run_dir, keep=config.keep)
        states, meta = checkpointer.restore(abstract)
        if meta.get("config_hash") != chash:
            raise ConfigError("resume", run_dir, "checkpoint was written by a different config", "start a new run")
        start_chunk = int(meta["chunk"])
        train_s_before = float(meta.get("train_time_s", 0.0))
    else:
        os.makedirs(run_dir, exist_ok=True)
        _write_config(os.path.join(run_dir, "config.yaml"), dataclasses.replace(config, run_dir=run_dir))
        if config.checkpoint:
            checkpointer = Checkpointer(run_dir, keep=config.keep)
    log(f"run directory: {run_dir}")
    log(
        f"{env.name} · {config.algo.name} · {len(ids)} seeds × {config.num_envs} envs · "
        f"{format_count(trainer.total_env_steps)} steps/seed in {trainer.num_chunks} chunks of {trainer.chunk_updates} updates"
        f" · {jax.default_backend()} ({jax.device_count()} device)"
    )
    if resuming:
        metrics_log.truncate(lambda r: int(r.get("chunk", 0)) < start_chunk)
        log(f"resuming after chunk {start_chunk}/{trainer.num_chunks}")

    t0 = time.perf_counter()
    init_c = jax.jit(init_b).lower(keys, hp).compile() if states is None else None
    chunk_c = jax.jit(chunk_b, donate_argnums=0).lower(abstract, hp).compile()
    compile_s = time.perf_counter() - t0
    if states is None:
        states = init_c(keys, hp)
    log(f"compiled in {compile_s:.1f} s")

    progress.update = start_chunk * trainer.chunk_updates
    failed_at = np.asarray(jax.device_get(states.failed_at))
    train_s, chunk, last_saved = 0.0, start_chunk - 1, start_chunk
    try:
        if stopper.signum is not None:
            return _stop_message(log, stopper, run_dir, last_saved, trainer.num_chunks, not resuming)
        for chunk in range(start_chunk, trainer.num_chunks):
            t_chunk = time.perf_counter()
            states, metrics = chunk_c(states, hp)
            metrics = jax.device_get(metrics)
            dt = time.perf_counter() - t_chunk
            train_s += dt
            first = chunk * trainer.chunk_updates
            update = first + trainer.chunk_updates
            records = _update_records(metrics.updates, chunk, first, trainer.steps_per_update)
            now_failed = np.asarray(jax.device_get(states.failed_at))
            alive = now_failed == 0
            eval_returns = np.asarray(metrics.eval.returns, np.float64)  # [S, E]
            seed_means = np.where(alive, eval_returns.mean(axis=1), np.nan)
            records.append(
                {
                    "type": "eval",
                    "chunk": chunk,
                    "update": update,
                    "env_steps": update * trainer.steps_per_update,
                    "eval_return": seed_means,
                    "eval_return_std": np.where(alive, eval_returns.std(axis=1), np.nan),
                    "eval_length": np.asarray(metrics.eval.lengths).mean(axis=1),
                    "failed_at_update": now_failed,
                    "chunk_time_s": dt,
                    "env_steps_per_s": trainer.chunk_updates * trainer.steps_per_update * len(ids) / dt,
                }
            )
            metrics_log.write(records)
            new_failures = [(ids[i], int(now_failed[i])) for i in np.flatnonzero((failed_at == 0) & ~alive)]
            failed_at = now_failed
            for seed, bad_update in new_failures:
                steps_lo = (bad_update - 1) * trainer.steps_per_update + 1
                steps_hi = bad_update * trainer.steps_per_update
                where = f"seed {seed}: non-finite loss, gradients or parameters at update {bad_update} (env steps {steps_lo}–{steps_hi} of that seed)"
                if config.on_nan == "stop":
                    saved = (
                        f"the last good checkpoint (after chunk {last_saved}) is kept"
                        if last_saved
                        else "no checkpoint was written"
                    )
                    log(
                        f"error: {where}; {saved}; fix: lower algo.lr or algo.max_grad_norm, or pass on_nan=drop to carry on without failed seeds"
                    )
                    return 1
                progress.message(f"warning: {where}; on_nan=drop: seed {seed} is marked failed, the others go on")
            if checkpointer is not None:
                error = _save(checkpointer, chunk + 1, states, chash, update, trainer, train_s_before + train_s)
                if error:
                    saved = (
                        f"the last good checkpoint (after chunk {last_saved}) is kept"
                        if last_saved
                        else "no checkpoint was written"
                    )
                    log(
                        f"error: checkpoint after chunk {chunk + 1} could not be written ({error}); {saved}; fix: free disk space, then resume={run_dir}"
                    )
                    return 1
                last_saved = chunk + 1
            live_means = seed_means[alive]
            progress.message(
                f"chunk {chunk + 1}/{trainer.num_chunks} · {format_count(update * trainer.steps_per_update)} steps/seed"
                + (
                    f" · eval IQM {stats.iqm(live_means):.1f} (min {live_means.min():.1f}, max {live_means.max():.1f})"
                    if live_means.size
                    else " · every seed failed"
                )
                + f" · {format_count(trainer.chunk_updates * trainer.steps_per_update * len(ids) / dt)} steps/s"
            )
            if not alive.any():
                log(
                    "error: every seed has failed (non-finite values); nothing left to train; fix: lower algo.lr or algo.max_grad_norm"
                )
                return 1
            last = chunk + 1 == trainer.num_chunks
            scripted_stop = stop_after_chunks is not None and chunk + 1 - start_chunk >= stop_after_chunks
            if not last and (stopper.signum is not None or scripted_stop):
                return _stop_message(log, stopper, run_dir, last_saved, trainer.num_chunks, not resuming)
    finally:
        progress.close()
        if checkpointer is not None:
            checkpointer.close()

    summary = _summarize(
        config,
        trainer,
        ids,
        metrics_log.read(),
        run_dir,
        compile_s,
        train_s_before + train_s,
        time.perf_counter() - t_start,
    )
    _write_json(os.path.join(run_dir, "summary.json"), summary)
    if config.plots:
        _plot(run_dir, metrics_log.read(), env.name, config.algo.name, env.solved_return)
    finals = [r if r is not None else float("nan") for r in summary["final_eval_return"]]
    table = stats.robustness_table(
        ids,
        finals,
        summary,
        solved_return=env.solved_return,
        title=f"{env.name} · {config.algo.name} · final deterministic evaluation ({config.eval_episodes} episodes per seed)",
    )
    print(table, flush=True)
    log(
        f"compile {compile_s:.1f} s · train {summary['train_time_s']:.1f} s · "
        f"{format_count(summary['env_steps_per_s'])} env steps/s · wall {summary['wall_time_s']:.1f} s"
    )
    log(f"run directory: {run_dir}")
    return 0


def _stop_message(log, stopper: _StopRequest, run_dir: str, last_saved: int, num_chunks: int, created: bool) -> int:
    if last_saved:
        log(f"stopped after chunk {last_saved}/{num_chunks}; checkpoint saved")
        log(f"continue with: python -m jaxrl.train resume={run_dir}")
    else:
        if created:  # nothing worth keeping: leave no half-made run directory behind
            import shutil

            shutil.rmtree(run_dir, ignore_errors=True)
        log("stopped before the first chunk finished; nothing was saved (start again to train)")
    return stopper.exit_code if stopper.signum is not None else 0


def _save(checkpointer, chunk: int, states, chash: str, update: int, trainer, train_s: float) -> str | None:
    """Write a checkpoint; return None, or a short reason when the write failed."""
    import errno

    meta = {
        "chunk": chunk,
        "update": update,
        "env_steps": update * trainer.steps_per_update,
        "config_hash": chash,
        "train_time_s": train_s,
        "jaxrl_version": _version(),
    }
    try:
        checkpointer.save(chunk, states, meta)
    except Exception as error:  # orbax wraps OS errors in its own types
        cause: BaseException | None = error
        while cause is not None:
            if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
                return "no space left on device"
            cause = cause.__cause__ or cause.__context__
        text = str(error).strip().splitlines()
        return f"{type(error).__name__}: {text[0][:160]}" if text else type(error).__name__
    return None


def _version() -> str:
    from jaxrl import __version__

    return __version__


def _summarize(config, trainer, ids, records, run_dir, compile_s, train_s, wall_s) -> dict[str, Any]:
    import jax
    import numpy as np

    from jaxrl import stats

    evals = [r for r in records if r["type"] == "eval"]
    last = evals[-1]
    final = [None if v is None else float(v) for v in last["eval_return"]]
    failed_at = last.get("failed_at_update") or [0] * len(ids)
    alive = np.asarray([v for v in final if v is not None], np.float64)
    solved = trainer.env.solved_return
    summary_stats: dict[str, Any]
    if alive.size:
        summary_stats = stats.summarize(alive, solved)
    else:
        summary_stats = {k: None for k in ("mean", "median", "iqm", "ci95", "std", "min", "max", "solved_fraction")}
    if solved is not None:  # failed seeds count as not solved
        summary_stats["solved_fraction"] = float(np.sum(alive >= solved)) / len(ids)
    total_steps = trainer.total_env_steps
    return {
        "env": trainer.env.name,
        "algo": config.algo.name,
        "seeds": list(ids),
        "total_timesteps": total_steps,
        "final_eval_return": final,
        **summary_stats,
        "solved_threshold": solved,
        "failed_seeds": [
            {"seed": s, "update": int(u), "env_steps": int(u) * trainer.steps_per_update}
            for s, u in zip(ids, failed_at, strict=True)
            if u
        ],
        "eval_episodes": config.eval_episodes,
        "compile_time_s": compile_s,
        "train_time_s": train_s,
        "wall_time_s": wall_s,
        "env_steps_per_s": total_steps * len(ids) / train_s if train_s > 0 else None,
        "num_updates": trainer.num_updates,
        "num_chunks": trainer.num_chunks,
        "run_dir": run_dir,
        "jaxrl_version": _version(),
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
    }


def _write_json(path: str, data: dict[str, Any]) -> None:
    from jaxrl.logs import jsonable

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(jsonable(data), f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def _plot(run_dir: str, records: list[dict[str, Any]], env_name: str, algo: str, solved: float | None) -> None:
    import numpy as np

    from jaxrl import stats

    evals = [r for r in records if r["type"] == "eval"]
    updates = [r for r in records if r["type"] == "update"]
    to_array = lambda rs, key: np.asarray([[np.nan if v is None else v for v in r[key]] for r in rs], np.float64).T  # noqa: E731
    panels = [
        ("deterministic eval return", np.asarray([r["env_steps"] for r in evals]), to_array(evals, "eval_return"))
    ]
    if updates:
        train = to_array(updates, "episode_return")  # [S, U], NaN where no episode ended
        for row in train:  # carry the last completed-episode return forward
            last = np.nan
            for i, v in enumerate(row):
                last = v if np.isfinite(v) else last
                row[i] = last
        panels.append(("training episode return", np.asarray([r["env_steps"] for r in updates]), train))
    stats.plot_curves(os.path.join(run_dir, "curves.png"), panels, title=f"{env_name} · {algo}", solved_return=solved)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    stopper = _StopRequest()  # from the start: Ctrl-C while compiling also exits cleanly
    stopper.install()
    try:
        config = resolve(argv)
        return run(config, stopper=stopper)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        stopper.restore()


if __name__ == "__main__":
    sys.exit(main())
