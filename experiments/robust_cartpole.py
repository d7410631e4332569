"""How often does a CartPole setting solve? Each candidate runs as exactly the
program the CLI compiles (jaxrl.run.program.build: members vmapped with their
hyperparameters), over many seeds, and reports the seeds whose final
deterministic eval is below 475.

    python experiments/robust_cartpole.py --seeds 64 --out experiments/results/robust_cartpole_cli.jsonl \
        "algo.lr=5e-3" "algo.lr=3e-3 algo.ent_coef=0.01"

Each positional argument is one candidate: space-separated overrides on top
of the cartpole preset.
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import numpy as np

from jaxrl import parse, validate
from jaxrl.perf.platform import compiler_options
from jaxrl.run import program
from jaxrl.run.spec import prepare


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("candidates", nargs="+")
    parser.add_argument("--seeds", type=int, default=64)
    parser.add_argument("--seed-offset", type=int, default=0)
    parser.add_argument("--out", default="experiments/results/robust_cartpole_cli.jsonl")
    args = parser.parse_args()
    for candidate in args.candidates:
        overrides = ["env=cartpole", f"seeds={args.seeds}", f"seed={args.seed_offset}", *candidate.split()]
        spec = prepare(validate(parse(overrides)), "/unused", layout=False)
        trainer = spec.trainer
        built = program.build(spec)
        t0 = time.perf_counter()
        carry = jax.jit(built.init)(built.keys, spec.members.hparams)
        chunk = jax.jit(built.step, donate_argnums=0, compiler_options=compiler_options())
        curve = []
        for _ in range(trainer.num_chunks):
            carry, metrics, _ = chunk(carry)
            curve.append(np.asarray(metrics.eval.returns).mean(-1))
        seconds = time.perf_counter() - t0
        final = curve[-1]
        failed = [int(args.seed_offset + i) for i in np.flatnonzero(final < 475)]
        row = {
            "candidate": candidate,
            "seeds": args.seeds,
            "seed_offset": args.seed_offset,
            "total_timesteps": trainer.total_env_steps,
            "solved": args.seeds - len(failed),
            "failed_seeds": failed,
            "failed_returns": [round(float(final[s - args.seed_offset]), 1) for s in failed],
            "curve_min": [round(float(c.min()), 1) for c in curve],
            "seconds": round(seconds, 1),
        }
        print(json.dumps(row), flush=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
