"""CNN and recurrent PPO: throughput, the rollout/learner split, GRU vs LRU.

    python experiments/bench/pixels_memory.py [--steps 65536] [--seeds 1 16]
        [--lengths 32 128 512] [--out experiments/results/bench_pixels_memory.json]

1. ``python -m jaxrl.train`` with ``profile=true`` (fresh processes, the CLI's
   default layout) for CNN PPO on Breakout-MinAtar and GRU PPO on
   MemoryChain-bsuite, each preset at ``--steps`` env steps per seed, for each
   seed count: env steps/s of one update (timed untraced by ``profile=true``)
   and of the whole run (whose first chunk ``profile=true`` traces, so slower),
   and the share of one update spent in the rollout and in the learner.
2. In this process, the learner's forward+backward pass over a minibatch of
   whole sequences ``[T, 16]`` for the GRU (sequential ``lax.scan``) and the
   LRU (associative scan over time, and its sequential form) at each
   ``T`` in ``--lengths``: milliseconds per gradient and the ratio GRU / LRU.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

RUNS = (
    ("Breakout-MinAtar", "cnn"),
    ("MemoryChain-bsuite", "gru"),
)


def cli_run(env: str, seeds: int, steps: int, tmp: str) -> dict:
    run_dir = os.path.join(tmp, f"{env}-{seeds}")
    argv = [f"env={env}", f"seeds={seeds}", f"total_timesteps={steps}", "num_evals=1", "profile=true"]
    argv += ["progress=false", "plots=false", "checkpoint=false", f"run_dir={run_dir}"]
    proc = subprocess.run([sys.executable, "-m", "jaxrl.train", *argv], capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"pixels_memory.py: {env} seeds={seeds} failed:\n{proc.stderr[-2000:]}")
    with open(os.path.join(run_dir, "summary.json")) as f:
        s = json.load(f)
    phases = {p["phase"].split(":")[0]: p for p in s["profile"]["phases"]}
    return {
        "command": "python -m jaxrl.train " + " ".join(argv[:5]),
        "env": env,
        "seeds": seeds,
        "env_steps_per_s": s["env_steps_per_s"],  # the whole run (its first chunk is traced under profile)
        "update_env_steps_per_s": 1e3 * s["profile"]["env_steps_per_update"] / s["profile"]["full_update_ms"],
        "compile_s": s["compile_time_s"],
        "rollout_share": phases.get("rollout", {}).get("share"),
        "learner_share": phases.get("learner", {}).get("share"),
        "full_update_ms": s["profile"]["full_update_ms"],
        "iqm": s["iqm"],
    }


def sequence_grads(lengths: list[int], envs: int = 16, reps: int = 5) -> list[dict]:
    import jax
    import jax.numpy as jnp

    from jaxrl import envs as envs_lib
    from jaxrl.algos import ppo

    env = envs_lib.make("MemoryChain-bsuite")
    rows = []
    for length in lengths:
        row = {"T": length, "envs": envs}
        for label, network, method in (
            ("gru", "gru", None),
            ("lru", "lru", "associative"),
            ("lru_scan", "lru", "scan"),
        ):
            algo = ppo.PPOConfig(network=network, rnn_size=128, hidden_sizes=(128,), num_steps=length)
            net = ppo.make_network(algo, env)
            if method is not None:
                net = net.clone(core=net.core.clone(method=method))
            hp = ppo.PPOHParams.from_config(algo)
            state = ppo.init_state(jax.random.key(0), hp, env, env.default_params, net, envs)
            keys = jax.random.split(jax.random.key(1), 3)
            batch = ppo.Batch(
                obs=jax.random.normal(keys[0], (length, envs, *env.obs_shape)),
                action=jax.random.randint(keys[1], (length, envs), 0, env.action_space.n),
                log_prob=jnp.full((length, envs), -0.7),
                value=jnp.zeros((length, envs)),
                advantage=jax.random.normal(keys[2], (length, envs)),
                target=jnp.zeros((length, envs)),
            )
            reset = jnp.zeros((length, envs), bool).at[::37].set(True)
            seq = ppo.SequenceBatch(batch, state.carry, reset)
            grad = jax.jit(jax.grad(lambda p, b: ppo.ppo_loss(p, net, b, hp)[0]))
            jax.block_until_ready(grad(state.params, seq))
            best = float("inf")
            for _ in range(reps):
                t0 = time.perf_counter()
                jax.block_until_ready(grad(state.params, seq))
                best = min(best, time.perf_counter() - t0)
            row[f"{label}_ms"] = 1e3 * best
        row["gru_over_lru"] = row["gru_ms"] / row["lru_ms"]
        rows.append(row)
        print(
            f"T={length:<4} GRU {row['gru_ms']:7.2f} ms · LRU associative {row['lru_ms']:7.2f} ms · "
            f"LRU sequential {row['lru_scan_ms']:7.2f} ms · GRU/LRU {row['gru_over_lru']:.2f}x",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=65_536)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512])
    parser.add_argument("--skip-runs", action="store_true", help="only the GRU vs LRU gradients")
    parser.add_argument("--out", default="experiments/results/bench_pixels_memory.json")
    args = parser.parse_args()
    if args.steps < 1 or any(s < 1 for s in args.seeds) or any(t < 1 for t in args.lengths):
        sys.exit("pixels_memory.py: --steps, --seeds and --lengths must be positive")
    runs = []
    if not args.skip_runs:
        with tempfile.TemporaryDirectory() as tmp:
            for env, _ in RUNS:
                for seeds in args.seeds:
                    row = cli_run(env, seeds, args.steps, tmp)
                    runs.append(row)
                    print(
                        f"{env:<20} seeds={seeds:<3} {row['update_env_steps_per_s']:>10,.0f} env steps/s in the update "
                        f"({row['env_steps_per_s']:,.0f} over the run, traced) · rollout "
                        f"{row['rollout_share']:.0%} · learner {row['learner_share']:.0%} · update "
                        f"{row['full_update_ms']:.1f} ms · compile {row['compile_s']:.1f} s",
                        flush=True,
                    )
    grads = sequence_grads(args.lengths)
    import jax

    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"backend": jax.default_backend(), "runs": runs, "sequence_grads": grads}, f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
