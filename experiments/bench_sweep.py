"""Sweep benchmark: a 3 × 2 × 16 CartPole grid in ONE compiled program vs the
same 96 runs launched one by one, and the peak memory of a 256-run sweep.

    python experiments/bench_sweep.py [--one-by-one 12] [--big] [--out experiments/results/bench_sweep.json]

The grid: algo.lr ∈ {1e-3, 3e-3, 5e-3} × algo.ent_coef ∈ {0, 0.01} × 16 seeds at
the cartpole preset (200k env steps per run). "One by one" launches
``python -m jaxrl.train`` once per (configuration, seed) — every launch pays
start-up, compile and a one-seed program; ``--one-by-one N`` times N of the 96
launches (spread over the configurations) and extrapolates to 96 (say ``all``
to run them all). Peak RSS is the child process's maximum resident set size.
``--big`` adds a 4 × 4 × 16 = 256-run sweep and reports its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

LRS = ["1e-3", "3e-3", "5e-3"]
ENTS = ["0", "0.01"]
COMMON = ["env=cartpole", "progress=false", "plots=false"]


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MiB of this child, stderr) — each child is the
    only one running, so RUSAGE_CHILDREN's maximum is its own once it is the
    largest so far; we fork a tiny wrapper to isolate it."""
    wrapper = [
        sys.executable,
        "-c",
        "import resource,subprocess,sys;r=subprocess.run(sys.argv[1:]);print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr);sys.exit(r.returncode)",
        *cmd,
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(wrapper, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    rss_kib = int(proc.stderr.strip().splitlines()[-1])
    return wall, rss_kib / 1024.0, proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one-by-one", default="12")
    parser.add_argument("--big", action="store_true")
    parser.add_argument("--out", default="experiments/results/bench_sweep.json")
    args = parser.parse_args()
    results: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        sweep_cmd = [
            sys.executable,
            "-m",
            "jaxrl.sweep",
            *COMMON,
            "seeds=16",
            f"algo.lr={','.join(LRS)}",
            f"algo.ent_coef={','.join(ENTS)}",
            f"run_dir={tmp}/grid",
        ]
        wall, rss, _ = timed(sweep_cmd)
        with open(os.path.join(tmp, "grid", "group-0", "summary.json")) as f:
            summary = json.load(f)
        results["one_program"] = {
            "runs": 96,
            "wall_s": round(wall, 1),
            "compile_s": round(summary["compile_time_s"], 1),
            "train_s": round(summary["train_time_s"], 1),
            "env_steps_per_s": round(summary["env_steps_per_s"]),
            "peak_rss_mib": round(rss),
        }
        print(json.dumps({"one_program": results["one_program"]}), flush=True)

        launches = [(lr, ent, seed) for lr in LRS for ent in ENTS for seed in range(16)]
        n = len(launches) if args.one_by_one == "all" else int(args.one_by_one)
        step = len(launches) / n
        sample = [launches[int(i * step)] for i in range(n)]
        walls, peaks = [], []
        for i, (lr, ent, seed) in enumerate(sample):
            cmd = [
                sys.executable,
                "-m",
                "jaxrl.train",
                *COMMON,
                f"seeds=[{seed}]",
                f"algo.lr={lr}",
                f"algo.ent_coef={ent}",
                f"run_dir={tmp}/one-{i}",
            ]
            wall, rss, _ = timed(cmd)
            walls.append(wall)
            peaks.append(rss)
            print(
                json.dumps({"launch": i, "lr": lr, "ent_coef": ent, "seed": seed, "wall_s": round(wall, 1)}), flush=True
            )
        mean_wall = sum(walls) / len(walls)
        results["one_by_one"] = {
            "launches_timed": n,
            "mean_wall_per_launch_s": round(mean_wall, 1),
            "total_wall_s": round(mean_wall * 96, 1) if n < 96 else round(sum(walls), 1),
            "extrapolated": n < 96,
            "peak_rss_mib": round(max(peaks)),
        }
        results["ratio_wall"] = round(results["one_by_one"]["total_wall_s"] / results["one_program"]["wall_s"], 1)
        print(json.dumps({"one_by_one": results["one_by_one"], "ratio_wall": results["ratio_wall"]}), flush=True)

        if args.big:
            lrs = "1e-3,2e-3,3e-3,5e-3"
            ents = "0,0.003,0.01,0.02"
            cmd = [
                sys.executable,
                "-m",
                "jaxrl.sweep",
                *COMMON,
                "seeds=16",
                f"algo.lr={lrs}",
                f"algo.ent_coef={ents}",
                f"run_dir={tmp}/big",
            ]
            wall, rss, _ = timed(cmd)
            with open(os.path.join(tmp, "big", "group-0", "summary.json")) as f:
                big = json.load(f)
            with open(os.path.join(tmp, "big", "group-0", "metrics.jsonl")) as f:
                metrics_bytes = len(f.read())
            results["sweep_256"] = {
                "runs": 256,
                "wall_s": round(wall, 1),
                "compile_s": round(big["compile_time_s"], 1),
                "env_steps_per_s": round(big["env_steps_per_s"]),
                "peak_rss_mib": round(rss),
                "metrics_jsonl_kib": round(metrics_bytes / 1024),
            }
            print(json.dumps({"sweep_256": results["sweep_256"]}), flush=True)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
