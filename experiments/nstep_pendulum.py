"""n-step returns for TD3 and SAC on Pendulum: return and cost of ``algo.n_step``.

Runs the TD3 and SAC Pendulum presets through the CLI (its default layout), with
``algo.n_step=1`` and ``algo.n_step=3``, one run after the other, and prints per run
the final evaluation's IQM with its 95 % bootstrap CI, the slowest seed, the run's
wall and compile seconds (docs/distributional.md, experiments/PERFORMANCE_LOG.md):

    python experiments/nstep_pendulum.py [--seeds 8] [--steps 12000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def run(algo: str, n_step: int, seeds: int, steps: int, root: Path) -> dict:
    run_dir = root / f"{algo}-n{n_step}"
    args = ["env=pendulum", f"algo={algo}", f"seeds={seeds}", f"algo.n_step={n_step}", f"total_timesteps={steps}"]
    args += ["num_evals=4", "eval.episodes=8", "plots=false", "checkpoint=false", f"run_dir={run_dir}"]
    proc = subprocess.run([sys.executable, "-m", "jaxrl.train", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr.strip().splitlines()[-1], file=sys.stderr)
        sys.exit(proc.returncode)
    return json.loads((run_dir / "summary.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=12000)
    opts = parser.parse_args()
    if opts.seeds < 1 or opts.steps < 1:
        print(
            f"error: --seeds={opts.seeds} --steps={opts.steps}: must be ≥ 1; fix: pass positive counts", file=sys.stderr
        )
        sys.exit(2)
    with tempfile.TemporaryDirectory() as tmp:
        for algo in ("td3", "sac"):
            for n_step in (1, 3):
                s = run(algo, n_step, opts.seeds, opts.steps, Path(tmp))
                lo, hi = s["ci95"]
                print(
                    f"{algo} n_step={n_step}: IQM {s['iqm']:.1f} [{lo:.1f}, {hi:.1f}], "
                    f"slowest seed {min(s['final_eval_return']):.1f}, "
                    f"wall {s['wall_time_s']:.1f} s, compile {s['compile_time_s']:.1f} s"
                )


if __name__ == "__main__":
    main()
