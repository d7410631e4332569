"""Random play on each env suite's preset env: the floor its preset's result is
read against (README, "More JAX env suites").

    python experiments/suites_random.py [--envs 64] [--steps 2000]

Prints, per env, the mean and the spread of the returns of the episodes that
ended within ``--steps`` steps of ``--envs`` copies under uniformly random
actions (``Env.random_action``), and their count.
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from jaxrl import envs

PRESET_ENVS = {
    "navix:Navix-DoorKey-5x5-v0": {},
    "xminigrid:MiniGrid-DoorKey-5x5": {},
    "jumanji:Snake-v1": {},
    "craftax:Craftax-Classic-Symbolic-v1": {},
    "playground:CartpoleBalance": {},
}


def random_returns(name: str, num_envs: int, steps: int, seed: int = 0) -> np.ndarray:
    env = envs.make(name)
    key_reset, key_run = jax.random.split(jax.random.key(seed))
    state, _ = jax.vmap(env.reset)(jax.random.split(key_reset, num_envs))

    def body(state, key):
        ka, ke = jax.random.split(key)
        action = jax.vmap(env.random_action)(jax.random.split(ka, num_envs))
        state, out = jax.vmap(env.step)(jax.random.split(ke, num_envs), state, action)
        return state, (out.done, out.episode_return)

    _, (done, ret) = jax.jit(lambda s: jax.lax.scan(body, s, jax.random.split(key_run, steps)))(state)
    done, ret = np.asarray(done), np.asarray(ret)
    return ret[done]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--only", nargs="*", default=None)
    args = parser.parse_args()
    for name in args.only or PRESET_ENVS:
        returns = random_returns(name, args.envs, args.steps)
        if returns.size:
            print(
                f"{name:40s} random play: mean {returns.mean():9.3f}  median {np.median(returns):9.3f}  "
                f"max {returns.max():9.3f}  over {returns.size} episodes ({args.envs} envs × {args.steps} steps)"
            )
        else:
            print(f"{name:40s} random play: no episode ended within {args.steps} steps")


if __name__ == "__main__":
    main()
