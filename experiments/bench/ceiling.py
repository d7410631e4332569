"""The machine's ceiling and how close training gets to it (PPO CartPole).

    python experiments/bench/ceiling.py [--seeds 1 16] [--out experiments/results/bench_ceiling.json]

At PureJaxRL's settings (4 envs × 128 steps, 4 epochs × 4 minibatches, 64×64
tanh actor and critic), per seed count, one compiled program each:

* env only: the env stepped with random actions, same env count;
* acting: env + policy forward + sampling (the rollout without learning);
* training: the whole update (rollout, GAE, learner) — the trainer's program;
* the machine's fp32 large-matmul rate (2048², jitted, median of 10);
* the same-shape matmul rate: a chain of the learner's own dominant product
  (minibatch × 64 by 64 × 64, batched over the seeds as the vmapped program
  does) — what this CPU does at the shapes training actually has;
* training's FLOP rate, counted analytically: per env step one actor+critic
  forward while acting, the critic on the final observations the rollout
  evaluates (``⌈T/P⌉ + 1`` of every ``T`` steps with a time limit of ``P``
  steps, all ``T`` without one), plus epochs × (forward + backward ≈ 3
  forwards) in the learner.
"""

from __future__ import annotations

import argparse
import json
import os
import platform

import jax
import jax.numpy as jnp
from peers import PUREJAXRL_CARTPOLE  # experiments/bench/peers.py

from jaxrl import parse, validate
from jaxrl.algos.ppo import rollout, truncation_slots
from jaxrl.envs.core import random_steps
from jaxrl.perf.platform import compiler_options
from jaxrl.run.profile import median_seconds
from jaxrl.trainer.loop import make_train

SETTINGS = ["env=cartpole", *PUREJAXRL_CARTPOLE]


def matmul_flops(n: int = 2048) -> float:
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (n, n), jnp.float32)
    f = jax.jit(lambda a, b: a @ b)
    return 2 * n**3 / median_seconds(f, a, b, repeats=10)


def shaped_matmul_flops(seeds: int, rows: int, width: int, chain: int = 400) -> float:
    """FLOP/s of ``chain`` dependent ``[seeds, rows, width] @ [seeds, width, width]``
    products (orthogonal matrices, so the values neither blow up nor vanish)."""
    q = jnp.linalg.qr(jax.random.normal(jax.random.key(2), (seeds, width, width), jnp.float32))[0]
    x = jax.random.normal(jax.random.key(3), (seeds, rows, width), jnp.float32)

    def run(x, q):
        return jax.lax.scan(lambda x, _: (jnp.einsum("sbi,sij->sbj", x, q), None), x, None, length=chain)[0]

    seconds = median_seconds(jax.jit(run, compiler_options=compiler_options()), x, q, repeats=5)
    return 2 * seeds * rows * width * width * chain / seconds


def mlp_flops(sizes: list[int]) -> int:
    """FLOPs (2 per multiply-add) of one MLP forward with layer widths ``sizes``."""
    return sum(2 * a * b for a, b in zip(sizes[:-1], sizes[1:], strict=False))


def forward_flops(obs_dim: int, hidden: tuple[int, ...], actions: int) -> int:
    """FLOPs of one actor + critic forward on one observation."""
    return mlp_flops([obs_dim, *hidden, actions]) + mlp_flops([obs_dim, *hidden, 1])


def measure(seeds: int, updates: int = 40) -> dict:
    config = validate(parse([*SETTINGS, f"seeds={seeds}", f"total_timesteps={updates * 512}", "num_evals=1"]))
    trainer = make_train(config)
    env, algo, agent = trainer.env, config.algo, trainer.agent
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
    hp = jax.tree.map(lambda x: jnp.broadcast_to(jnp.asarray(x), (seeds,)), trainer.hparams)
    states = jax.jit(jax.vmap(trainer.init))(keys, hp)
    n, t = config.num_envs, algo.num_steps

    def env_only(state):
        return random_steps(env, state.agent.env_state, state.eval_key, t * updates)[1]

    def acting(state):
        def body(s, _):
            s, traj = rollout(s, env, env.default_params, agent.network, algo)
            return s, traj.reward

        return jax.lax.scan(body, state.agent, None, length=updates)[1]

    def training(state, hp):
        return jax.lax.scan(lambda s, _: trainer.update(s, hp), state, None, length=updates)[1].loss

    steps = seeds * n * t * updates
    t_env = median_seconds(jax.jit(jax.vmap(env_only), compiler_options=compiler_options()), states, repeats=5)
    t_act = median_seconds(jax.jit(jax.vmap(acting), compiler_options=compiler_options()), states, repeats=5)
    t_train = median_seconds(jax.jit(jax.vmap(training), compiler_options=compiler_options()), states, hp, repeats=3)
    fwd = forward_flops(env.obs_shape[0], tuple(algo.hidden_sizes), env.action_space.n)
    critic = mlp_flops([env.obs_shape[0], *algo.hidden_sizes, 1])
    slots = truncation_slots(t, env.truncation_period())  # the rows ppo.rollout evaluates
    final_rows = 1.0 if slots is None else (slots + 1) / t
    per_step = round(fwd + critic * final_rows + algo.update_epochs * 3 * fwd)  # acting + final-obs values + learner
    train_rate = steps / t_train
    minibatch = n * t // algo.num_minibatches
    shaped = shaped_matmul_flops(seeds, minibatch, int(algo.hidden_sizes[-1]))
    return {
        "seeds": seeds,
        "num_envs": n,
        "env_only_steps_per_s": round(steps / t_env),
        "acting_steps_per_s": round(steps / t_act),
        "training_steps_per_s": round(train_rate),
        "training_over_env_only": round(train_rate / (steps / t_env), 3),
        "training_over_acting": round(train_rate / (steps / t_act), 3),
        "flops_per_env_step": per_step,
        "training_gflops": round(train_rate * per_step / 1e9, 2),
        "shaped_matmul": f"[{seeds}, {minibatch}, {algo.hidden_sizes[-1]}] @ [{seeds}, {algo.hidden_sizes[-1]}, {algo.hidden_sizes[-1]}]",
        "shaped_matmul_gflops": round(shaped / 1e9, 1),
        "training_flops_over_shaped_matmul": round(train_rate * per_step / shaped, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--out", default="experiments/results/bench_ceiling.json")
    args = parser.parse_args()
    peak = matmul_flops()
    print(f"fp32 matmul 2048²: {peak / 1e9:.1f} GFLOP/s", flush=True)
    rows = []
    for seeds in args.seeds:
        row = measure(seeds)
        row["training_flops_over_matmul_peak"] = round(row["training_gflops"] * 1e9 / peak, 3)
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {
        "machine": {
            "cpu": platform.machine(),
            "cores": os.cpu_count(),
            "backend": jax.default_backend(),
            "jax": jax.__version__,
        },
        "matmul_gflops": round(peak / 1e9, 1),
        "rows": rows,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
