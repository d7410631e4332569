"""``python -m jaxrl.sweep env=NAME seeds=N KEY=v1,v2,… [KEY=…] [sweep.samples=K]``

Robustness sweeps: every combination of the swept *traced* hyperparameters ×
every seed runs in ONE compiled program (the hyperparameter pytree and the
seed axis are vmapped together). Swept *static* settings (shapes, counts,
flags: ``num_envs``, ``algo.hidden_sizes``, …) split the sweep into groups,
one compiled program each, run one after another.

Sweep syntax is hydra's: ``algo.lr=3e-4,1e-3`` or ``choice(…)``/``range(…)``
for a grid; ``interval(a,b)`` and ``tag(log,interval(a,b))`` with
``sweep.samples=K`` for random search (K configurations; choices are drawn
uniformly, intervals uniformly or log-uniformly). Every configuration runs the
same seed ids (common random numbers).

Writes a sweep directory (``sweep.json``, one run directory per group, and the
report of :mod:`jaxrl.report`) and prints the report. ``resume=SWEEP_DIR``
finishes an interrupted sweep; ``groups=G,…`` with it runs only those groups.

``launcher=submitit_slurm|submitit_local|ray`` sends each group (a chunk of
``sweep.max_members`` members when one group is too large) as its own job;
:func:`run_on_ray` does the same from Python on a Ray cluster.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from jaxrl.perf import platform  # noqa: I001  (first: it settles the process before jax loads)

if __name__ == "__main__":  # python -m jaxrl.sweep: XLA's log level and flags before jaxlib loads
    platform.configure()

from jaxrl.core.errors import ConfigError  # noqa: E402
from jaxrl.run import sweeping  # noqa: E402
from jaxrl.run.signals import StopRequest  # noqa: E402

__all__ = ["USAGE", "main", "run_on_ray"]

USAGE = """usage: python -m jaxrl.sweep env=NAME seeds=N KEY=v1,v2,… [KEY=…] [sweep.samples=K] [key=value …]
       python -m jaxrl.sweep resume=SWEEP_DIR

  grid:           algo.lr=3e-4,1e-3,3e-3 algo.ent_coef=0,0.01   (or choice(…), range(a,b,step))
  random search:  sweep.samples=64 algo.lr='tag(log,interval(1e-4,1e-2))' algo.ent_coef='interval(0,0.02)'
  static keys (num_envs, algo.num_steps, algo.hidden_sizes, …) may be swept too:
  each distinct static setting is its own compiled program.
  sweep.max_members=M     split a group into programs of at most M members (configurations × seeds)

  launcher=local          every group in this process, one after another (default)
  launcher=submitit_slurm one SLURM job per group: launcher.partition=… launcher.gpus_per_job=1
                          launcher.timeout_min=60 launcher.cpus_per_job=… launcher.mem_gb=…
                          launcher.account=… launcher.qos=… launcher.constraint=…
                          launcher.slurm_args="exclusive=true" launcher.setup="module load cuda"
  launcher=submitit_local one local subprocess per group (submitit's local executor)
  launcher=ray            one Ray task per group: launcher.address=auto (join a cluster; "": start one)
                          launcher.cpus_per_job=1 launcher.gpus_per_job=1
  launcher.parallel=N     at most N jobs at once (0: all)    launcher.folder=DIR  submitit's files
  hydra/launcher=NAME and hydra.launcher.KEY=VALUE are read as launcher=NAME, launcher.KEY=VALUE.
  resume=SWEEP_DIR [groups=0,3] [launcher=…]   re-launch only the unfinished (or the listed) groups
"""


def run_on_ray(
    overrides: list[str],
    *,
    address: str = "",
    cpus_per_job: int = 1,
    gpus_per_job: int = 0,
    parallel: int = 0,
) -> dict[str, Any]:
    """Run the sweep of ``overrides`` (the CLI's, e.g. ``["env=cartpole",
    "seeds=8", "algo.num_envs=4,8"]``) with one Ray task per static group.

    ``address``: ``""`` uses the Ray runtime this process has initialised, or
    starts a local one; ``"auto"`` or ``"ray://HOST:PORT"`` joins a cluster,
    whose workers must see the sweep directory (shared storage). Returns
    ``{"sweep_dir": …, "report": …}`` with the report of :mod:`jaxrl.report`;
    raises :class:`~jaxrl.core.errors.ConfigError` for bad input and
    ``RuntimeError`` naming the groups that failed.
    """
    settings = [f"launcher.cpus_per_job={cpus_per_job}", f"launcher.gpus_per_job={gpus_per_job}"]
    settings += [f"launcher.parallel={parallel}"] + ([f"launcher.address={address}"] if address else [])
    out: dict[str, Any] = {}
    code = sweeping.run([*overrides, "launcher=ray", *settings], out=out)
    if code != 0:
        failed = [f"group {f.group}: {f.reason} (log: {f.log})" for f in out.get("failures", [])]
        raise RuntimeError("; ".join(failed) or f"the sweep stopped (exit {code})")
    with open(os.path.join(out["sweep_dir"], "report.json")) as f:
        return {"sweep_dir": out["sweep_dir"], "report": json.load(f)}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        return 0
    stopper = StopRequest()
    stopper.install()
    try:
        platform.configure()  # process settings, before jax starts its backend
        platform.quiet_libraries()
        platform.check_environment()
        devices = platform.split_cpu_devices()  # before jax starts its backend
        return sweeping.run(argv, stopper=stopper, process=platform.process_settings(devices))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        stopper.restore()


if __name__ == "__main__":
    sys.exit(main())
