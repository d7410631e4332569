"""CartPole PPO benchmark: throughput at PureJaxRL's settings, and the preset's
time-to-solve from the command line.

    python experiments/bench_cartpole.py [--seeds 1 16] [--skip-cli] [--out experiments/results/bench_cartpole.json]

Part 1 — PureJaxRL's CartPole settings (4 envs × 128 steps, 4 epochs × 4
minibatches, lr 2.5e-4 annealed, 500k steps per seed): compile time (init +
chunk), run time and env-steps/s for each seed count, one compiled program each.

Part 2 — ``python -m jaxrl.train env=cartpole seeds=16`` as a subprocess: wall
time from launch to the robustness table, and how many seeds are solved.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import jax
import numpy as np

from jaxrl import parse, validate
from jaxrl.perf.platform import compiler_options
from jaxrl.trainer.loop import make_batched, make_train, seed_keys

PUREJAXRL = [
    "num_envs=4",
    "total_timesteps=500000",
    "algo.num_steps=128",
    "algo.update_epochs=4",
    "algo.num_minibatches=4",
    "algo.lr=2.5e-4",
    "algo.ent_coef=0.01",
    "algo.gae_lambda=0.95",
    "algo.gamma=0.99",
    "algo.clip_eps=0.2",
    "algo.max_grad_norm=0.5",
    "algo.lr_schedule=linear",
    "num_evals=20",
]


def throughput(seeds: int) -> dict:
    config = validate(parse(["env=cartpole", f"seeds={seeds}", *PUREJAXRL]))
    trainer = make_train(config)
    keys = seed_keys(config)
    init_b, chunk_b = make_batched(trainer)
    t0 = time.perf_counter()
    init_c = jax.jit(init_b).lower(keys, trainer.hparams).compile(compiler_options())
    abstract = jax.eval_shape(init_b, keys, trainer.hparams)
    chunk_c = jax.jit(chunk_b, donate_argnums=0).lower(abstract, trainer.hparams).compile(compiler_options())
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    states = init_c(keys, trainer.hparams)
    for _ in range(trainer.num_chunks):
        states, metrics = chunk_c(states, trainer.hparams)
    final = np.asarray(jax.device_get(metrics.eval.returns)).mean(-1)
    run_s = time.perf_counter() - t0
    steps = trainer.total_env_steps * seeds
    return {
        "seeds": seeds,
        "env_steps_per_seed": trainer.total_env_steps,
        "compile_s": round(compile_s, 2),
        "run_s": round(run_s, 2),
        "env_steps_per_s": round(steps / run_s),
        "final_eval_return_mean": round(float(final.mean()), 1),
        "final_eval_return_min": round(float(final.min()), 1),
    }


def time_to_solve(seeds: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        cmd = [sys.executable, "-m", "jaxrl.train", "env=cartpole", f"seeds={seeds}", f"run_dir={run_dir}"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
    return {
        "command": f"python -m jaxrl.train env=cartpole seeds={seeds}",
        "wall_s": round(wall, 1),
        "compile_s": round(summary["compile_time_s"], 1),
        "train_s": round(summary["train_time_s"], 1),
        "env_steps_per_s": round(summary["env_steps_per_s"]),
        "env_steps_per_seed": summary["total_timesteps"],
        "solved": f"{round(summary['solved_fraction'] * len(summary['seeds']))}/{len(summary['seeds'])}",
        "final_eval_min": min(summary["final_eval_return"]),
        "iqm": round(summary["iqm"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--out", default="experiments/results/bench_cartpole.json")
    args = parser.parse_args()
    machine = {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
        "jax": jax.__version__,
        "python": platform.python_version(),
    }
    print(json.dumps(machine))
    results = {"machine": machine, "purejaxrl_settings": [], "time_to_solve": None}
    for seeds in args.seeds:
        row = throughput(seeds)
        results["purejaxrl_settings"].append(row)
        print(json.dumps(row), flush=True)
    if not args.skip_cli:
        results["time_to_solve"] = time_to_solve(16)
        print(json.dumps(results["time_to_solve"]), flush=True)
    print()
    print("| setting | seeds | compile s | run s | env-steps/s | final eval (mean / min) |")
    print("|---|---|---|---|---|---|")
    for r in results["purejaxrl_settings"]:
        print(
            f"| PureJaxRL settings, {r['env_steps_per_seed'] // 1000}k steps/seed | {r['seeds']} | {r['compile_s']} | {r['run_s']} "
            f"| {r['env_steps_per_s']:,} | {r['final_eval_return_mean']} / {r['final_eval_return_min']} |"
        )
    if results["time_to_solve"]:
        t = results["time_to_solve"]
        print(
            f"\n`{t['command']}`: {t['wall_s']} s wall (compile {t['compile_s']} s, train {t['train_s']} s), "
            f"{t['env_steps_per_s']:,} env-steps/s, solved {t['solved']} (min {t['final_eval_min']}, IQM {t['iqm']})"
        )
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
