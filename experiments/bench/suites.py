"""Env-only throughput of each optional suite's preset env, and what Craftax's
shared fresh worlds (``reset_share``) buy.

    python experiments/bench/suites.py [--envs 64] [--steps 128] [--runs 3]

Per env: ``envs`` copies stepped ``steps`` times under random actions in one
compiled scan (``jaxrl.envs.core.random_steps``: the drawn path PPO's rollout
takes, with every step's fresh start state built in one batched call), median
of ``runs`` timed calls after the compile. For Craftax, ``reset_share`` 1 (a
fresh world per env and step, what a plain vmapped auto-reset costs) against 16
(the adapter's default), and the same envs' step alone (no resets at all) as
the ceiling. Prints env-steps/s and the ratios.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

from jaxrl import envs
from jaxrl.envs.core import random_steps

PRESET_ENVS = (
    "navix:Navix-DoorKey-5x5-v0",
    "xminigrid:MiniGrid-DoorKey-5x5",
    "jumanji:Snake-v1",
    "craftax:Craftax-Classic-Symbolic-v1",
    "playground:CartpoleBalance",
)


def rate(env: envs.Env, num_envs: int, steps: int, runs: int) -> tuple[float, float]:
    """(env-steps/s, compile seconds) of ``random_steps`` on ``env``."""
    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), num_envs))
    fn = jax.jit(lambda s, k: random_steps(env, s, k, steps)[1].sum())
    start = time.perf_counter()
    jax.block_until_ready(fn(state, jax.random.key(1)))
    compile_s = time.perf_counter() - start
    times = []
    for i in range(runs):
        start = time.perf_counter()
        jax.block_until_ready(fn(state, jax.random.key(2 + i)))
        times.append(time.perf_counter() - start)
    return num_envs * steps / float(np.median(times)), compile_s


def step_only_rate(env: envs.Env, num_envs: int, steps: int, runs: int) -> float:
    """env-steps/s of the suite's step alone (no auto-reset): the ceiling."""
    state, _ = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), num_envs))
    raw = state.inner
    actions = jax.vmap(jax.vmap(env.random_action))(jax.random.split(jax.random.key(3), (steps, num_envs)))
    keys = jax.random.split(jax.random.key(4), (steps, num_envs))
    advance = jax.vmap(env._advance, in_axes=(0, 0, 0, None))

    def run(raw):
        def body(raw, inputs):
            k, a = inputs
            raw, _, reward, _, _ = advance(k, raw, a, env.default_params)
            return raw, reward

        return jax.lax.scan(body, raw, (keys, actions))[1].sum()

    fn = jax.jit(run)
    jax.block_until_ready(fn(raw))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        jax.block_until_ready(fn(raw))
        times.append(time.perf_counter() - start)
    return num_envs * steps / float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    print(f"{jax.devices()[0].platform}, {args.envs} envs × {args.steps} steps, median of {args.runs}")
    for name in args.only or PRESET_ENVS:
        env = envs.make(name)
        if name.startswith("craftax:"):
            shared, compile_shared = rate(env, args.envs, args.steps, args.runs)
            env.reset_share = 1
            own, compile_own = rate(env, args.envs, args.steps, args.runs)
            ceiling = step_only_rate(env, args.envs, args.steps, args.runs)
            print(
                f"{name:40s} reset_share=16 {shared / 1e3:8.1f}k env-steps/s (compile {compile_shared:.1f} s) · "
                f"reset_share=1 {own / 1e3:8.1f}k ({compile_own:.1f} s) · ×{shared / own:.2f} · "
                f"step alone {ceiling / 1e3:8.1f}k (shared = {shared / ceiling:.2f} of it)"
            )
        else:
            value, compile_s = rate(env, args.envs, args.steps, args.runs)
            print(f"{name:40s} {value / 1e3:8.1f}k env-steps/s (compile {compile_s:.1f} s)")


if __name__ == "__main__":
    main()
