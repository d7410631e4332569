"""The PPO learner's cost at PureJaxRL's CartPole settings, and what LLVM -O1
and the Dense layers' transposed backward do.

    python experiments/bench/learner.py [--skip-opt-levels] [--skip-backward] [--skip-optimizers]
                                        [--out experiments/results/bench_learner.json]

1. ``ppo.learn`` alone (4 epochs × 4 minibatches of 128 on a real rollout, one
   seed): median ms per update, and the XLA kernels (fusions + dots) in one
   minibatch step of the compiled program — on XLA:CPU each is dispatched on
   its own, so fewer, larger kernels is what makes small networks faster.
2. The whole training program (``make_train(...).train``, 500k steps per
   seed; 1 and 16 seeds, one device) compiled with XLA's default LLVM level and
   with jaxrl's ``-O1`` (``jaxrl.perf.platform.compiler_options``) in the same
   process: compile seconds and env-steps/s of each.

3. The whole training program of PPO CartPole (1 and 16 seeds) and of SAC
   Pendulum at ``peers.py``'s settings (1 and 4 seeds), each compiled twice in
   the same process: with the Dense layers' kernel gradient as ``xᵀ @ g``
   (``jaxrl.perf.dense.dense_dot_general``, the default) and with
   ``lax.dot_general``'s own backward; the runs alternate, 3 each, and the
   median env-steps/s of each and their ratio are printed.

4. The PPO learner alone (as in 1) at 1 and 16 seeds (vmapped) under each
   optimizer, compiled in the same process and timed round-robin: the
   hand-written raveled clip + Adam jaxrl used before its optimizer became an
   optax chain (``handwritten_apply`` below, the code as it was), the default
   ``jaxrl.rl.optim`` chain over one raveled vector (``optax.flatten``), and the
   same chain per parameter leaf; ratios against the hand-written one.

Only public pieces are used, so parts 1–2 also run against older jaxrl
checkouts (``PYTHONPATH=OLD_CHECKOUT``; part 2 needs ``compiler_options``,
part 3 ``jaxrl.perf.dense.make_dot_general`` and ``jaxrl.run.profile.round_robin_seconds``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree
from peers import PUREJAXRL_CARTPOLE, SAC_PENDULUM  # experiments/bench/peers.py

from jaxrl import parse, validate
from jaxrl.algos import ppo
from jaxrl.perf.platform import compiler_options
from jaxrl.rl import optim
from jaxrl.run.profile import median_seconds, round_robin_seconds
from jaxrl.trainer.loop import make_train

SETTINGS = ["env=cartpole", *PUREJAXRL_CARTPOLE, "total_timesteps=500000", "eval.episodes=128"]


def kernels_per_minibatch_step(hlo: str) -> int:
    """Fusions + dots in the compiled while-loop body with the most dots (the minibatch step)."""
    bodies, current = {}, None
    for line in hlo.splitlines():
        header = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if header and not line.startswith(" "):
            current = header.group(1)
            bodies[current] = []
        elif line.startswith("}"):
            current = None
        elif current:
            bodies[current].append(line)
    loop_bodies = set(re.findall(r"body=%?([\w.\-]+)", hlo))

    def count(name: str, op: str) -> int:
        return sum(1 for line in bodies.get(name, []) if re.search(rf"= \S+ {op}\(", line))

    step = max(loop_bodies, key=lambda name: count(name, "dot"))
    return count(step, "fusion") + count(step, "dot")


def learner() -> dict:
    config = validate(parse([*SETTINGS, "seeds=1"]))
    trainer = make_train(config)
    agent, hp, algo = trainer.agent, trainer.hparams, config.algo
    state = agent.init(jax.random.key(0), hp)
    _, _, prepared = jax.jit(lambda s: agent.phases[1][1](s, hp))(state)

    def learn(params, opt_state, batch, key):
        return ppo.learn(params, opt_state, jnp.float32(2.5e-4), batch, key, hp, agent.network, algo)

    args = (state.params, state.opt_state, prepared.batch, jax.random.key(1))
    compiled = jax.jit(learn).lower(*args).compile()
    return {
        "learner_ms_per_update": round(median_seconds(compiled, *args, repeats=200) * 1e3, 3),
        "kernels_per_minibatch_step": kernels_per_minibatch_step(compiled.as_text()),
    }


def opt_levels(seeds: int) -> list[dict]:
    from jaxrl.perf.platform import compiler_options

    config = validate(parse([*SETTINGS, f"seeds={seeds}", "num_evals=1", "progress=false"]))
    trainer = make_train(config)
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
    rows = []
    for name, options in (("XLA default", None), ("jaxrl -O1", compiler_options())):
        t0 = time.perf_counter()
        compiled = jax.jit(jax.vmap(trainer.train, in_axes=(0, None))).lower(keys, trainer.hparams).compile(options)
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(keys, trainer.hparams))
        run_s = time.perf_counter() - t0
        rows.append(
            {
                "seeds": seeds,
                "llvm": name,
                "compile_s": round(compile_s, 2),
                "env_steps_per_s": round(trainer.total_env_steps * seeds / run_s),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def backward_layout(name: str, settings: list[str], seeds: int, repeats: int = 3) -> dict:
    from jaxrl.nets import networks
    from jaxrl.perf import dense as dense_kernels
    from jaxrl.perf.platform import compiler_options

    config = validate(parse([*settings, f"seeds={seeds}", "num_evals=1", "progress=false"]))
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
    programs = {}
    for transposed in (True, False):
        # the networks' product, swapped for this A/B while tracing
        networks.dense_dot_general = dense_kernels.make_dot_general(transposed)
        trainer = make_train(config)
        fn = jax.jit(jax.vmap(trainer.train, in_axes=(0, None)))
        programs[transposed] = fn.lower(keys, trainer.hparams).compile(compiler_options())
    networks.dense_dot_general = dense_kernels.dense_dot_general
    calls = [(compiled, (keys, trainer.hparams)) for compiled in programs.values()]
    seconds = round_robin_seconds(calls, repeats)
    rates = {t: trainer.total_env_steps * seeds / s for t, s in zip(programs, seconds, strict=True)}
    row = {
        "program": name,
        "seeds": seeds,
        "env_steps_per_s_transposed": round(rates[True]),
        "env_steps_per_s_lax": round(rates[False]),
    }
    row["ratio"] = round(row["env_steps_per_s_transposed"] / row["env_steps_per_s_lax"], 3)
    print(json.dumps(row), flush=True)
    return row


def handwritten_init(params, eps=1e-8, optimizer=None):
    """jaxrl's optimizer state before the optax seam: Adam moments over the raveled parameters."""
    return optax.scale_by_adam(eps=eps).init(ravel_pytree(params)[0])


def handwritten_apply(params, grads, opt_state, lr, max_norm, eps=1e-8, optimizer=None):
    """jaxrl's optimizer step before the optax seam: ravel, clip, Adam, ``p − lr · u`` per leaf."""
    flat, unravel = ravel_pytree(grads)
    norm = jnp.sqrt(jnp.sum(jnp.square(flat)))
    flat = flat * jnp.minimum(1.0, max_norm / jnp.maximum(norm, 1e-12))
    updates, opt_state = optax.scale_by_adam(eps=eps).update(flat, opt_state)
    params = jax.tree.map(lambda p, u: p - lr * u, params, unravel(updates))
    return params, opt_state, norm


def per_leaf(lr):
    return optax.chain(optax.scale_by_adam(eps=ppo.ADAM_EPS), optax.scale_by_learning_rate(lr))


def optimizers(seeds_list=(1, 16), repeats: int = 51) -> list[dict]:
    rows = []
    for seeds in seeds_list:
        config = validate(parse([*SETTINGS, "seeds=1"]))
        trainer = make_train(config)
        agent, hp, algo = trainer.agent, trainer.hparams, config.algo
        keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
        states = jax.jit(jax.vmap(agent.init, (0, None)))(keys, hp)
        _, _, prepared = jax.jit(jax.vmap(lambda s: agent.phases[1][1](s, hp)))(states)
        learn_keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32) + 1000)
        programs = {}
        saved = optim.apply, optim.init
        for name, spec in (
            ("hand-written", "before"),
            ("optax chain, flattened (default)", None),
            ("optax chain, per leaf", per_leaf),
        ):
            optimizer = optim.make(None if spec == "before" else spec, ppo.ADAM_EPS)
            if spec == "before":
                optim.apply, optim.init = handwritten_apply, handwritten_init
            try:
                opt_state = jax.vmap(lambda p, o=optimizer: optim.init(p, ppo.ADAM_EPS, o))(states.params)

                def learn(params, opt_state, batch, key, o=optimizer):
                    return ppo.learn(params, opt_state, jnp.float32(2.5e-4), batch, key, hp, agent.network, algo, o)

                args = (states.params, opt_state, prepared.batch, learn_keys)
                programs[name] = (jax.jit(jax.vmap(learn)).lower(*args).compile(compiler_options()), args)
            finally:
                optim.apply, optim.init = saved
        seconds = round_robin_seconds(list(programs.values()), repeats)
        base = seconds[0]
        for name, sec in zip(programs, seconds, strict=True):
            rows.append(
                {
                    "seeds": seeds,
                    "optimizer": name,
                    "learner_ms_per_update": round(sec * 1e3, 3),
                    "speed_vs_handwritten": round(base / sec, 3),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-opt-levels", action="store_true")
    parser.add_argument("--skip-backward", action="store_true")
    parser.add_argument("--skip-optimizers", action="store_true")
    parser.add_argument("--out", default="experiments/results/bench_learner.json")
    args = parser.parse_args()
    result = {"jax": jax.__version__, "backend": jax.default_backend(), "learner": learner()}
    print(json.dumps(result["learner"]), flush=True)
    if not args.skip_opt_levels:
        result["opt_levels"] = opt_levels(1) + opt_levels(16)
    if not args.skip_backward:
        cartpole = ["env=cartpole", *PUREJAXRL_CARTPOLE, "total_timesteps=500000", "eval.episodes=16"]
        result["backward_layout"] = [
            backward_layout("PPO CartPole", cartpole, 1),
            backward_layout("PPO CartPole", cartpole, 16),
            backward_layout("SAC Pendulum", SAC_PENDULUM, 1),
            backward_layout("SAC Pendulum", SAC_PENDULUM, 4),
        ]
    if not args.skip_optimizers:
        result["optimizers"] = optimizers()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
