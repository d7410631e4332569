"""Side-by-side benchmarks against peers, in one process, at matched settings.

    python experiments/bench/peers.py cartpole [--seeds 1 16] [--runs 3]   # PPO vs rejax (rows of other seed counts in --out are kept)
    python experiments/bench/peers.py sac                       # SAC on Pendulum vs rejax
    python experiments/bench/peers.py dqn|iqn|pqn|td3|value     # DQN, IQN, PQN on CartPole, TD3 on Pendulum vs rejax (value: all four)
    python experiments/bench/peers.py brax                      # PPO and SAC on brax inverted_pendulum vs brax's trainers
    python experiments/bench/peers.py all

Every row times the compile (jax.jit(...).lower(...).compile()) and the run
separately (jaxrl's programs with the CPU compile options its CLI uses,
``jaxrl.perf.platform.compiler_options``; the rejax program also compiled once with
them, not run, to compare like with like), reports env-steps/s and the final return, and the ratio
jaxrl / peer. The rejax rows also time each side's one-device compile in fresh
processes, alternated, medians of ``--cold-repeats`` (``cold_compiles``): in
one process the first program compiled pays the process's first-compile
costs, and jaxrl's compiles first. One-seed rows are also run with both sides
in a process whose XLA:CPU client has one thread (``one_thread_pool``), as the
CLI sets up for a one-seed run with few envs. Both sides run the whole training as one jitted call with a
single evaluation at the end (jaxrl: ``make_train(config).train`` vmapped over
seeds — the same program the CLI chunks; peers: their own ``train``), except
brax's trainers, which are Python loops around jitted steps: their time is the
whole ``train`` call, and their steady rate is measured between two progress
callbacks. Setting differences we could not remove are listed in each result.
``--runs N`` runs each compiled rejax-row program N times in all, jaxrl's and
rejax's alternated, and reports the median run (``run_s_all`` lists them):
this machine's speed drifts within minutes (the README's noise note), and one
run per side rides on that drift.

Needs the benchmark extra: ``pip install -e '.[bench]'`` (rejax; brax for the
brax rows).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import parse, validate
from jaxrl.perf.platform import compiler_options
from jaxrl.trainer.loop import make_train

OUT = "experiments/results/bench_peers.json"

# jaxrl overrides for PureJaxRL's CartPole PPO settings (no env, no budget;
# also used by ceiling.py, learner.py and time_to_solve.py)
PUREJAXRL_CARTPOLE = [
    "num_envs=4",
    "algo.num_steps=128",
    "algo.update_epochs=4",
    "algo.num_minibatches=4",
    "algo.lr=2.5e-4",
    "algo.ent_coef=0.01",
    "algo.clip_eps=0.2",
    "algo.gamma=0.99",
    "algo.gae_lambda=0.95",
    "algo.max_grad_norm=0.5",
    "algo.clip_value=true",
]

# rejax's PPO at PureJaxRL's CartPole settings (also used by time_to_solve.py)
REJAX_PPO_CARTPOLE = {
    "num_envs": 4,
    "num_steps": 128,
    "num_epochs": 4,
    "num_minibatches": 4,
    "learning_rate": 2.5e-4,
    "max_grad_norm": 0.5,
    "ent_coef": 0.01,
    "clip_eps": 0.2,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "vf_coef": 0.5,
    "agent_kwargs": {"activation": "tanh"},
}


def _timed_jit(fn, *args, in_shardings=None, options=None):
    """``(output, compile s, first run s, rerun)``; ``rerun()`` runs the
    compiled program once more and returns its seconds."""
    t0 = time.perf_counter()
    jitted = jax.jit(fn) if in_shardings is None else jax.jit(fn, in_shardings=in_shardings)
    compiled = jitted.lower(*args).compile(options)
    compile_s = time.perf_counter() - t0

    def rerun() -> float:
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    return out, compile_s, time.perf_counter() - t0, rerun


def _runs(result: dict[str, Any], more: list[float]) -> dict[str, Any]:
    """``result`` with its run time the median of its first run and ``more``."""
    seconds = [result.pop("_first_s"), *more]
    steps = result["env_steps_per_seed"] * result.pop("_seeds")
    run_s = float(np.median(seconds))
    result.pop("_rerun")
    extra = {"run_s_all": [round(x, 2) for x in seconds]} if len(seconds) > 1 else {}
    return {**result, "run_s": round(run_s, 2), "env_steps_per_s": round(steps / run_s), **extra}


def _jaxrl_program(overrides: list[str], seeds: int) -> tuple[Any, Any, jax.Array]:
    """The trainer, its whole training vmapped over seeds, and the seeds' keys."""
    config = validate(parse([*overrides, f"seeds={seeds}", "num_evals=1", "progress=false"]))
    trainer = make_train(config)
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
    return trainer, jax.vmap(trainer.train, in_axes=(0, None)), keys


def jaxrl_run(overrides: list[str], seeds: int, shard: bool = False) -> dict[str, Any]:
    """``shard``: the seeds split over the CLI's one-XLA:CPU-device-per-core
    layout (what ``python -m jaxrl.train`` does by default); else one device."""
    trainer, fn, keys = _jaxrl_program(overrides, seeds)
    devices, shardings = jax.devices(), None
    if shard and len(devices) > 1 and seeds % len(devices) == 0:
        from jax.sharding import Mesh, NamedSharding
        from jax.sharding import PartitionSpec as P

        mesh = Mesh(np.asarray(devices), ("d",))
        shardings = (NamedSharding(mesh, P("d")), NamedSharding(mesh, P()))
        keys = jax.device_put(keys, shardings[0])
    (_, metrics), compile_s, run_s, rerun = _timed_jit(
        fn, keys, trainer.hparams, in_shardings=shardings, options=compiler_options()
    )
    final = np.asarray(metrics.eval.returns)[:, -1].mean(-1)
    steps = trainer.total_env_steps * seeds
    return {
        "compile_s": round(compile_s, 2),
        "run_s": round(run_s, 2),
        "env_steps_per_s": round(steps / run_s),
        "final_return_mean": round(float(final.mean()), 1),
        "env_steps_per_seed": trainer.total_env_steps,
        "_first_s": run_s,
        "_seeds": seeds,
        "_rerun": rerun,
    }


def _legacy(env: Any) -> Any:
    """gymnax's LegacyStepAPIWrapper (rejax's step API), minus its infinite
    recursion when rejax deep-copies it."""
    from gymnax.wrappers.compat import LegacyStepAPIWrapper

    class Legacy(LegacyStepAPIWrapper):
        def __getattr__(self, name: str) -> Any:
            if name == "_env":
                raise AttributeError(name)
            return getattr(self._env, name)

    return Legacy(env)


def make_rejax(algo_name: str, env_name: str, settings: dict[str, Any], total: int, eval_freq: int) -> Any:
    """A rejax algorithm on a gymnax env (``pip install -e '.[bench]'``)."""
    import gymnax
    from rejax import get_algo

    env, params = gymnax.make(env_name)
    return get_algo(algo_name).create(
        env=_legacy(env), env_params=params, total_timesteps=total, eval_freq=eval_freq, **settings
    )


def rejax_run(algo_name: str, env_name: str, settings: dict[str, Any], seeds: int, total: int) -> dict[str, Any]:
    algo = make_rejax(algo_name, env_name, settings, total, total)
    keys = jax.random.split(jax.random.PRNGKey(0), seeds)
    (_, evaluation), compile_s, run_s, rerun = _timed_jit(jax.vmap(algo.train), keys)
    returns = np.asarray(evaluation[1])  # [seeds, evals, episodes]
    # the peer's program compiled once more with jaxrl's CPU compile options (not run)
    t0 = time.perf_counter()
    jax.jit(jax.vmap(algo.train)).lower(keys).compile(compiler_options())
    return {
        "compile_s": round(compile_s, 2),
        "compile_s_jaxrl_options": round(time.perf_counter() - t0, 2),
        "run_s": round(run_s, 2),
        "env_steps_per_s": round(total * seeds / run_s),
        "final_return_mean": round(float(returns[:, -1].mean()), 1),
        "env_steps_per_seed": total,
        "_first_s": run_s,
        "_seeds": seeds,
        "_rerun": rerun,
    }


def _sharded_row(overrides: list[str], seeds: int, peer: dict, runs: int) -> dict[str, Any]:
    """jaxrl with the seeds over the CLI's per-core devices (when they divide)."""
    n = len(jax.devices())
    if n < 2 or seeds % n:
        return {}
    ours = jaxrl_run(overrides, seeds, shard=True)
    ours = _runs(ours, [ours["_rerun"]() for _ in range(runs - 1)])
    return {"jaxrl_sharded": ours, "sharded_throughput_ratio": _ratio(ours, peer)["throughput_ratio"]}


def _ratio(ours: dict, peer: dict) -> dict[str, float]:
    return {
        "throughput_ratio": round(ours["env_steps_per_s"] / peer["env_steps_per_s"], 2),
        "compile_ratio": round(ours["compile_s"] / peer["compile_s"], 2),
    }


def _versus_rejax(which: str, seeds_list: list[int], cold_repeats: int, runs: int) -> list[dict[str, Any]]:
    """One row per seed count: jaxrl (one device, and seeds over cores) vs rejax."""
    benchmark, ours, _, _, differences = SPECS[which]()
    rows = []
    for seeds in seeds_list:
        row = {"benchmark": benchmark, "seeds": seeds, **_pair(which, seeds, runs)}
        if cold_repeats:
            row["cold_compile"] = cold_compiles(which, seeds, cold_repeats)
        if seeds == 1:
            row["one_thread_pool"] = one_thread_pool(which, runs)
        rows.append({**row, **_sharded_row(ours, seeds, row["rejax"], runs), "differences": differences})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _pair(which: str, seeds: int, runs: int = 1) -> dict[str, Any]:
    """jaxrl's one-device run and rejax's, in this process, and their ratios;
    with ``runs`` > 1 each compiled program runs that many times in all,
    alternated (jaxrl, rejax, rejax, jaxrl, …), and the run times are medians."""
    _, ours, peer, total, _ = SPECS[which]()
    a, b = jaxrl_run(ours, seeds), rejax_run(*peer, seeds, total)
    times: dict[str, list[float]] = {"a": [], "b": []}
    for i in range(runs - 1):
        for side in "ba" if i % 2 == 0 else "ab":
            times[side].append((a if side == "a" else b)["_rerun"]())
    a, b = _runs(a, times["a"]), _runs(b, times["b"])
    return {"jaxrl": a, "rejax": b, **_ratio(a, b)}


def _child(which: str, seeds: int, *flags: str, env: dict[str, str] | None = None) -> str:
    """The last line a fresh ``peers.py`` process prints for one hidden mode."""
    cmd = [sys.executable, __file__, which, "--seeds", str(seeds), *flags]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return out.strip().splitlines()[-1]


def cold_compile(side: str, which: str, seeds: int) -> float:
    """Seconds to lower and compile one side's one-device program, in this
    process, which must not have compiled anything else of size (a fresh one)."""
    _, ours, peer, total, _ = SPECS[which]()
    if side == "jaxrl":
        trainer, fn, keys = _jaxrl_program(ours, seeds)
        args, options = (keys, trainer.hparams), compiler_options()
    else:
        fn = jax.vmap(make_rejax(*peer, total, total).train)
        args, options = (jax.random.split(jax.random.PRNGKey(0), seeds),), None
    t0 = time.perf_counter()
    jax.jit(fn).lower(*args).compile(options)
    return time.perf_counter() - t0


def cold_compiles(which: str, seeds: int, repeats: int) -> dict[str, Any]:
    """Each side's compile time in fresh processes, alternated A B B A …, medians.

    In one process the program compiled first also pays the process's
    first-compile costs (jax's and XLA's caches, the jitted helpers both
    programs share), which moved the same-process compile ratio by up to ±15 %
    with the order. A fresh process per compile is what a user's launch sees."""
    times: dict[str, list[float]] = {"jaxrl": [], "rejax": []}
    for i in range(repeats):
        for side in ("jaxrl", "rejax") if i % 2 == 0 else ("rejax", "jaxrl"):
            times[side].append(float(_child(which, seeds, "--cold-compile", side)))
    med = {side: float(np.median(t)) for side, t in times.items()}
    return {
        "jaxrl_s": round(med["jaxrl"], 2),
        "rejax_s": round(med["rejax"], 2),
        "ratio": round(med["jaxrl"] / med["rejax"], 2),
        "runs": {side: [round(x, 2) for x in t] for side, t in times.items()},
    }


def one_thread_pool(which: str, runs: int = 1) -> dict[str, Any]:
    """The one-seed row again, both sides in a fresh process whose XLA:CPU
    client has one thread (``PJRT_NPROC=1``) and one device: what ``python -m
    jaxrl.train`` sets up for a one-seed run with at most 64 envs
    (``jaxrl.perf.platform.cpu_threads_for``)."""
    flags = ("--pool-row", "--runs", str(runs))
    return json.loads(_child(which, 1, *flags, env={**os.environ, "PJRT_NPROC": "1"}))


def _cartpole_spec() -> tuple:
    """PPO CartPole at PureJaxRL's settings: 4 envs × 128 steps, 4 epochs × 4
    minibatches, 500k steps, lr 2.5e-4, 64×64 tanh networks."""
    total = 500_000
    return (
        "PPO CartPole-v1 (4 envs × 128 steps, 4 × 4 minibatches, 500k steps)",
        ["env=cartpole", *PUREJAXRL_CARTPOLE, f"total_timesteps={total}", "eval.episodes=128"],
        ("ppo", "CartPole-v1", REJAX_PPO_CARTPOLE),
        total,
        "jaxrl anneals lr linearly and clips the global gradient norm; rejax keeps lr constant and clips per element (optax.clip); 976 vs 980 updates (jaxrl rounds up to whole chunks)",
    )


# jaxrl's SAC on Pendulum at rejax's settings (also used by learner.py)
SAC_PENDULUM = [
    "env=pendulum",
    "algo=sac",
    "num_envs=1",
    "total_timesteps=20000",
    "algo.num_steps=8",
    "algo.utd=1",
    "algo.batch_size=256",
    "algo.hidden_sizes=[64,64]",
    "algo.learning_starts=1000",
    "algo.lr=3e-4",
    "algo.buffer_size=20000",
    "eval.episodes=16",
]


def _sac_spec() -> tuple:
    """SAC Pendulum: 1 env, UTD 1, batch 256, 64×64 relu networks, 20k steps."""
    peer = {
        "num_envs": 1,
        "num_epochs": 1,
        "batch_size": 256,
        "learning_rate": 3e-4,
        "buffer_size": 20_000,
        "fill_buffer": 1000,
        "gamma": 0.99,
        "polyak": 0.995,
        "hidden_layer_sizes": (64, 64),
    }
    return (
        "SAC Pendulum-v1 (1 env, UTD 1, batch 256, 64×64, 20k steps)",
        SAC_PENDULUM,
        ("sac", "Pendulum-v1", peer),
        20_000,
        "jaxrl collects 8 steps then takes 8 gradient steps (UTD 1); rejax alternates 1 and 1; log-std bounds [-5, 2] vs [-10, 2]",
    )


def _dqn_spec() -> tuple:
    """DQN CartPole at rejax's published config (configs/gymnax/cartpole.yaml):
    10 envs, 5 gradient steps per 10 env steps, batch 100, buffer 50k, 5k random
    steps, dueling swish 64×64, double DQN, target Polyak 0.98 once per 5 gradient
    steps, ε 1 → 0.05 over half the budget, 100k steps."""
    total = 100_000
    ours = [
        "env=cartpole",
        "algo=dqn",
        "num_envs=10",
        f"total_timesteps={total}",
        "algo.num_steps=1",
        "algo.utd=0.5",
        "algo.batch_size=100",
        "algo.buffer_size=50000",
        "algo.learning_starts=5000",
        "algo.dueling=true",
        "algo.activation=silu",
        "algo.loss=mse",
        "algo.lr=1e-3",
        "algo.max_grad_norm=10",
        "algo.target_update_interval=5",
        "algo.tau=0.02",
        "algo.eps_end=0.05",
        "algo.exploration_fraction=0.5",
        "eval.episodes=16",
    ]
    peer = {
        "agent": "DuelingQNetwork",
        "agent_kwargs": {"activation": "swish"},
        "num_envs": 10,
        "buffer_size": 50_000,
        "fill_buffer": 5_000,
        "batch_size": 100,
        "max_grad_norm": 10,
        "learning_rate": 1e-3,
        "num_epochs": 5,
        "polyak": 0.98,
        "eps_start": 1,
        "eps_end": 0.05,
        "exploration_fraction": 0.5,
        "gamma": 0.99,
        "ddqn": True,
    }
    return (
        "DQN CartPole-v1 (10 envs, UTD 0.5, batch 100, dueling 64×64, 100k steps)",
        ours,
        ("dqn", "CartPole-v1", peer),
        total,
        "jaxrl clips the global gradient norm, rejax per element; jaxrl bootstraps time-limit truncations, rejax treats them as terminal; rejax's loss is ½ MSE (jaxrl: MSE)",
    )


def _iqn_spec() -> tuple:
    """IQN CartPole at rejax's IQN defaults with DQN's published CartPole
    settings (``_dqn_spec``): 64 levels per item for the online and the target
    quantiles, 32 for the greedy action, swish 64×64 torso, kappa 1; a 20k-step
    budget (an IQN step costs about 64 DQN heads on a CPU)."""
    _, dqn_ours, (_, _, dqn_peer), _, _ = _dqn_spec()
    total = 20_000
    ours = [a for a in dqn_ours if not a.startswith(("algo=", "total_timesteps=", "algo.loss=", "algo.dueling="))]
    ours = [
        "algo=iqn",
        f"total_timesteps={total}",
        "algo.quantiles=64",
        "algo.act_quantiles=32",
        "algo.embedding_dim=64",
        *ours,
    ]
    peer = {k: v for k, v in dqn_peer.items() if k not in ("agent", "agent_kwargs", "ddqn")}
    peer.update(agent_kwargs={"activation": "swish"}, num_tau_samples=64, num_tau_prime_samples=64, kappa=1.0)
    return (
        "IQN CartPole-v1 (10 envs, UTD 0.5, batch 100, 64×64, 64 + 64 levels, 20k steps)",
        ours,
        ("iqn", "CartPole-v1", peer),
        total,
        "jaxrl runs the torso once per item and every level through the embedding (rejax runs the whole network once per level), "
        "bootstraps from a target network at the online network's greedy action over 32 evenly spaced levels (rejax: "
        "its online network, sampled levels); ReLU after the level product (rejax: swish); global vs per-element "
        "gradient clipping; jaxrl bootstraps time-limit truncations",
    )


def _pqn_spec() -> tuple:
    """PQN CartPole at rejax's published config: 16 envs × 128 steps, 5 epochs ×
    16 minibatches, LayerNorm 64×64, lr 3e-4, λ 0.9, ε 1 → 0.05 over half the
    budget, 524k steps."""
    total = 524_288
    ours = [
        "env=cartpole",
        "algo=pqn",
        "num_envs=16",
        f"total_timesteps={total}",
        "algo.num_steps=128",
        "algo.update_epochs=5",
        "algo.num_minibatches=16",
        "algo.hidden_sizes=[64,64]",
        "algo.lr=3e-4",
        "algo.lr_schedule=constant",
        "algo.q_lambda=0.9",
        "algo.max_grad_norm=10",
        "algo.eps_end=0.05",
        "algo.exploration_fraction=0.5",
        "eval.episodes=16",
    ]
    peer = {
        "num_envs": 16,
        "num_steps": 128,
        "num_minibatches": 16,
        "max_grad_norm": 10,
        "learning_rate": 3e-4,
        "num_epochs": 5,
        "eps_start": 1,
        "eps_end": 0.05,
        "exploration_fraction": 0.5,
        "gamma": 0.99,
        "td_lambda": 0.9,
    }
    return (
        "PQN CartPole-v1 (16 envs × 128 steps, 5 × 16 minibatches, LayerNorm 64×64, 524k steps)",
        ours,
        ("pqn", "CartPole-v1", peer),
        total,
        "jaxrl clips the global gradient norm, rejax per element; jaxrl bootstraps time-limit truncations from the final observation",
    )


def _td3_spec() -> tuple:
    """TD3 Pendulum at rejax's published config (configs/gymnax/pendulum.yaml):
    1 env, UTD 1, policy delay 2, batch 100, buffer 10k, 1k random steps, swish
    64×64, lr 1e-3, Polyak 0.95, exploration σ 0.3, observation normalization,
    10k steps."""
    total = 10_000
    ours = [
        "env=pendulum",
        "algo=td3",
        "num_envs=1",
        f"total_timesteps={total}",
        "algo.num_steps=8",
        "algo.utd=1",
        "algo.batch_size=100",
        "algo.buffer_size=10000",
        "algo.learning_starts=1000",
        "algo.hidden_sizes=[64,64]",
        "algo.activation=silu",
        "algo.lr=1e-3",
        "algo.tau=0.05",
        "algo.max_grad_norm=100",
        "algo.exploration_noise=0.3",
        "algo.normalize_obs=true",
        "eval.episodes=16",
    ]
    peer = {
        "actor_kwargs": {"activation": "swish"},
        "critic_kwargs": {"activation": "swish"},
        "num_envs": 1,
        "buffer_size": 10_000,
        "fill_buffer": 1000,
        "batch_size": 100,
        "learning_rate": 1e-3,
        "num_epochs": 1,
        "gamma": 0.99,
        "polyak": 0.95,
        "max_grad_norm": 100,
        "exploration_noise": 0.3,
        "target_noise": 0.2,
        "target_noise_clip": 0.5,
        "policy_delay": 2,
        "normalize_observations": True,
    }
    return (
        "TD3 Pendulum-v1 (1 env, UTD 1, delay 2, batch 100, 64×64, 10k steps)",
        ours,
        ("td3", "Pendulum-v1", peer),
        total,
        "jaxrl collects 8 steps then takes 8 critic steps and 4 actor steps (UTD 1, delay 2); rejax interleaves 1 and 1; global vs per-element gradient clipping",
    )


SPECS = {
    "cartpole": _cartpole_spec,
    "sac": _sac_spec,
    "dqn": _dqn_spec,
    "iqn": _iqn_spec,
    "pqn": _pqn_spec,
    "td3": _td3_spec,
}


def _brax_trainer(train_fn, total: int, **kwargs) -> dict[str, Any]:
    from brax import envs as brax_envs

    env = brax_envs.get_environment("inverted_pendulum", backend="positional")
    stamps: list[tuple[float, int, float]] = []

    def progress(step, metrics):
        stamps.append((time.perf_counter(), int(step), float(metrics.get("eval/episode_reward", np.nan))))

    t0 = time.perf_counter()
    train_fn(environment=env, num_timesteps=total, progress_fn=progress, **kwargs)
    wall = time.perf_counter() - t0
    (t_first, s_first, _), (t_last, s_last, final) = stamps[1], stamps[-1]
    steady = (s_last - s_first) / (t_last - t_first) if t_last > t_first else float("nan")
    return {
        "wall_s": round(wall, 1),
        "first_progress_s": round(stamps[0][0] - t0, 1),
        "steady_env_steps_per_s": round(steady),
        "final_return_mean": round(final, 1),
        "env_steps": s_last,
    }


def _jaxrl_brax(overrides: list[str], seeds: int = 1, evals: int = 6) -> dict[str, Any]:
    """jaxrl through the CLI's chunked driver program, timed like brax's loop."""
    from jaxrl.run import program
    from jaxrl.run.spec import prepare

    config = validate(parse([*overrides, f"seeds={seeds}", f"num_evals={evals}", "progress=false"]))
    spec = prepare(config, "/unused", layout=False)
    trainer = spec.trainer
    t0 = time.perf_counter()
    built = program.build(spec)
    carry = jax.jit(built.init)(built.keys, spec.members.hparams)
    compiled = jax.jit(built.step).lower(built.abstract).compile(compiler_options())
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(trainer.num_chunks):
        carry, metrics, _ = compiled(carry)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter())
    steady = (
        (trainer.num_chunks - 1) * trainer.chunk_updates * trainer.steps_per_update * seeds / (times[-1] - times[0])
    )
    return {
        "wall_s": round(times[-1] - t0, 1),
        "compile_s": round(compile_s, 1),
        "steady_env_steps_per_s": round(steady),
        "final_return_mean": round(float(np.asarray(metrics.eval.returns).mean()), 1),
        "env_steps": trainer.total_env_steps,
    }


def _brax_row(benchmark: str, ours: dict, peer: dict, differences: str) -> dict[str, Any]:
    row = {
        "benchmark": benchmark,
        "jaxrl": ours,
        "brax": peer,
        "throughput_ratio": round(ours["steady_env_steps_per_s"] / peer["steady_env_steps_per_s"], 2),
        "wall_ratio": round(ours["wall_s"] / peer["wall_s"], 2),
        "differences": differences,
    }
    print(json.dumps(row), flush=True)
    return row


def brax() -> list[dict[str, Any]]:
    from brax.training.agents.ppo import train as brax_ppo
    from brax.training.agents.sac import networks as sac_networks
    from brax.training.agents.sac import train as brax_sac

    rows = []
    total = 300_000
    ours = _jaxrl_brax(["env=inverted_pendulum", f"total_timesteps={total}", "algo.clip_eps=0.2"])
    peer = _brax_trainer(
        brax_ppo.train,
        total,
        num_envs=64,
        episode_length=1000,
        unroll_length=32,
        batch_size=8,
        num_minibatches=8,
        num_updates_per_batch=4,
        learning_rate=3e-4,
        entropy_cost=0.01,
        discounting=0.97,
        normalize_observations=True,
        reward_scaling=1.0,
        clipping_epsilon=0.2,
        gae_lambda=0.95,
        num_evals=6,
        seed=0,
    )
    rows.append(
        _brax_row(
            "PPO brax inverted_pendulum (positional, 64 envs × 32 steps, 4 × 8 minibatches, 300k steps)",
            ours,
            peer,
            "jaxrl's preset also normalizes value targets and anneals lr; brax bootstraps truncations only with bootstrap_on_timeout",
        )
    )
    total = 30_000
    ours = _jaxrl_brax(["env=inverted_pendulum", "algo=sac", f"total_timesteps={total}"])
    peer = _brax_trainer(
        brax_sac.train,
        total,
        num_envs=8,
        episode_length=1000,
        learning_rate=1e-3,
        discounting=0.99,
        batch_size=256,
        grad_updates_per_step=8,
        min_replay_size=1000,
        max_replay_size=100_000,
        num_evals=6,
        seed=0,
        network_factory=functools.partial(sac_networks.make_sac_networks, hidden_layer_sizes=(64, 64)),
        deterministic_eval=True,
    )
    rows.append(
        _brax_row(
            "SAC brax inverted_pendulum (8 envs, UTD 1, batch 256, 64×64, 30k steps)",
            ours,
            peer,
            "jaxrl collects 8 steps per env then takes 64 gradient steps; brax alternates one env step and 8 gradient steps",
        )
    )
    return rows


def _merge(old: list[dict] | None, new: list[dict]) -> list[dict]:
    """``new``'s rows, plus the saved rows of seed counts this run did not measure."""
    measured = {row["seeds"] for row in new}
    kept = [row for row in old or [] if row.get("seeds") not in measured]
    return sorted(kept + new, key=lambda row: row["seeds"])


def main() -> None:
    from jaxrl.perf import platform as jaxrl_platform

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("which", choices=["cartpole", "sac", "dqn", "iqn", "pqn", "td3", "value", "brax", "all"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--out", default=OUT)
    parser.add_argument(
        "--cold-repeats", type=int, default=3, help="fresh-process compiles per side and row (0: skip them)"
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="timed runs of each compiled program, jaxrl's and rejax's alternated; medians (default 1)",
    )
    parser.add_argument("--cold-compile", choices=["jaxrl", "rejax"], help=argparse.SUPPRESS)
    parser.add_argument("--pool-row", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for flag, value, least in (("--runs", args.runs, 1), ("--cold-repeats", args.cold_repeats, 0)):
        if value < least:
            print(f"peers.py: {flag} is {value}, must be ≥ {least}; e.g. {flag} 3", file=sys.stderr)
            raise SystemExit(2)
    if not args.pool_row:  # the CLI keeps one device when it sets one thread
        jaxrl_platform.split_cpu_devices()  # the CLI's layout, for the jaxrl_sharded rows (before jax starts)
    if args.cold_compile:  # one measurement of cold_compiles, in its own process
        print(cold_compile(args.cold_compile, args.which, args.seeds[0]))
        return
    if args.pool_row:  # one_thread_pool's process
        print(json.dumps(_pair(args.which, 1, args.runs)))
        return
    results = json.load(open(args.out)) if os.path.exists(args.out) else {}
    results["machine"] = {
        "cpu": platform.machine(),
        "cores": os.cpu_count(),
        "backend": jax.default_backend(),
        "jax": jax.__version__,
    }
    if args.which in ("cartpole", "all"):
        results["cartpole_ppo"] = _merge(
            results.get("cartpole_ppo"), _versus_rejax("cartpole", args.seeds, args.cold_repeats, args.runs)
        )
    if args.which in ("sac", "all"):
        results["pendulum_sac"] = _merge(
            results.get("pendulum_sac"), _versus_rejax("sac", args.seeds, args.cold_repeats, args.runs)
        )
    for which, key in (
        ("dqn", "cartpole_dqn"),
        ("iqn", "cartpole_iqn"),
        ("pqn", "cartpole_pqn"),
        ("td3", "pendulum_td3"),
    ):
        if args.which in (which, "value", "all"):
            results[key] = _merge(results.get(key), _versus_rejax(which, args.seeds, args.cold_repeats, args.runs))
    if args.which in ("brax", "all"):
        results["brax_inverted_pendulum"] = brax()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
