"""What Rainbow's parts cost: prioritized replay against uniform, and the noisy
head against ε-greedy, in Rainbow's CartPole training program.

    python experiments/bench/rainbow_replay.py [--seeds 1 8] [--steps 20000] [--repeats 3]
                                               [--out experiments/results/bench_rainbow.json]

Each variant's whole training program (``make_train(...).train`` vmapped over
the seeds, one device, the CartPole preset but ``--steps`` env steps per seed)
is compiled in the same process and timed round-robin
(``jaxrl.run.profile.round_robin_seconds``): C51 at Rainbow's settings (uniform
replay, ε-greedy: the baseline), Rainbow with uniform replay, Rainbow without
noisy layers, and Rainbow as preset. Prints env-steps/s and the ratio to the
baseline; prioritized replay's own cost is the ratio of the last variant to
the second.
"""

from __future__ import annotations

import argparse
import json
import os

import jax
import jax.numpy as jnp

from jaxrl import parse, validate
from jaxrl.perf.platform import compiler_options
from jaxrl.run.profile import round_robin_seconds
from jaxrl.trainer.loop import make_train

# Rainbow's CartPole preset, spelled out so that C51 runs at the same settings
COMMON = ["env=cartpole", "algo.n_step=3", "algo.dueling=true", "num_evals=1", "progress=false"]
VARIANTS = {
    "c51 (uniform, ε-greedy)": ["algo=c51", "algo.atoms=51", "algo.v_min=0", "algo.v_max=100"],
    "rainbow algo.replay=uniform": ["algo=rainbow", "algo.replay=uniform"],
    "rainbow algo.noisy=false": ["algo=rainbow", "algo.noisy=false", "algo.eps_start=1", "algo.eps_end=0.05"],
    "rainbow": ["algo=rainbow"],
}


def measure(seeds: int, steps: int, repeats: int) -> list[dict]:
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
    programs, trainers = {}, {}
    for name, settings in VARIANTS.items():
        config = validate(parse([*COMMON, *settings, f"seeds={seeds}", f"total_timesteps={steps}"]))
        trainer = make_train(config)
        fn = jax.jit(jax.vmap(trainer.train, in_axes=(0, None)))
        programs[name] = fn.lower(keys, trainer.hparams).compile(compiler_options())
        trainers[name] = trainer
    calls = [(programs[n], (keys, trainers[n].hparams)) for n in VARIANTS]
    seconds = round_robin_seconds(calls, repeats)
    rows, base = [], None
    for name, s in zip(VARIANTS, seconds, strict=True):
        rate = trainers[name].total_env_steps * seeds / s
        base = base or rate
        rows.append({"variant": name, "seeds": seeds, "env_steps_per_s": round(rate), "vs_c51": round(rate / base, 3)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args()
    if min(args.seeds) < 1 or args.steps < 6000 or args.repeats < 1:
        parser.exit(2, "rainbow_replay.py: --seeds ≥ 1, --steps ≥ 6000 (the warm-up is 5000), --repeats ≥ 1\n")
    print(f"{jax.devices()[0].device_kind}, {os.cpu_count()} cores; {args.steps} env steps per seed")
    rows = [row for seeds in args.seeds for row in measure(seeds, args.steps, args.repeats)]
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
