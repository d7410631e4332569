"""Throughput vs number of devices (simulated on a CPU with
``--xla_force_host_platform_device_count``; real ones on a GPU/TPU host).

    python experiments/bench/devices.py [--devices 1 2 4] [--out experiments/results/bench_devices.json]

Two layouts, each point a fresh ``python -m jaxrl.train`` process:
* parallel=seeds — ``env=cartpole seeds=16`` (the preset), members sharded;
* parallel=data  — one CartPole run with 64 envs split over the devices.
On a CPU the simulated devices share the same cores, so this measures the
sharding overhead, not a speed-up; on real devices it measures the scaling.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CASES = {
    "seeds": ["env=cartpole", "seeds=16"],
    "data": ["env=cartpole", "seeds=1", "num_envs=64", "algo.num_steps=32", "total_timesteps=1000000", "parallel=data"],
}


def run(case: str, devices: int, simulate: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if simulate:
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}").strip()
        args = [
            *CASES[case],
            f"devices={devices}",
            "progress=false",
            "plots=false",
            "checkpoint=false",
            "compile_cache=off",
            f"run_dir={tmp}/run",
        ]
        proc = subprocess.run([sys.executable, "-m", "jaxrl.train", *args], capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-2000:])
        with open(f"{tmp}/run/summary.json") as f:
            summary = json.load(f)
    return {
        "parallel": case,
        "devices": devices,
        "compile_s": round(summary["compile_time_s"], 2),
        "train_s": round(summary["train_time_s"], 2),
        "env_steps_per_s": round(summary["env_steps_per_s"]),
        "iqm": summary["iqm"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--real", action="store_true", help="use the machine's own devices (no simulation)")
    parser.add_argument("--out", default="experiments/results/bench_devices.json")
    args = parser.parse_args()
    rows = []
    for case in CASES:
        for d in args.devices:
            row = run(case, d, simulate=not args.real)
            rows.append(row)
            print(json.dumps(row), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"simulated": not args.real, "cores": os.cpu_count(), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
