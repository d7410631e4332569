"""Time-to-solve CartPole × 16 seeds: wall time, compile included, until every
seed's deterministic evaluation reaches 475.

    python experiments/bench/time_to_solve.py [--out experiments/results/bench_time_to_solve.json]

* jaxrl preset: ``python -m jaxrl.train env=cartpole seeds=16`` as a process
  (``compile_cache=off``: every launch compiles from scratch);
  the time is the launch-to-exit wall time minus the chunks after the first
  evaluation at which all 16 seeds were solved.
* PureJaxRL's default settings (4 envs × 128 steps, 4 × 4 minibatches, lr
  2.5e-4) through the same CLI, 1M steps, 40 evaluations.
* rejax at PureJaxRL's settings (if installed: ``pip install -e '.[bench]'``),
  one program with 40 evaluations; its time is compile + run × (fraction of
  the budget at the first all-solved evaluation).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

BUDGET = ["total_timesteps=1000000", "num_evals=40", "eval.episodes=16"]


def jaxrl_cli(extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        # a cold start: the persistent compilation cache off (the peer has none)
        args = ["env=cartpole", "seeds=16", *extra, "progress=false", "plots=false", "compile_cache=off"]
        args.append(f"run_dir={tmp}/run")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "jaxrl.train", *args], capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-2000:])
        evals = [json.loads(line) for line in open(f"{tmp}/run/metrics.jsonl")]
        evals = [r for r in evals if r["type"] == "eval"]
    solved_at = next((i for i, r in enumerate(evals) if min(r["eval_return"]) >= 475), None)
    if solved_at is None:
        return {"wall_s": round(wall, 1), "solved": False, "final_min_return": min(evals[-1]["eval_return"])}
    after = sum(r["chunk_time_s"] for r in evals[solved_at + 1 :])
    return {
        "time_to_solve_s": round(wall - after, 1),
        "env_steps_at_solve": evals[solved_at]["env_steps"],
        "wall_s": round(wall, 1),
        "solved": True,
    }


def rejax_run() -> dict:
    import jax
    from peers import REJAX_PPO_CARTPOLE, make_rejax  # experiments/bench/peers.py

    total, evals = 1_000_000, 40
    algo = make_rejax("ppo", "CartPole-v1", REJAX_PPO_CARTPOLE, total, total // evals)
    keys = jax.random.split(jax.random.PRNGKey(0), 16)
    t0 = time.perf_counter()
    compiled = jax.jit(jax.vmap(algo.train)).lower(keys).compile()
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, evaluation = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - t0
    returns = np.asarray(evaluation[1]).mean(-1)  # [seeds, evals]
    solved = np.flatnonzero(returns.min(axis=0) >= 475)
    out = {"compile_s": round(compile_s, 1), "run_s": round(run_s, 1), "solved": bool(solved.size)}
    if solved.size:
        frac = (solved[0]) / (returns.shape[1] - 1)
        out["time_to_solve_s"] = round(compile_s + run_s * frac, 1)
        out["env_steps_at_solve"] = int(frac * total)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="experiments/results/bench_time_to_solve.json")
    args = parser.parse_args()
    from peers import PUREJAXRL_CARTPOLE  # experiments/bench/peers.py

    result = {"jaxrl_preset": jaxrl_cli([]), "jaxrl_purejaxrl_settings": jaxrl_cli([*PUREJAXRL_CARTPOLE, *BUDGET])}
    print(json.dumps(result), flush=True)
    try:
        result["rejax_purejaxrl_settings"] = rejax_run()
    except ImportError:
        result["rejax_purejaxrl_settings"] = "not installed (pip install -e '.[bench]')"
    print(json.dumps(result["rejax_purejaxrl_settings"]), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
