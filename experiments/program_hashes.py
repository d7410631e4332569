"""Hashes of the compiled programs of every built-in algorithm on its presets.

A refactoring that must not change what runs ("no behaviour change") is checked
by running this before and after it: equal hashes mean the lowered StableHLO of
the seed-batched ``init`` and chunk programs (and of the driver's carry program,
PBT included) is the same text, up to the module's name.

    python experiments/program_hashes.py > before.json
    (change the code)
    python experiments/program_hashes.py --compare before.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys

import jax
import numpy as np

CASES = {
    "ppo-cartpole": ["env=cartpole", "algo=ppo"],
    "ppo-cartpole-perf-off": ["env=cartpole", "algo=ppo", "perf=off"],
    "ppo-pendulum": ["env=pendulum", "algo=ppo"],
    "ppo-gru-pomdp": ["env=cartpole-pomdp", "algo=ppo"],
    "ppo-cnn-breakout": ["env=Breakout-MinAtar", "algo=ppo", "num_envs=8"],
    "a2c-cartpole": ["env=cartpole", "algo=a2c"],
    "reinforce-cartpole": ["env=cartpole", "algo=reinforce"],
    "pqn-cartpole": ["env=cartpole", "algo=pqn"],
    "dqn-cartpole": ["env=cartpole", "algo=dqn"],
    "c51-cartpole": ["env=cartpole", "algo=c51"],
    "qrdqn-cartpole": ["env=cartpole", "algo=qrdqn"],
    "iqn-cartpole": ["env=cartpole", "algo=iqn"],
    "rainbow-cartpole": ["env=cartpole", "algo=rainbow"],
    "sac-pendulum": ["env=pendulum", "algo=sac"],
    "td3-pendulum": ["env=pendulum", "algo=td3"],
    "td3-mcc": ["env=mountaincar-continuous", "algo=td3"],
    "ppo-pbt": ["env=cartpole", "algo=ppo", "pbt.population=4", "pbt.interval=5"],
    "ppo-sets": ["env=cartpole", "algo=ppo", 'eval.sets="nominal; long: length=1.5,2"'],
}
MEMBERS = 2


def _digest(lowered) -> str:
    text = lowered.as_text()
    text = re.sub(r"module @[\w.]+", "module @m", text, count=1)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _lowered(argv: list[str]) -> dict[str, object]:
    """The run's programs for ``argv`` at ``MEMBERS`` seeds: its init, advance
    (a segment of updates) and close (the chunk's evaluation) programs."""
    import numpy as np

    from jaxrl.run import program
    from jaxrl.run.overrides import resolve
    from jaxrl.run.spec import prepare

    spec = prepare(resolve([*argv, f"seeds={MEMBERS}"]), "/nonexistent", layout=False)
    built = program.build(spec)
    return {
        "init": jax.jit(built.init).lower(built.keys, spec.members.hparams),
        "advance": jax.jit(built.advance, donate_argnums=0).lower(built.abstract, np.int32(1)),
        "close": jax.jit(built.close, donate_argnums=0).lower(built.abstract),
    }


def _programs(argv: list[str]) -> dict[str, str]:
    return {name: _digest(lowered) for name, lowered in _lowered(argv).items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", help="a JSON file written by an earlier run")
    parser.add_argument("cases", nargs="*", default=list(CASES))
    args = parser.parse_args()
    out = {}
    for case in args.cases:
        out[case] = _programs(CASES[case])
        print(f"{case}: {out[case]}", file=sys.stderr, flush=True)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        differ = [(c, p) for c in out for p in out[c] if before.get(c, {}).get(p) != out[c][p]]
        for case, program in differ:
            print(f"DIFFERS: {case} {program}: {before.get(case, {}).get(program)} -> {out[case][program]}")
        print(f"{sum(len(v) for v in out.values()) - len(differ)} programs equal, {len(differ)} differ")
        return 1 if differ else 0
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    np.set_printoptions(threshold=10)
    jax.config.update("jax_platforms", "cpu")
    sys.exit(main())
