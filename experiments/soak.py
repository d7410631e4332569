"""Soak test: kill and resume a multi-seed CartPole run at random points, then
check the final numbers equal an uninterrupted run's, bit for bit.

    python experiments/soak.py --kills 10 [--seed 0] [overrides ...]

Each attempt launches ``python -m jaxrl.train`` (a fresh run, or ``resume=`` once
a checkpoint exists) and, after a random delay, sends SIGKILL, SIGINT or SIGTERM
(chosen at random; SIGKILL may land in the middle of a checkpoint write). When
``--kills`` interruptions have happened, the run is allowed to finish. Then the
same config runs uninterrupted and the two run directories are compared:
``summary.json``'s final returns, every ``metrics.jsonl`` record (timings
excluded) and the final checkpoint's arrays.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

DEFAULT = ["env=cartpole", "seeds=16", "total_timesteps=1500000", "num_evals=60", "progress=false", "plots=false"]
TIMING = {"chunk_time_s", "env_steps_per_s"}


def records(run_dir: str) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f]


def has_checkpoint(run_dir: str) -> bool:
    path = os.path.join(run_dir, "checkpoints")
    return os.path.isdir(path) and any(name.isdigit() for name in os.listdir(path))


def final_state(run_dir: str, overrides: list[str]):
    import jax

    from jaxrl import parse, validate
    from jaxrl.run import program
    from jaxrl.run.checkpoint import keys_to_data
    from jaxrl.run.spec import prepare

    spec = prepare(validate(parse(overrides)), run_dir, resuming=True, layout=False)
    carry = program.load_carry(spec).state
    return [np.asarray(x) for x in jax.tree.leaves(keys_to_data(carry))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-delay", type=float, default=3.0)
    parser.add_argument("--max-delay", type=float, default=15.0)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    overrides = DEFAULT + args.overrides
    rng = np.random.default_rng(args.seed)
    tmp = tempfile.mkdtemp(prefix="jaxrl-soak-")
    soaked, reference = os.path.join(tmp, "soaked"), os.path.join(tmp, "reference")
    env = dict(os.environ)
    kills: list[str] = []
    attempts = 0
    t_start = time.time()
    while True:
        attempts += 1
        if has_checkpoint(soaked):
            cmd = [sys.executable, "-m", "jaxrl.train", f"resume={soaked}"]
        else:
            shutil.rmtree(soaked, ignore_errors=True)
            cmd = [sys.executable, "-m", "jaxrl.train", *overrides, f"run_dir={soaked}"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        if len(kills) < args.kills:
            delay = float(rng.uniform(args.min_delay, args.max_delay))
            sig = [signal.SIGKILL, signal.SIGINT, signal.SIGTERM][int(rng.integers(3))]
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                proc.send_signal(sig)
                kills.append(f"{signal.Signals(sig).name}@{delay:.1f}s")
        out, err = proc.communicate()
        code = proc.returncode
        print(f"attempt {attempts}: exit {code}" + (f" after {kills[-1]}" if code != 0 and kills else ""), flush=True)
        if code == 0 and os.path.exists(os.path.join(soaked, "summary.json")):
            break
        if code not in (0, 130, 143, -9):
            print(err[-3000:], file=sys.stderr)
            raise SystemExit(f"unexpected exit {code}")
    soak_s = time.time() - t_start
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrl.train", *overrides, f"run_dir={reference}"], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    with open(os.path.join(soaked, "summary.json")) as f:
        a = json.load(f)
    with open(os.path.join(reference, "summary.json")) as f:
        b = json.load(f)
    same_summary = a["final_eval_return"] == b["final_eval_return"]
    same_records = records(soaked) == records(reference)
    same_state = all(
        np.array_equal(x, y)
        for x, y in zip(final_state(soaked, overrides), final_state(reference, overrides), strict=True)
    )
    result = {
        "overrides": overrides,
        "interruptions": len(kills),
        "signals": kills,
        "attempts": attempts,
        "soak_wall_s": round(soak_s, 1),
        "final_eval_return_equal": same_summary,
        "metrics_records_equal": same_records,
        "final_checkpoint_equal": same_state,
    }
    print(json.dumps(result, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)
    if not (same_summary and same_records and same_state):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
