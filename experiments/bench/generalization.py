"""The cost of generalization tooling, in one process, runs alternated:
env-steps/s of the same training program with ``env.randomize`` off and on,
on gymnax and on brax (mass, friction and gravity scales), and with 0, 1 and
4 evaluation sets (``eval.sets``) tracked at every evaluation point.

    python experiments/bench/generalization.py [--seeds 16] [--runs 3] [--part all|randomize|sets|brax]

Each program is jaxrl's whole training (``make_train(config).train`` vmapped
over seeds, one device), compiled once and run ``--runs`` times, the variants
alternated (a, b, b, a, …); medians. The randomization programs evaluate
once; the set programs keep the preset's evaluation points (``num_evals``), as
a user's run does, and every set has one grid point, so k sets add k ×
``eval.episodes`` evaluation episodes per point. Results in
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

from jaxrl import parse, validate
from jaxrl.perf.platform import compiler_options
from jaxrl.trainer.loop import make_train

OUT = "experiments/results/generalization.json"
SPEC = "length=uniform(0.25,1.0) gravity=loguniform(8,12) masscart=choice(0.5,1,2)"
CASES = {
    "PPO CartPole preset": ["env=cartpole"],
    "PQN CartPole preset": ["env=cartpole", "algo=pqn"],
}
# brax: the PPO inverted_pendulum preset at a shorter budget (compiles dominate a full one)
BRAX_CASE = ["env=inverted_pendulum", "total_timesteps=65536"]
BRAX_SPEC = "mass_scale=uniform(0.5,2) friction_scale=uniform(0.5,1.5) gravity_scale=uniform(0.8,1.2)"
SETS = {
    0: "",
    1: "test: length=1.5",
    4: "nominal; long: length=1.5; heavy: gravity=15; wide: length=uniform(0.25,2)",
}


def program(overrides: list[str], seeds: int, evals: bool = False):
    config = validate(parse([*overrides, f"seeds={seeds}", *([] if evals else ["num_evals=1"]), "progress=false"]))
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
    parser.add_argument("--part", choices=("all", "randomize", "sets", "brax"), default="all")
    args = parser.parse_args()
    if args.seeds < 1 or args.runs < 1:
        print("generalization.py: --seeds and --runs must be ≥ 1; e.g. --runs 3", file=sys.stderr)
        raise SystemExit(2)
    results = {"machine": {"backend": jax.default_backend(), "jax": jax.__version__, "cores": os.cpu_count()}}
    if os.path.exists(args.out):  # a part run alone keeps the other part's figures
        with open(args.out) as f:
            results = {**json.load(f), "machine": results["machine"]}
    if args.part in ("all", "randomize"):
        results["randomization"] = [randomization(name, overrides, args) for name, overrides in CASES.items()]
    if args.part in ("all", "brax"):
        results["brax_randomization"] = [randomization("PPO brax inverted_pendulum preset", BRAX_CASE, args, BRAX_SPEC)]
    if args.part in ("all", "sets"):
        results["eval_sets"] = [eval_sets("PPO CartPole preset", CASES["PPO CartPole preset"], args)]
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


def alternate(sides: dict, runs: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Run every compiled variant ``runs`` times, the order reversed every other round."""
    times: dict = {k: [] for k in sides}
    finals: dict = {}
    order = list(sides)
    for i in range(runs):
        for side in order if i % 2 == 0 else order[::-1]:
            seconds, finals[side] = sides[side][2]()
            times[side].append(seconds)
    return times, finals


def describe(side: tuple, times: list[float], final: float) -> dict:
    steps, compile_s, _ = side
    run_s = float(np.median(times))
    return {
        "compile_s": round(compile_s, 2),
        "run_s_all": [round(t, 2) for t in times],
        "env_steps_per_s": round(steps / run_s),
        "final_return_mean": round(final, 1),
    }


def randomization(name: str, overrides: list[str], args, spec: str = SPEC) -> dict:
    sides = {
        "off": program(overrides, args.seeds),
        "on": program([*overrides, f"env.randomize={spec}"], args.seeds),
    }
    times, finals = alternate(sides, args.runs)
    row = {"benchmark": name, "seeds": args.seeds, "randomize": spec, "overrides": overrides}
    for side in sides:
        row[side] = describe(sides[side], times[side], finals[side])
    row["on_over_off"] = round(row["on"]["env_steps_per_s"] / row["off"]["env_steps_per_s"], 3)
    print(json.dumps(row), flush=True)
    return row


def eval_sets(name: str, overrides: list[str], args) -> dict:
    sides = {k: program([*overrides, f"eval.sets={text}"], args.seeds, evals=True) for k, text in SETS.items()}
    times, finals = alternate(sides, args.runs)
    row = {"benchmark": name, "seeds": args.seeds, "sets": {str(k): v for k, v in SETS.items()}}
    for k in sides:
        row[f"{k} sets"] = describe(sides[k], times[k], finals[k])
    base = row["0 sets"]["env_steps_per_s"]
    row["over_0_sets"] = {f"{k} sets": round(row[f"{k} sets"]["env_steps_per_s"] / base, 3) for k in SETS if k}
    print(json.dumps(row), flush=True)
    return row


if __name__ == "__main__":
    main()
