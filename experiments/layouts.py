"""How close ``evaluate`` on another device layout comes to the training run.

    python experiments/layouts.py [--written 2] [--read 1 2 4] [--out experiments/results/layouts-jaxX.Y.json]

For each case, one ``python -m jaxrl.train`` on ``--written`` simulated
XLA:CPU devices, then ``python -m jaxrl.evaluate RUN_DIR`` on each ``--read``
device count (fresh processes). Prints, per read layout, how many seeds'
evaluation means equal ``summary.json``'s ``final_eval_return`` bit for bit
and the largest absolute and relative difference. CartPole's returns are
step counts (integers); Pendulum's are sums of float32 rewards, where
rounding shows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

CASES = {
    "cartpole": ["env=cartpole", "seeds=16"],
    "pendulum-ppo": ["env=pendulum", "seeds=8", "total_timesteps=100000"],
    "pendulum-sac": ["env=pendulum", "algo=sac", "seeds=8", "total_timesteps=5000"],
}


def _env(devices: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JAXRL_CPU_DEVICES", "PJRT_NPROC")}
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def _run(argv: list[str], devices: int) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=_env(devices))
    if proc.returncode:
        sys.exit(f"layouts.py: {' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--written", type=int, default=2)
    parser.add_argument("--read", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--out", default=None, help="default: experiments/results/layouts-jax<major.minor>.json")
    args = parser.parse_args()
    if args.written < 1 or any(r < 1 for r in args.read):
        sys.exit("layouts.py: --written and --read take device counts ≥ 1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases:
            run_dir = os.path.join(tmp, case)
            _run(["jaxrl.train", *CASES[case], "progress=false", "plots=false", f"run_dir={run_dir}"], args.written)
            with open(os.path.join(run_dir, "summary.json")) as f:
                trained = np.asarray(json.load(f)["final_eval_return"], np.float64)
            for read in args.read:
                proc = _run(["jaxrl.evaluate", run_dir], read)
                with open(os.path.join(run_dir, "evaluation.json")) as f:
                    means = np.asarray([s["mean"] for s in json.load(f)["seeds"]], np.float64)
                diff = np.abs(means - trained)
                row = {
                    "case": case,
                    "written_devices": args.written,
                    "read_devices": read,
                    "seeds": len(trained),
                    "bitwise_equal_seeds": int(np.sum(means == trained)),
                    "max_abs_diff": float(diff.max()),
                    "max_rel_diff": float((diff / np.maximum(np.abs(trained), 1e-12)).max()),
                    "note": any(line.startswith("note:") for line in proc.stderr.splitlines()),
                }
                rows.append(row)
                print(
                    f"{case:<13} written on {args.written}, read on {read}: {row['bitwise_equal_seeds']}/{row['seeds']} "
                    f"seeds bitwise, max |diff| {row['max_abs_diff']:.3g} (relative {row['max_rel_diff']:.2g})"
                    + (" · note printed" if row["note"] else ""),
                    flush=True,
                )
    import jax

    out = args.out or "experiments/results/layouts-jax{}.{}.json".format(*jax.__version_info__[:2])
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump({"jax_version": jax.__version__, "rows": rows}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
