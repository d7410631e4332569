"""Buffer donation: the chunk program with its state donated (what
``python -m jaxrl.train`` compiles) against the same program without.

Donating the training state lets XLA write the chunk's new state into the old
one's buffers. Without it the caller's state must stay valid, so the program
allocates a second copy of every state leaf — for SAC that includes the whole
replay buffer — and copies into it. Figures per benchmark, both programs
compiled in one process, their chunk calls alternated (medians of ``--runs``):

- XLA's own memory analysis of each compiled program: argument, output,
  aliased (donated and reused) and temporary bytes, and the peak they imply
  (arguments + outputs − aliased + temporaries);
- milliseconds per chunk call.

    python experiments/bench/donation.py [--runs 7]

Writes ``experiments/results/bench_donation.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, NoReturn

import jax
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

from jaxrl import parse, validate  # noqa: E402
from jaxrl.perf.platform import compiler_options  # noqa: E402
from jaxrl.trainer.loop import make_batched, make_train, seed_keys  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "results", "bench_donation.json")

BENCHMARKS = {
    # PPO: a small state (parameters, Adam moments, env states)
    "PPO CartPole, PureJaxRL's settings, 16 seeds": [
        "env=cartpole",
        "seeds=16",
        "num_envs=4",
        "algo.num_steps=128",
        "algo.update_epochs=4",
        "algo.num_minibatches=4",
        "total_timesteps=500000",
        "num_evals=10",
    ],
    # SAC: the state carries the replay buffer
    "SAC Pendulum, 100k-transition buffer, 4 seeds": [
        "env=pendulum",
        "algo=sac",
        "seeds=4",
        "num_envs=1",
        "algo.buffer_size=100000",
        "algo.batch_size=256",
        "algo.hidden_sizes=[64,64]",
        "algo.learning_starts=1000",
        "total_timesteps=20000",
        "num_evals=10",
    ],
}


def _memory(compiled: Any) -> dict[str, float]:
    m = compiled.memory_analysis()
    mib = 1 << 20
    out = {
        "argument_mib": m.argument_size_in_bytes / mib,
        "output_mib": m.output_size_in_bytes / mib,
        "aliased_mib": m.alias_size_in_bytes / mib,
        "temp_mib": m.temp_size_in_bytes / mib,
    }
    out["peak_mib"] = out["argument_mib"] + out["output_mib"] - out["aliased_mib"] + out["temp_mib"]
    return {k: round(v, 2) for k, v in out.items()}


def _nbytes(x: jax.ShapeDtypeStruct) -> int:
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return int(np.prod(x.shape)) * 8  # threefry key data: two uint32 words
    return int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize


def measure(overrides: list[str], runs: int) -> dict[str, Any]:
    config = validate(parse([*overrides, "progress=false"]))
    trainer = make_train(config)
    keys = seed_keys(config)
    init_b, chunk_b = make_batched(trainer)
    init_c = jax.jit(init_b).lower(keys, trainer.hparams).compile(compiler_options())
    abstract = jax.eval_shape(init_b, keys, trainer.hparams)
    programs = {
        donate: jax.jit(chunk_b, donate_argnums=(0,) if donate else ())
        .lower(abstract, trainer.hparams)
        # compiled with jaxrl's CPU options, as the CLI does
        .compile(compiler_options())
        for donate in (True, False)
    }
    states = {donate: init_c(keys, trainer.hparams) for donate in programs}
    for donate, c in programs.items():  # warm-up call each
        states[donate] = jax.block_until_ready(c(states[donate], trainer.hparams)[0])
    times: dict[bool, list[float]] = {True: [], False: []}
    order = [True, False]
    for r in range(runs):
        for donate in order if r % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            states[donate] = jax.block_until_ready(programs[donate](states[donate], trainer.hparams)[0])
            times[donate].append(time.perf_counter() - t0)
    state_mib = sum(_nbytes(x) for x in jax.tree.leaves(abstract)) / (1 << 20)
    return {
        "state_mib": round(state_mib, 2),
        "chunk_env_steps": trainer.chunk_updates * trainer.steps_per_update * config.seeds,
        "donated": {**_memory(programs[True]), "ms_per_chunk": round(1e3 * float(np.median(times[True])), 1)},
        "not_donated": {**_memory(programs[False]), "ms_per_chunk": round(1e3 * float(np.median(times[False])), 1)},
    }


def _refuse(message: str) -> NoReturn:
    print(f"donation.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed chunk calls per program, alternated; medians")
    parser.error = lambda message: _refuse(f"{message}; see --help")  # one line, exit 2, no usage block
    args = parser.parse_args()
    if args.runs < 1:
        _refuse(f"--runs is {args.runs}, must be ≥ 1; e.g. --runs 7")
    results = {}
    for name, overrides in BENCHMARKS.items():
        r = measure(overrides, args.runs)
        results[name] = r
        d, n = r["donated"], r["not_donated"]
        print(
            f"{name}: state {r['state_mib']:.1f} MiB · peak {d['peak_mib']:.1f} MiB donated vs "
            f"{n['peak_mib']:.1f} MiB not (aliased {d['aliased_mib']:.1f} vs {n['aliased_mib']:.1f}) · "
            f"{d['ms_per_chunk']:.1f} vs {n['ms_per_chunk']:.1f} ms per chunk",
            flush=True,
        )
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "w") as f:
        json.dump({"jax": jax.__version__, "backend": jax.default_backend(), "results": results}, f, indent=2)
    print(f"wrote {os.path.relpath(RESULTS)}")


if __name__ == "__main__":
    main()
