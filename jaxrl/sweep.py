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
finishes an interrupted sweep.
"""

from __future__ import annotations

import sys

from jaxrl.core.errors import ConfigError
from jaxrl.perf import platform
from jaxrl.run import sweeping
from jaxrl.run.driver import StopRequest

__all__ = ["USAGE", "main"]

USAGE = """usage: python -m jaxrl.sweep env=NAME seeds=N KEY=v1,v2,… [KEY=…] [sweep.samples=K] [key=value …]
       python -m jaxrl.sweep resume=SWEEP_DIR

  grid:           algo.lr=3e-4,1e-3,3e-3 algo.ent_coef=0,0.01   (or choice(…), range(a,b,step))
  random search:  sweep.samples=64 algo.lr='tag(log,interval(1e-4,1e-2))' algo.ent_coef='interval(0,0.02)'
  static keys (num_envs, algo.num_steps, algo.hidden_sizes, …) may be swept too:
  each distinct static setting is its own compiled program.
"""


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
        platform.split_cpu_devices()  # before jax starts its backend
        return sweeping.run(argv, stopper=stopper)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        stopper.restore()


if __name__ == "__main__":
    sys.exit(main())
