"""What a launcher costs: one sweep of ``--groups`` static groups, run in one
process (``launcher=local``) and as one job per group (``submitit_local``,
``ray``), end to end as a user runs it (wall seconds of the CLI, cold
compilation cache each time), with the ratio to the one-process sweep and a
check that every launcher gives the same report.

    python experiments/bench/launchers.py [--groups 2] [--seeds 8] [--timesteps 50000]

On one machine the jobs of ``submitit_local`` and ``ray`` run at once, so the
ratio mixes the engine's overhead (process starts, imports, the Ray runtime)
with what running the groups side by side gains or loses on the cores there are.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

LAUNCHERS = ("local", "submitit_local", "ray")


def sweep(launcher: str, groups: int, seeds: int, timesteps: int, root: str) -> tuple[float, dict]:
    envs = ",".join(str(4 * 2**g) for g in range(groups))
    run_dir = os.path.join(root, launcher)
    argv = [
        sys.executable,
        "-m",
        "jaxrl.sweep",
        "env=cartpole",
        f"seeds={seeds}",
        f"num_envs={envs}",
        "algo.lr=1e-3,3e-3",
        f"total_timesteps={timesteps}",
        "num_evals=2",
        "plots=false",
        f"run_dir={run_dir}",
        f"launcher={launcher}",
    ]
    env = {**os.environ, "JAXRL_COMPILE_CACHE": os.path.join(root, f"cache-{launcher}")}
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{launcher}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    with open(os.path.join(run_dir, "report.json")) as f:
        report = json.load(f)
    for row in report["rows"]:
        row.pop("source", None)
    return wall, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--timesteps", type=int, default=50_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as root:
        results = {name: sweep(name, args.groups, args.seeds, args.timesteps, root) for name in LAUNCHERS}
    base_wall, base_report = results["local"]
    print(f"{args.groups} groups × 2 configurations × {args.seeds} seeds, {args.timesteps:,} steps each")
    print(f"{'launcher':>16} {'wall s':>8} {'vs local':>9}  same report")
    for name, (wall, report) in results.items():
        print(f"{name:>16} {wall:8.1f} {wall / base_wall:8.2f}×  {report == base_report}")


if __name__ == "__main__":
    main()
