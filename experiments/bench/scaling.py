"""Scaling on this machine: env-steps/s and peak RSS vs num_envs and vs seeds.

    python experiments/bench/scaling.py [--envs 4 16 64 256 1024 4096] [--seeds 1 4 16 64 256]

PPO CartPole at PureJaxRL's settings otherwise (128 steps per env, 4 epochs ×
4 minibatches, 64×64). Each point runs in its own process (so its peak RSS is
its own): one compiled program of the trainer's update scanned over enough
updates for ≈ 4M env steps, timed after compilation.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

OUT = "experiments/results/bench_scaling.json"


def point(envs: int, seeds: int) -> dict:
    import jax
    import jax.numpy as jnp

    from jaxrl import parse, validate
    from jaxrl.perf.platform import compiler_options
    from jaxrl.trainer.loop import make_train

    per_update = envs * 128 * seeds
    updates = max(4, round(4_000_000 / per_update))
    config = validate(
        parse(
            [
                "env=cartpole",
                f"num_envs={envs}",
                f"seeds={seeds}",
                "algo.num_steps=128",
                "algo.update_epochs=4",
                "algo.num_minibatches=4",
                f"total_timesteps={updates * envs * 128}",
                "num_evals=1",
            ]
        )
    )
    trainer = make_train(config)
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
    hp = jax.tree.map(lambda x: jnp.broadcast_to(jnp.asarray(x), (seeds,)), trainer.hparams)

    def run(state, hp):
        return jax.lax.scan(lambda s, _: trainer.update(s, hp), state, None, length=updates)

    states = jax.jit(jax.vmap(trainer.init))(keys, hp)
    t0 = time.perf_counter()
    compiled = jax.jit(jax.vmap(run)).lower(states, hp).compile(compiler_options())
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(compiled(states, hp))
    run_s = time.perf_counter() - t0
    return {
        "num_envs": envs,
        "seeds": seeds,
        "updates": updates,
        "compile_s": round(compile_s, 2),
        "env_steps_per_s": round(per_update * updates / run_s),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, nargs="+", default=[4, 16, 64, 256, 1024, 4096])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--point", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    if args.point:
        print(json.dumps(point(*args.point)))
        return
    result = {"vs_num_envs": [], "vs_seeds": []}
    todo = [("vs_num_envs", e, 1) for e in args.envs] + [("vs_seeds", 4, s) for s in args.seeds]
    for name, envs, seeds in todo:
        proc = subprocess.run(
            [sys.executable, __file__, "--point", str(envs), str(seeds)], capture_output=True, text=True
        )
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            raise SystemExit(proc.returncode)
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        result[name].append(row)
        print(name, json.dumps(row), flush=True)
    import jax

    result["jax"] = jax.__version__
    result["cores"] = os.cpu_count()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
