"""One gradient step of the DQN family's heads, jitted, on this machine.

    python experiments/bench/distributional_step.py [--batch 128] [--levels 32] [--steps 50]

DQN (scalar), C51 (51 atoms), QR-DQN (``--levels`` quantiles) and IQN
(``--levels`` drawn levels per network, ``--levels`` acting levels) on a
CartPole-shaped batch with a 64×64 ReLU torso, with and without the perf seam;
prints ms per step (median of 5 timings of ``--steps`` steps) and the ratio to
DQN's step.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.algos import dqn
from jaxrl.algos.qvalue import value_head
from jaxrl.nets.networks import MLP, ImplicitQuantileNetwork, QNetwork
from jaxrl.rl import optim


def step_ms(algo, batch_size: int, steps: int, perf: bool) -> float:
    head = value_head(algo)
    torso = MLP((64, 64), "relu")
    if head.kind == "implicit":
        network = ImplicitQuantileNetwork(2, torso, perf=perf, act_quantiles=algo.act_quantiles)
    else:
        network = QNetwork(2, torso, perf=perf, atoms=head.atoms)
    rng = np.random.default_rng(0)
    batch = dqn.Transition(
        obs=jnp.asarray(rng.normal(size=(batch_size, 4)), jnp.float32),
        action=jnp.asarray(rng.integers(0, 2, batch_size), jnp.int32),
        reward=jnp.ones(batch_size),
        terminated=jnp.zeros(batch_size, bool),
        done=jnp.zeros(batch_size, bool),
        next_obs=jnp.asarray(rng.normal(size=(batch_size, 4)), jnp.float32),
    )
    hp = SimpleNamespace(gamma=0.99, reward_scale=1.0, lr=1e-3, max_grad_norm=10.0, tau=0.01)
    params = network.init(jax.random.key(0), jnp.zeros((1, 4)))
    opt = optim.make(None)
    state = dqn.DQNState(
        params, params, opt.init(params), None, None, None, jax.random.key(0), jnp.zeros(()), jnp.zeros((), jnp.int32)
    )

    @jax.jit
    def run(state, key):
        def body(state, k):
            return dqn.gradient_step(state, batch, hp, network, algo, opt, head, k)[0], None

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    jax.block_until_ready(run(state, jax.random.key(1)))
    times = []
    for i in range(5):
        t0 = time.perf_counter()
        jax.block_until_ready(run(state, jax.random.key(i)))
        times.append((time.perf_counter() - t0) / steps * 1000)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--levels", type=int, default=32)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args()
    for name, flag, least in (("--batch", args.batch, 1), ("--levels", args.levels, 1), ("--steps", args.steps, 1)):
        if flag < least:
            parser.exit(2, f"distributional_step.py: {name} is {flag}, must be ≥ {least}; e.g. {name} 32\n")
    algos = {
        "dqn": dqn.DQNConfig(),
        "c51": dqn.C51Config(atoms=51, v_min=0.0, v_max=100.0),
        "qrdqn": dqn.QRDQNConfig(quantiles=args.levels),
        "iqn": dqn.IQNConfig(quantiles=args.levels, act_quantiles=args.levels),
    }
    print(f"batch {args.batch}, {args.levels} quantiles / levels, 64×64 torso, {jax.devices()[0].platform}")
    print(f"{'head':<7} {'perf':<5} {'ms/step':>8} {'× dqn':>6}")
    for perf in (False, True):
        base = None
        for name, algo in algos.items():
            ms = step_ms(algo, args.batch, args.steps, perf)
            base = base or ms
            print(f"{name:<7} {str(perf).lower():<5} {ms:8.3f} {ms / base:6.1f}")


if __name__ == "__main__":
    main()
