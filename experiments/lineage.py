"""REINFORCE → A2C → PPO on CartPole: each CLI preset over the same seeds.

    python experiments/lineage.py [--seeds 48] [--out experiments/results/lineage.json]

One ``python -m jaxrl.train env=cartpole algo=NAME seeds=N`` per algorithm
(fresh processes, the CLI's default layout); prints and saves, per algorithm,
the env steps per seed, how many seeds are solved (deterministic evaluation
≥ 475), the IQM with its bootstrap CI, and compile / train seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ALGOS = ("reinforce", "a2c", "ppo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=48)
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS))
    parser.add_argument("--out", default="experiments/results/lineage.json")
    args = parser.parse_args()
    if args.seeds < 1:
        sys.exit("lineage.py: --seeds must be ≥ 1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.algos:
            run_dir = os.path.join(tmp, name)
            argv = ["env=cartpole", f"algo={name}", f"seeds={args.seeds}", "progress=false", f"run_dir={run_dir}"]
            proc = subprocess.run([sys.executable, "-m", "jaxrl.train", *argv], capture_output=True, text=True)
            if proc.returncode:
                sys.exit(f"lineage.py: {name} failed:\n{proc.stderr[-2000:]}")
            with open(os.path.join(run_dir, "summary.json")) as f:
                s = json.load(f)
            row = {
                "algo": name,
                "command": "python -m jaxrl.train " + " ".join(argv[:3]),
                "env_steps_per_seed": s["total_timesteps"],
                "seeds": len(s["seeds"]),
                "solved": round(s["solved_fraction"] * len(s["seeds"])),
                "iqm": s["iqm"],
                "ci95": s["ci95"],
                "mean": s["mean"],
                "min": s["min"],
                "compile_s": s["compile_time_s"],
                "train_s": s["train_time_s"],
            }
            rows.append(row)
            print(
                f"{name:<10} {row['env_steps_per_seed']:>9,} steps/seed · solved {row['solved']}/{row['seeds']} · "
                f"IQM {row['iqm']:.1f} [{row['ci95'][0]:.1f}, {row['ci95'][1]:.1f}] · mean {row['mean']:.1f} · "
                f"min {row['min']:.1f} · compile {row['compile_s']:.1f} s · train {row['train_s']:.1f} s",
                flush=True,
            )
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
