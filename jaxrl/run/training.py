"""The training job behind ``python -m jaxrl.train``: a resolved config
(:func:`jaxrl.run.overrides.resolve`) prepared once into a
:class:`~jaxrl.run.spec.RunSpec`, its run directory written, the chunk loop
run, the robustness table printed. Exit codes: 0 done, 2 bad input, 130/143
stopped after a checkpoint.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from jaxrl.core.config import Config, seed_ids
from jaxrl.core.errors import make_dir
from jaxrl.envs.host import is_host
from jaxrl.perf import platform
from jaxrl.perf.platform import Process
from jaxrl.run import parallel, stats, summary
from jaxrl.run.host import run_host
from jaxrl.run.io import write_json
from jaxrl.run.logs import format_count
from jaxrl.run.loop import execute
from jaxrl.run.rundir import new_run_dir, shared_run_dir, write_config
from jaxrl.run.signals import StopRequest
from jaxrl.run.spec import RunSpec, prepare

__all__ = ["run", "cpu_job", "print_results"]


def run(
    config: Config,
    process: Process | None = None,
    stop_after_chunks: int | None = None,
    log: Callable[[str], None] | None = None,
    stopper: StopRequest | None = None,
) -> int:
    """Train ``config`` (validated), writing its run directory. Returns an exit code.

    ``process``: what the CLI set up (default: :func:`jaxrl.perf.platform.process_settings`).
    ``stop_after_chunks`` stops (with a checkpoint, like SIGINT) after that many
    chunks of this invocation — for tests and scripted preemption.
    """
    if config.deterministic:
        platform.request_deterministic()
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    own = stopper is None
    if own:
        stopper = StopRequest()
        stopper.install()
    try:
        if is_host(config.env.name):  # a world outside JAX: the actor–learner pipeline
            return run_host(config, log, stopper, stop_after_chunks=stop_after_chunks)
        multi = parallel.start_distributed(config)
        resuming = config.resume is not None
        run_dir = config.run_dir if resuming else (shared_run_dir(config) if multi else new_run_dir(config))
        spec = prepare(config, run_dir, process=process or platform.process_settings(), resuming=resuming)
        if not resuming and parallel.is_primary():  # nothing was written before here
            make_dir("run_dir" if config.run_dir else "runs_root", run_dir)
            write_config(os.path.join(run_dir, "config.yaml"), spec.config)
        outcome = execute(spec, stop_after_chunks=stop_after_chunks, log=log, stopper=stopper)
        if outcome.summary is None:
            return outcome.code
        result = summary.flat_summary(outcome.summary)
        write_json(os.path.join(run_dir, "summary.json"), result)
        if config.plots:
            summary.plot_run(run_dir, outcome.records, f"{spec.env.name} · {config.algo.name}", spec.env.solved_return)
        print_results(spec, result, log)
        return 0
    finally:
        if own:
            stopper.restore()


def print_results(spec: RunSpec, result: dict[str, Any], log: Callable[[str], None]) -> None:
    """The robustness table (and the PBT lineage, held-out and evaluation-set
    tables when there are any) on stdout; the timings and run directory on ``log``."""
    config, env = spec.config, spec.env
    finals = [float("nan") if r is None else r for r in result["final_eval_return"]]
    what = "PBT population" if config.pbt.population else "final deterministic evaluation"
    print(
        stats.robustness_table(
            result["seeds"],
            finals,
            result,
            solved_return=env.solved_return,
            title=f"{env.name} · {config.algo.name} · {what} ({config.eval.episodes} episodes per seed)",
        ),
        flush=True,
    )
    if "pbt" in result:
        print(summary.pbt_text(result["pbt"]), flush=True)
    if "heldout" in result:
        print(summary.heldout_table(result), flush=True)
    if result.get("sets"):
        print(summary.sets_table(result), flush=True)
    count = "?" if result["env_steps_per_s"] is None else format_count(result["env_steps_per_s"])
    log(
        f"compile {result['compile_time_s']:.1f} s · train {result['train_time_s']:.1f} s · "
        f"{count} env steps/s · wall {result['wall_time_s']:.1f} s"
    )
    log(f"run directory: {spec.run_dir}")


def cpu_job(config: Config) -> tuple[int, int, bool]:
    """(members, envs per member, runs on one device) for ``platform.size_cpu_pool``."""
    members = config.pbt.population or len(seed_ids(config))
    distributed = config.dist.auto or config.dist.num_processes > 1 or bool(config.dist.coordinator)
    one_device = config.parallel == "seeds" and config.devices <= 1 and not distributed
    return members, config.num_envs, one_device
