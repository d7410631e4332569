"""The cost of domain randomization: env-steps/s of the same training program
with ``env.randomize`` off and on, in one process, runs alternated.

    python experiments/bench/generalization.py [--seeds 16] [--runs 3]

Each program is jaxrl's whole training (``make_train(config).train`` vmapped
over seeds, one device), compiled once and run ``--runs`` times, the two
alternated (off, on, on, off, …); medians. Results in
``experiments/results/generalization.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.perf.platform import compiler_options
from jaxrl.run.config import parse, validate
from jaxrl.trainer.loop import make_train

OUT = "experiments/results/generalization.json"
SPEC = "length=uniform(0.25,1.0) gravity=loguniform(8,12) masscart=choice(0.5,1,2)"
CASES = {
    "PPO CartPole preset": ["env=cartpole"],
    "PQN CartPole preset": ["env=cartpole", "algo=pqn"],
}


def program(overrides: list[str], seeds: int):
    config = validate(parse([*overrides, f"seeds={seeds}", "num_evals=1", "progress=false"]))
    trainer = make_train(config)
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
    t0 = time.perf_counter()
    compiled = (
        jax.jit(jax.vmap(trainer.train, in_axes=(0, None))).lower(keys, trainer.hparams).compile(compiler_options())
    )
    compile_s = time.perf_counter() - t0

    def run() -> tuple[float, float]:
        t0 = time.perf_counter()
        _, metrics = jax.block_until_ready(compiled(keys, trainer.hparams))
        return time.perf_counter() - t0, float(np.asarray(metrics.eval.returns)[:, -1].mean())

    return trainer.total_env_steps * seeds, compile_s, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    if args.seeds < 1 or args.runs < 1:
        print("generalization.py: --seeds and --runs must be ≥ 1; e.g. --runs 3", file=sys.stderr)
        raise SystemExit(2)
    rows = []
    for name, overrides in CASES.items():
        sides = {
            "off": program(overrides, args.seeds),
            "on": program([*overrides, f"env.randomize={SPEC}"], args.seeds),
        }
        times: dict[str, list[float]] = {"off": [], "on": []}
        finals: dict[str, float] = {}
        for i in range(args.runs):
            for side in ("off", "on") if i % 2 == 0 else ("on", "off"):
                seconds, finals[side] = sides[side][2]()
                times[side].append(seconds)
        row = {"benchmark": name, "seeds": args.seeds, "randomize": SPEC}
        for side, (steps, compile_s, _) in sides.items():
            run_s = float(np.median(times[side]))
            row[side] = {
                "compile_s": round(compile_s, 2),
                "run_s_all": [round(t, 2) for t in times[side]],
                "env_steps_per_s": round(steps / run_s),
                "final_return_mean": round(finals[side], 1),
            }
        row["on_over_off"] = round(row["on"]["env_steps_per_s"] / row["off"]["env_steps_per_s"], 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    results = {"machine": {"backend": jax.default_backend(), "jax": jax.__version__, "cores": os.cpu_count()}}
    results["randomization"] = rows
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
