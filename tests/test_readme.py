"""The documented commands, run the way a user runs them.

Every command of the README and of the documentation site's pages (``docs/``:
every ```bash block line and every inline ``python -m jaxrl.…`` span, see
:func:`readme_commands`) runs here (or in the module its entry in
:data:`COMMANDS` names) as a subprocess in the CLI's default device layout: no ``JAXRL_CPU_DEVICES``,
``JAXRL_CPU_THREADS`` or ``PJRT_NPROC`` pin, so on a 2-core machine the CLI
splits the CPU into 2 XLA:CPU devices as it does for users. Budgets are
shrunk by overrides only (``total_timesteps``, ``num_evals``, counts of
envs, samples and episodes); the main command runs at its full budget.
``test_every_readme_command_is_run_here`` fails when the docs gain,
lose or change a command that is not in :data:`COMMANDS` (or, for the
measurement recipes and cluster set-ups the docs only describe, in
:data:`DESCRIBED`). The commands only ``docs/cluster.md`` shows are
tests/test_launchers.py's (``test_every_cluster_command_is_run_there``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import (
    EXPORTED,
    EXPORTED_RECURRENT,
    LEARNING_TIER,
    REPO,
    check_train_run,
    python_with_only,
    run,
    user_env,
)

README = REPO / "README.md"
DOCS = REPO / "docs"
CLUSTER_PAGE = DOCS / "cluster.md"  # tests/test_launchers.py runs its commands

MAIN = "python -m jaxrl.train env=cartpole seeds=16"
PERF_OFF = "python -m jaxrl.train env=cartpole seeds=16 perf=off"
POMDP_GRU = "python -m jaxrl.train env=cartpole-pomdp seeds=16"
POMDP_MLP = "python -m jaxrl.train env=cartpole-pomdp algo.network=mlp seeds=16"
GEN_SETS = "nominal; long: length=1.5,2,2.5; short: length=0.1,0.2"
GEN_NOMINAL = f'python -m jaxrl.train env=cartpole seeds=16 eval.sets="{GEN_SETS}"'
GEN_RANDOMIZED = (
    f'python -m jaxrl.train env=cartpole seeds=16 env.randomize="length=uniform(0.25,1)" eval.sets="{GEN_SETS}"'
)
GEN_REPORT = "python -m jaxrl.report NOMINAL_RUN RANDOMIZED_RUN set=long"
GEN_EVALUATE = (
    'python -m jaxrl.evaluate RUN_DIR eval.sets="train; heavy: masspole=0.5,1; wide: length=uniform(0.25,2.5)"'
)
GEN_PENDULUM = (
    'python -m jaxrl.train env=pendulum algo=td3 seeds=16 env.randomize="l=uniform(0.7,1.6)" '
    'eval.sets="nominal; long: l=1.3,1.6"'
)
# The env suites' presets (tests/test_suites.py runs them at SUITE_BUDGETS).
SUITES_INSTALL = "pip install -e '.[craftax,jumanji,navix,xminigrid,playground]'"
SUITE_RUNS = {
    "navix": "python -m jaxrl.train env=navix:Navix-DoorKey-5x5-v0 seeds=4",
    "xminigrid": "python -m jaxrl.train env=xminigrid:MiniGrid-DoorKey-5x5 seeds=4",
    "jumanji": "python -m jaxrl.train env=jumanji:Snake-v1 seeds=4",
    "craftax": "python -m jaxrl.train env=craftax:Craftax-Classic-Symbolic-v1 seeds=4",
    "playground": "python -m jaxrl.train env=playground:CartpoleBalance seeds=4",
}
SUITE_BUDGETS = {
    "navix": {"total_timesteps": "2048", "num_evals": "1", "eval.episodes": "2"},
    "xminigrid": {"total_timesteps": "2048", "num_evals": "1", "eval.episodes": "2"},
    "jumanji": {"total_timesteps": "2048", "num_evals": "1", "eval.episodes": "2", "eval.max_steps": "200"},
    "craftax": {"total_timesteps": "8192", "num_evals": "1", "eval.episodes": "2", "eval.max_steps": "200"},
    "playground": {"total_timesteps": "2048", "num_evals": "1", "eval.episodes": "2", "env.episode_length": "100"},
}

# documented command → the overrides that shrink its budget (None: run as written).
TINY_CARTPOLE = {"total_timesteps": "8192", "num_evals": "2", "eval.episodes": "4"}
COMMANDS: dict[str, dict[str, str] | None] = {
    "make train": None,  # = MAIN, checked against the Makefile
    "make test": None,  # the suite this module is part of
    "make docs": None,  # tests/test_docs.py builds the site with its recipe (checked against the Makefile)
    MAIN: None,  # the main command, at its full budget
    "python -m jaxrl.train env=acrobot seeds=8 algo.lr=1e-3 total_timesteps=2e5": {
        "total_timesteps": "16384",
        "num_evals": "2",
        "eval.episodes": "2",
    },
    "python -m jaxrl.evaluate RUN_DIR": None,
    "python -m jaxrl.evaluate RUN_DIR episodes=100 seed=3 deterministic=false": None,
    "python -m jaxrl.evaluate RUN_DIR seed=0 render=true": None,
    "python -m jaxrl.export RUN_DIR seed=3": None,
    "python -m jaxrl.train env=cartpole logger=tensorboard": TINY_CARTPOLE,
    "python -m jaxrl.train --help": None,
    PERF_OFF: {"seeds": "4"},  # the preset at its full budget with the plain flax/JAX path
    # the lineage at CI budgets where they learn (LEARNS below)
    "python -m jaxrl.train env=cartpole algo=reinforce seeds=16": {
        "total_timesteps": "200000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=cartpole algo=a2c seeds=16": {
        "total_timesteps": "100000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=cartpole algo=reinforce algo.baseline=false seeds=16": {
        "total_timesteps": "16000",
        "num_evals": "1",
        "eval.episodes": "2",
    },
    "python -m jaxrl.sweep env=cartpole seeds=16 algo.lr=1e-3,3e-3,5e-3 algo.ent_coef=0,0.01": TINY_CARTPOLE,
    "python -m jaxrl.sweep env=cartpole seeds=8 sweep.samples=64 algo.lr='tag(log,interval(1e-4,1e-2))' "
    "algo.ent_coef='interval(0,0.02)' algo.clip_eps=0.1,0.2": {**TINY_CARTPOLE, "sweep.samples": "3"},
    "python -m jaxrl.report runs/sweep-CartPole-v1-ppo-… runs/CartPole-v1-ppo-…": None,
    "python -m jaxrl.train env=cartpole pbt.population=16 pbt.interval=20 pbt.hparams=[lr,ent_coef,clip_eps]": {
        "total_timesteps": "12288",
        "num_evals": "2",
        "eval.episodes": "2",
    },
    'python -m jaxrl.train env=cartpole seeds=16 eval.perturb="length=0.25,0.5,1.0 gravity=9.8,12"': TINY_CARTPOLE,
    # generalization (tests/test_eval_sets.py)
    GEN_NOMINAL: TINY_CARTPOLE,
    GEN_RANDOMIZED: TINY_CARTPOLE,
    GEN_EVALUATE: None,
    GEN_REPORT: None,
    GEN_PENDULUM: {
        "seeds": "4",
        "total_timesteps": "1536",
        "algo.learning_starts": "1024",
        "num_evals": "2",
        "eval.episodes": "2",
    },
    # SAC's and brax PPO's CI learning budgets (LEARNS below)
    "python -m jaxrl.train env=pendulum algo=sac seeds=4": {
        "total_timesteps": "10000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=pendulum seeds=4": {
        "total_timesteps": "8192",
        "num_evals": "2",
        "eval.episodes": "2",
        "algo.update_epochs": "2",
    },
    "pip install -e '.[brax]'": None,  # the dev extras `make test` installs include brax
    "python -m jaxrl.train env=inverted_pendulum seeds=2": {
        "total_timesteps": "120000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    # IMPALA (tests/test_impala.py): 4 seeds, 300k env steps (the preset's bar: ≥ 450 within 2M)
    "python -m jaxrl.train env=cartpole algo=impala seeds=16": {
        "seeds": "4",
        "total_timesteps": "300000",
        "num_evals": "2",
        "eval.episodes": "8",
    },
    # host envs through the actor–learner pipeline (tests/test_host_envs.py)
    "pip install -e '.[gymnasium]'": None,  # the dev extras `make test` installs include gymnasium
    "python -m jaxrl.train env=gymnasium:CartPole-v1 seeds=4": {
        "total_timesteps": "20000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    # a sweep over a host env: both configurations' seeds in one learner (tests/test_host_envs.py)
    "python -m jaxrl.sweep env=gymnasium:CartPole-v1 seeds=4 algo.lr=1e-3,3e-3": {
        "total_timesteps": "8192",
        "num_evals": "1",
        "eval.episodes": "2",
    },
    "pip install -e '.[mujoco]'": None,  # the dev extras `make test` installs include gymnasium[mujoco]
    # the MuJoCo preset's first update, then a short evaluation (tests/test_host_envs.py)
    "python -m jaxrl.train env=gymnasium:HalfCheetah-v5 seeds=4": {
        "total_timesteps": "2048",
        "num_evals": "1",
        "eval.episodes": "1",
        "eval.max_steps": "100",
    },
    "python -m jaxrl.train env=gymnasium:CartPole-v1 algo=pqn seeds=4": {
        "total_timesteps": "50000",
        "num_evals": "1",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=gymnasium:Pendulum-v1 algo=sac seeds=4": {
        "total_timesteps": "10000",
        "num_evals": "1",
        "eval.episodes": "4",
    },
    # TD3's fast preset through the pipeline (each env its own σ): a smoke budget, the
    # warm-up's 10 updates then learning (tests/test_host_envs.py)
    "python -m jaxrl.train env=gymnasium:Pendulum-v1 algo=td3 preset=fast seeds=4": {
        "seeds": "2",
        "total_timesteps": "2000",
        "num_evals": "1",
        "eval.episodes": "2",
    },
    "python -m jaxrl.train env=gymnasium:CartPole-v1 algo=dqn seeds=4": {
        "total_timesteps": "50000",
        "num_evals": "1",
        "eval.episodes": "4",
    },
    # env runners on Ray (tests/test_ray_runners.py): CartPole on a local Ray runtime, ≥ 475 on 3 of 4 seeds
    "pip install -e '.[ray]'": None,  # the dev extras `make test` installs include ray
    "python -m jaxrl.train env=gymnasium:CartPole-v1 seeds=4 actor=ray actor.runners=2": {
        "total_timesteps": "30000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    # envpool through the same pipeline (tests/test_envpool.py): CartPole learning, the Atari preset's smoke run
    "pip install -e '.[envpool]'": None,  # the dev extras `make test` installs include envpool
    "python -m jaxrl.train env=envpool:CartPole-v1 seeds=4": {
        "total_timesteps": "30000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=envpool:Pong-v5 seeds=1": {
        "total_timesteps": "512",
        "num_evals": "1",
        "num_envs": "4",
        "algo.num_steps": "32",
        "algo.update_epochs": "1",
        "eval.episodes": "1",
        "eval.max_steps": "100",
    },
    # the MuJoCo preset through envpool (docs/host-envs.md's figures): its first update (tests/test_envpool.py)
    "python -m jaxrl.train env=envpool:HalfCheetah-v4 seeds=4": {
        "total_timesteps": "2048",
        "num_evals": "1",
        "eval.episodes": "1",
        "eval.max_steps": "100",
    },
    "python -m jaxrl.train env=envpool:Hopper-v4 seeds=4": {
        "total_timesteps": "2048",
        "num_evals": "1",
        "eval.episodes": "1",
        "eval.max_steps": "100",
    },
    "pip install -e '.[atari]'": None,  # the dev extras `make test` installs include envpool and ale-py
    # ale-py's Atari through gymnasium: the preset's smoke run (tests/test_host_envs.py)
    "python -m jaxrl.train env=gymnasium:ALE/Breakout-v5 seeds=1": {
        "total_timesteps": "512",
        "num_evals": "1",
        "num_envs": "4",
        "algo.num_steps": "32",
        "algo.update_epochs": "1",
        "eval.episodes": "1",
        "eval.max_steps": "100",
    },
    # the env suites (tests/test_suites.py)
    SUITES_INSTALL: None,  # the dev extras `make test` installs include every suite
    **{SUITE_RUNS[name]: SUITE_BUDGETS[name] for name in SUITE_RUNS},
    # pixels and memory (MEMORY below): the recurrent preset at its full budget, the MLP at the same,
    # 4 seeds each (docs/pixels-memory.md's 16: 14 / 16 solved against 0 / 16)
    POMDP_GRU: {"seeds": "4"},
    POMDP_MLP: {"seeds": "4"},
    "python -m jaxrl.train env=memorychain seeds=8": None,
    "python -m jaxrl.train env=Breakout-MinAtar seeds=4": {
        "seeds": "2",
        "total_timesteps": "81920",
        "num_evals": "1",
        "eval.episodes": "8",
    },
    # PQN, DQN and TD3 (tests/test_value_readme.py): the CartPole PQN and Pendulum TD3 presets at their full budgets
    "python -m jaxrl.train env=cartpole algo=pqn seeds=16": {"seeds": "4"},
    "python -m jaxrl.train env=cartpole algo=dqn seeds=16": {
        "seeds": "4",
        "total_timesteps": "50000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=pendulum algo=td3 seeds=4": None,
    # C51 and QR-DQN (tests/test_value_readme.py; docs/distributional.md)
    "python -m jaxrl.train env=cartpole algo=c51 seeds=16": {
        "seeds": "2",
        "total_timesteps": "60000",
        "num_evals": "2",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=cartpole algo=qrdqn seeds=16": {"seeds": "2", "num_evals": "2", "eval.episodes": "4"},
    "python -m jaxrl.train env=cartpole algo=iqn seeds=8": {
        "seeds": "2",
        "total_timesteps": "40000",
        "num_evals": "1",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=cartpole algo=rainbow seeds=16": {
        "seeds": "2",
        "total_timesteps": "30000",
        "num_evals": "1",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=acrobot algo=rainbow seeds=8": {
        "seeds": "2",
        "total_timesteps": "30000",
        "num_evals": "1",
        "eval.episodes": "2",
    },
    "python -m jaxrl.train env=pendulum algo=td3 seeds=4 algo.critic=categorical algo.v_min=-1600 algo.v_max=0": {
        "seeds": "2",
        "total_timesteps": "8000",
        "num_evals": "1",
        "eval.episodes": "2",
    },
    "python -m jaxrl.train env=pendulum algo=sac seeds=4 algo.critic=categorical algo.v_min=-1600 algo.v_max=0": {
        "seeds": "2",
        "total_timesteps": "8000",
        "num_evals": "1",
        "eval.episodes": "2",
    },
    # the fast off-policy recipe (docs/distributional.md): TD3's CPU-scale preset, 2 seeds at 16k steps
    "python -m jaxrl.train env=pendulum algo=td3 preset=fast seeds=4": {
        "seeds": "2",
        "total_timesteps": "16000",
        "num_evals": "1",
        "eval.episodes": "4",
    },
    # FastSAC's settings at the same scale, 2 seeds at 16k steps
    "python -m jaxrl.train env=pendulum algo=sac preset=fast seeds=4": {
        "seeds": "2",
        "total_timesteps": "16000",
        "num_evals": "1",
        "eval.episodes": "4",
    },
    "python -m jaxrl.train env=acrobot algo=qrdqn seeds=8": {
        "seeds": "2",
        "total_timesteps": "10000",
        "num_evals": "1",
        "eval.episodes": "2",
    },
    # the preset's full budget on 2 seeds (the learning tier; make test: a smoke budget)
    "python -m jaxrl.train env=mountaincar algo=qrdqn seeds=16": {"seeds": "2", "num_evals": "2", "eval.episodes": "4"},
    "python -m jaxrl.train env=mountaincar algo=c51 seeds=4": {"seeds": "2", "num_evals": "2", "eval.episodes": "4"},
    "python -m jaxrl.train env=acrobot algo=pqn seeds=8": {"seeds": "4", "num_evals": "2", "eval.episodes": "4"},
    "python -m jaxrl.train env=mountaincar algo=pqn seeds=8": {"seeds": "2", "num_evals": "2", "eval.episodes": "4"},
    "python -m jaxrl.train env=mountaincar-continuous algo=td3 seeds=8": {
        "seeds": "2",
        "total_timesteps": "18000",
        "num_evals": "1",
        "eval.episodes": "2",
    },
    "python -m jaxrl.sweep env=mountaincar-continuous algo=td3 seeds=4 algo.exploration_noise=0.5,1.0 "
    "algo.noise_correlation=0,0.9,0.98": {
        "seeds": "2",
        "total_timesteps": "2000",
        "algo.learning_starts": "400",
        "num_evals": "1",
        "eval.episodes": "1",
        "eval.max_steps": "200",
    },
    "python -m jaxrl.train env=Breakout-MinAtar algo=pqn seeds=2": {
        "total_timesteps": "65536",
        "num_evals": "1",
        "eval.episodes": "8",
    },
    "python -m jaxrl.train env=inverted_pendulum algo=td3 seeds=2": {
        "total_timesteps": "1536",
        "algo.learning_starts": "1024",
        "num_evals": "1",
        "eval.episodes": "2",
        "env.episode_length": "100",
    },
    "python -m jaxrl.train env=inverted_pendulum algo=sac seeds=2": {
        "total_timesteps": "1536",
        "algo.learning_starts": "1024",
        "num_evals": "1",
        "eval.episodes": "2",
        "env.episode_length": "100",
    },
}

# The commands whose learning floors only the learning tier checks (make test-learning,
# tests.helpers.LEARNING_TIER): make test runs each at this smoke budget — the whole run as a user
# types it (training past the warm-up, evaluation, summary, checkpoints) — and the floors at the
# budgets COMMANDS gave them, kept here as LEARNING_BUDGETS. What stays at a learning budget in
# make test: the main command, PPO's variants, PQN/DQN/C51/TD3/SAC/IMPALA and the host-env learners.
_SMOKE = {"num_evals": "1", "eval.episodes": "2"}
_SMOKE_DQN = {"seeds": "2", "total_timesteps": "6000", **_SMOKE}  # the 5k warm-up, then learning
_SMOKE_PENDULUM = {"seeds": "2", "total_timesteps": "2000", **_SMOKE}  # 1k warm-up (fast: 320), then learning
CI_BUDGETS: dict[str, dict[str, str]] = {
    "python -m jaxrl.train env=Breakout-MinAtar seeds=4": {"seeds": "2", "total_timesteps": "16384", **_SMOKE},
    "python -m jaxrl.train env=inverted_pendulum seeds=2": {"total_timesteps": "8192", **_SMOKE},
    "python -m jaxrl.train env=cartpole algo=qrdqn seeds=16": _SMOKE_DQN,
    "python -m jaxrl.train env=cartpole algo=iqn seeds=8": _SMOKE_DQN,
    "python -m jaxrl.train env=cartpole algo=rainbow seeds=16": _SMOKE_DQN,
    "python -m jaxrl.train env=acrobot algo=rainbow seeds=8": _SMOKE_DQN,
    "python -m jaxrl.train env=acrobot algo=qrdqn seeds=8": {"seeds": "2", "total_timesteps": "2000", **_SMOKE},
    "python -m jaxrl.train env=mountaincar algo=qrdqn seeds=16": {"seeds": "2", "total_timesteps": "2000", **_SMOKE},
    "python -m jaxrl.train env=mountaincar algo=c51 seeds=4": {"seeds": "2", "total_timesteps": "2000", **_SMOKE},
    "python -m jaxrl.train env=acrobot algo=pqn seeds=8": {"seeds": "2", "total_timesteps": "8192", **_SMOKE},
    "python -m jaxrl.train env=mountaincar algo=pqn seeds=8": {"seeds": "2", "total_timesteps": "8192", **_SMOKE},
    "python -m jaxrl.train env=Breakout-MinAtar algo=pqn seeds=2": {"total_timesteps": "8192", **_SMOKE},
    "python -m jaxrl.train env=mountaincar-continuous algo=td3 seeds=8": _SMOKE_PENDULUM,
    "python -m jaxrl.train env=pendulum algo=td3 seeds=4 algo.critic=categorical algo.v_min=-1600 algo.v_max=0": (
        _SMOKE_PENDULUM
    ),
    "python -m jaxrl.train env=pendulum algo=sac seeds=4 algo.critic=categorical algo.v_min=-1600 algo.v_max=0": (
        _SMOKE_PENDULUM
    ),
    "python -m jaxrl.train env=pendulum algo=td3 preset=fast seeds=4": _SMOKE_PENDULUM,
    "python -m jaxrl.train env=pendulum algo=sac preset=fast seeds=4": _SMOKE_PENDULUM,
    "python -m jaxrl.train env=gymnasium:CartPole-v1 algo=dqn seeds=4": {"total_timesteps": "8000", **_SMOKE},
}
LEARNING_BUDGETS = {command: COMMANDS[command] for command in CI_BUDGETS}
if not LEARNING_TIER:
    COMMANDS.update(CI_BUDGETS)


def floors_apply(command: str) -> bool:
    """Whether ``command`` runs at a budget where its learning floor holds."""
    return LEARNING_TIER or command not in CI_BUDGETS


# What the docs show but this suite does not run as written: the commands'
# bare names in prose, the measurement recipes of the Performance and Results
# pages (experiments/ runs them), and set-ups that need hardware CI lacks.
# Each names where its behaviour is tested, or why it cannot be.
DESCRIBED: dict[str, str] = {
    "python -m jaxrl.train": "the command's name in prose; its runs are COMMANDS",
    "python -m jaxrl.sweep": "the command's name in prose; its runs are COMMANDS",
    "python -m jaxrl.evaluate": "the command's name in prose; its runs are COMMANDS",
    "python -m jaxrl.train resume=RUN_DIR": "tests/test_reliability.py resumes stopped runs (bitwise)",
    "python -m jaxrl.sweep … launcher=submitit_slurm": "the cluster page's launcher commands: tests/test_launchers.py",
    "python -m jaxrl.train env=cartpole seeds=4 total_timesteps=20000 num_evals=2 profile=true": (
        "a recipe whose printout the Performance page quotes; profile=true: tests/test_perf_tools.py"
    ),
    "python -m jaxrl.train env=pendulum algo=sac seeds=1 num_envs=1 total_timesteps=20000 algo.num_steps=8 "
    "algo.utd=1 algo.batch_size=256 'algo.hidden_sizes=[64,64]' algo.learning_starts=1000 algo.lr=3e-4 "
    "algo.buffer_size=20000 eval.episodes=16 profile=true": "a measurement recipe (Performance, peers.py's SAC settings)",
    "python -m jaxrl.sweep … seeds=16 algo.lr=1e-3,3e-3,5e-3 algo.ent_coef=0,0.01": (
        "experiments/bench_sweep.py's row for the grid sweep COMMANDS runs"
    ),
    "python -m jaxrl.train seeds=[k] …": "experiments/bench_sweep.py --one-by-one: the same runs launched one by one",
    "python -m jaxrl.train env=cartpole seeds=256 dist.coordinator=10.0.0.1:1234 dist.num_processes=4 "
    "dist.process_id=$RANK": "needs 4 hosts; tests/test_parallel.py runs 2 processes with dist.coordinator on localhost",
    "srun python -m jaxrl.train env=cartpole seeds=256 dist.auto=true": "needs a SLURM cluster (jax detects it)",
    "python -m jaxrl.train env=ant seeds=8": "a multi-GPU node's command (the ant preset: 50M env steps)",
    "ray start --head --num-cpus=8": "a Ray cluster's head; tests/test_ray_runners.py starts a two-node cluster "
    "(ray.cluster_utils.Cluster) and tests/test_launchers.py runs ray start --head",
    "ray start --address=HEAD:6379 --num-cpus=16": "another machine joining the head: tests/test_ray_runners.py's "
    "second node",
    "python -m jaxrl.train env=gymnasium:CartPole-v1 seeds=4 actor=ray actor.runners=2 actor.address=auto "
    "actor.strategy=SPREAD": "tests/test_ray_runners.py runs it on its two-node cluster (the address given)",
    "ray stop": "stops the head; tests/test_launchers.py runs ray stop",
}


def documented_pages() -> list[Path]:
    """The README and every page of the documentation site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def page_commands(path: Path) -> list[str]:
    """The commands of one page: each line of its ``bash`` blocks (comments
    dropped, continuation lines joined; blocks indented in a list item too) and
    each inline ``python -m jaxrl.…`` span of its prose."""
    # the reference docs/hooks.py generates (the commands' help texts and keys) is not a command list
    text = re.sub(r"<!-- ([\w-]+) -->.*?<!-- /\1 -->", "", path.read_text(), flags=re.S)
    found: list[str] = []
    for block in re.findall(r"^[ \t]*```bash\n(.*?)^[ \t]*```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            command = re.sub(r"\s+#.*$", "", line).strip() if not line.lstrip().startswith("#") else ""
            if command:
                found.append(" ".join(command.split()))
    prose = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.S | re.M)
    found += [" ".join(span.split()) for span in re.findall(r"`(python -m jaxrl\.[^`]+)`", prose)]
    return found


def readme_commands(pages: list[Path] | None = None) -> list[str]:
    """The commands of ``pages`` (default: the README and every docs page)."""
    return [command for path in (documented_pages() if pages is None else pages) for command in page_commands(path)]


def cluster_only_commands() -> set[str]:
    """The commands docs/cluster.md shows and no other page does."""
    others = [p for p in documented_pages() if p != CLUSTER_PAGE]
    return set(page_commands(CLUSTER_PAGE)) - set(readme_commands(others)) if CLUSTER_PAGE.exists() else set()


@pytest.fixture(scope="module")
def main_run(home) -> tuple[Path, dict]:
    proc = run(MAIN, home)
    assert "compiled in" in proc.stderr and "return mean" in proc.stderr  # live progress
    return check_train_run(proc, 16, solved="16 / 16")


def test_every_readme_command_is_run_here():
    """Every command of the README and the docs is in :data:`COMMANDS` (run by
    a test) or :data:`DESCRIBED` (a recipe the docs report, with where it is
    covered), and each entry is on a page; docs/cluster.md's own commands are
    tests/test_launchers.py's."""
    own = cluster_only_commands()
    assert not set(COMMANDS) & set(DESCRIBED)
    assert sorted(set(readme_commands()) - own) == sorted((set(COMMANDS) | set(DESCRIBED)) - own)


def test_make_test_fast_runs_existing_modules():
    """The quick tier the quickstart names (``make test-fast``) lists test modules that exist."""
    makefile = (REPO / "Makefile").read_text()
    listed = re.search(r"^FAST := (.*?)\n(?!\t)", makefile, flags=re.S | re.M).group(1).replace("\\\n", " ").split()
    assert len(listed) >= 10 and all((REPO / m).is_file() for m in listed), listed
    assert "test-fast: $(DEV)" in makefile and "$(FAST)" in makefile
    learning = re.search(r"^LEARNING := (.*?)\n", makefile, flags=re.M).group(1).split()
    assert all((REPO / m).is_file() for m in learning) and "test-learning: $(DEV)" in makefile
    assert "JAXRL_TESTS=learning" in makefile  # tests.helpers.LEARNING_TIER reads it


def test_every_cluster_command_is_run_there():
    from tests.test_launchers import CLUSTER_COMMANDS

    known = set(CLUSTER_COMMANDS) | set(COMMANDS) | set(DESCRIBED)
    assert cluster_only_commands() <= known, cluster_only_commands() - known


def test_make_train_is_the_main_command():
    recipe = (REPO / "Makefile").read_text().split("\ntrain:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/python -m jaxrl.train env=cartpole seeds=16" in recipe
    assert f"then: {MAIN}" in README.read_text()


def test_main_command_solves_every_seed(main_run):
    """The CartPole preset at its full budget: every seed solves (random play
    scores ≈ 9-10; experiments/robust_cartpole.py: 256 of 256 seeds)."""
    run_dir, summary = main_run
    assert summary["solved_fraction"] == 1.0 and summary["total_timesteps"] >= 200_000
    assert summary["cpu_threads"] is None


def test_load_policy_is_the_networks_argmax(main_run):
    import jax

    import jaxrl
    from jaxrl.run.policy import open_run

    run_dir, _ = main_run
    act = jaxrl.load_policy(str(run_dir), seed=5)
    obs = jax.random.uniform(jax.random.key(0), (64, 4), minval=-0.2, maxval=0.2)
    actions = np.asarray(jax.jit(act)(obs, jax.random.key(1)))
    run = open_run(str(run_dir))
    params = jax.tree.map(lambda x: x[5], run.carry.states.agent.params)  # seed 5 is member 5
    logits, _ = run.trainer.agent.network.apply(params, obs)
    np.testing.assert_array_equal(actions, np.argmax(np.asarray(logits), axis=-1))
    single = act(obs[0], jax.random.key(2))
    assert single.shape == () and int(single) == actions[0]


def test_evaluate_replays_the_final_evaluation_exactly(main_run, home):
    run_dir, summary = main_run
    proc = run("python -m jaxrl.evaluate RUN_DIR", home, RUN_DIR=str(run_dir))
    assert "across 16 seeds: IQM" in proc.stdout
    assert "note:" not in proc.stderr  # same layout as training
    result = json.loads((run_dir / "evaluation.json").read_text())
    assert [s["mean"] for s in result["seeds"]] == summary["final_eval_return"]


def test_evaluate_sampled_episodes_of_one_seed(main_run, home):
    run_dir, _ = main_run
    proc = run("python -m jaxrl.evaluate RUN_DIR episodes=100 seed=3 deterministic=false", home, RUN_DIR=str(run_dir))
    assert "across 1 seed:" in proc.stdout and "note:" not in proc.stderr  # the tool chose both layouts
    result = json.loads((run_dir / "evaluation.json").read_text())
    assert [s["seed"] for s in result["seeds"]] == [3] and len(result["seeds"][0]["returns"]) == 100
    assert result["deterministic"] is False


def test_evaluate_renders_a_gif(main_run, home):
    from PIL import Image

    run_dir, _ = main_run
    proc = run("python -m jaxrl.evaluate RUN_DIR seed=0 render=true", home, RUN_DIR=str(run_dir))
    gif = run_dir / "episode-seed0.gif"
    assert str(gif) in proc.stdout
    with Image.open(gif) as image:
        assert image.n_frames == json.loads((run_dir / "evaluation.json").read_text())["render"]["frames"] > 1


def test_export_then_run_without_jaxrl_and_load_policy(main_run, home):
    import jax

    import jaxrl

    run_dir, _ = main_run
    proc = run("python -m jaxrl.export RUN_DIR seed=3", home, RUN_DIR=str(run_dir))
    out = run_dir / "export-seed3"
    assert str(out) in proc.stdout
    for name in ("policy.jaxexport", "params.npz", "policy.json", "run_policy.py"):
        assert (out / name).is_file(), name
    spec = json.loads((out / "policy.json").read_text())
    assert spec["obs_shape"] == [4] and spec["action"] == {"kind": "discrete", "n": 2} and spec["seed"] == 3
    printed = subprocess.run(
        [sys.executable, str(out / "run_policy.py"), str(out)], env=user_env(), capture_output=True, text=True
    )
    assert printed.returncode == 0 and printed.stdout.strip(), printed.stderr[-2000:]
    obs = np.asarray(jax.random.uniform(jax.random.key(3), (9, 4), minval=-0.2, maxval=0.2))
    exported = subprocess.run(
        [sys.executable, "-c", EXPORTED, str(out), json.dumps(obs.tolist())],
        env=user_env(),
        capture_output=True,
        text=True,
        cwd=home,
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    act = jaxrl.load_policy(str(run_dir), seed=3)  # this process: one device, as a user's Python has
    assert json.loads(exported.stdout) == np.asarray(act(obs, jax.random.key(0))).tolist()


def test_the_export_needs_jax_numpy_and_flatbuffers_only(main_run, home, tmp_path):
    """What the docs tell a user to install for an exported policy, and nothing else."""
    run_dir, _ = main_run
    out = tmp_path / "export"
    run(f"python -m jaxrl.export RUN_DIR seed=3 out={out}", home, RUN_DIR=str(run_dir))
    spec = json.loads((out / "policy.json").read_text())
    assert spec["params"] and all("opt_state" not in n and "critic" not in n for n in spec["params"])
    shipped = np.load(out / "params.npz")
    assert sorted(shipped.files) == sorted(spec["params"])
    # the actor alone: 4 → 64 → 64 → 2 logits (the preset normalizes no observations)
    assert sum(shipped[n].size for n in shipped.files) == (4 * 64 + 64) + (64 * 64 + 64) + (64 * 2 + 2)
    python, env = python_with_only(tmp_path, "jax", "numpy", "flatbuffers")
    for absent in ("jaxrl", "flax", "optax"):
        proc = subprocess.run([*python, "-c", f"import {absent}"], env=env, capture_output=True, text=True)
        assert proc.returncode != 0, absent  # the environment holds only what the docs name
    # no argument, run from elsewhere: run_policy.py reads the files beside it
    proc = subprocess.run([*python, str(out / "run_policy.py")], env=env, capture_output=True, text=True, cwd=home)
    assert proc.returncode == 0 and proc.stdout.strip() in ("[0]", "[1]"), proc.stderr[-2000:]


def test_tensorboard_logger(home):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    command = "python -m jaxrl.train env=cartpole logger=tensorboard"
    proc = run(command, home, COMMANDS[command])
    run_dir, summary = check_train_run(proc, 16)
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"eval/return/seed_0", "eval/return_iqm", "train/episode_return/seed_0"} <= tags
    # every metric PPO declares has its curves (policy_loss, value_loss, grad_norm, …)
    from jaxrl import algos

    assert {f"train/{m}/seed_15" for m in algos.get("ppo").metrics} <= tags
    assert events.Scalars("eval/return/seed_0")[-1].value == pytest.approx(summary["final_eval_return"][0])


def test_help_lists_the_overrides(home):
    proc = run("python -m jaxrl.train --help", home)
    assert "perf=auto|on|off" in proc.stdout + proc.stderr and "algo.network=mlp" in proc.stdout + proc.stderr
    builtin = ("ppo", "a2c", "reinforce", "sac", "td3", "pqn", "dqn")
    assert all(f" {name} " in proc.stdout for name in builtin), proc.stdout


def test_perf_off_solves_every_seed(home):
    check_train_run(run(PERF_OFF, home, COMMANDS[PERF_OFF]), 4, solved=" 4 / 4")


def test_acrobot_variant(home):
    command = "python -m jaxrl.train env=acrobot seeds=8 algo.lr=1e-3 total_timesteps=2e5"
    check_train_run(run(command, home, COMMANDS[command]), 8)


@pytest.fixture(scope="module")
def grid_sweep(home) -> Path:
    command = "python -m jaxrl.sweep env=cartpole seeds=16 algo.lr=1e-3,3e-3,5e-3 algo.ent_coef=0,0.01"
    proc = run(command, home, COMMANDS[command])
    assert "6 configurations × 16 seeds = 96 runs in 1 compiled program(s)" in proc.stderr
    found = re.findall(r"^sweep directory: (.+)$", proc.stderr, re.M)
    sweep_dir = Path(found[-1])
    assert sweep_dir.name.startswith("sweep-CartPole-v1-ppo-")
    for name in ("sweep.json", "report.md", "report.csv", "report.json"):
        assert (sweep_dir / name).is_file(), name
    return sweep_dir


def test_grid_sweep_and_its_policies(grid_sweep):
    import jax

    import jaxrl

    report = json.loads((grid_sweep / "report.json").read_text())
    assert len(report["rows"]) == 6
    group = grid_sweep / "group-0"
    labels = [c["label"] for c in json.loads((group / "summary.json").read_text())["configs"]]
    act = jaxrl.load_policy(str(group), seed=5, config=labels[-1])
    assert np.asarray(act(np.zeros((3, 4), np.float32), jax.random.key(0))).shape == (3,)
    # evaluate and export name a configuration of the group with config=LABEL (its seeds are every configuration's)
    from jaxrl import evaluate, export

    assert evaluate.main([str(group), f"config={labels[-1]}", "episodes=2"]) == 0
    rows = json.loads((group / "evaluation.json").read_text())["seeds"]
    assert {r["config"] for r in rows} == {labels[-1]} and [r["seed"] for r in rows] == list(range(16))
    assert export.main([str(group), "seed=5"]) == 2  # in every configuration: one line asking for config=
    assert export.main([str(group), "seed=5", f"config={labels[-1]}"]) == 0
    spec = json.loads((group / f"export-{labels[-1].replace(' ', '_')}-seed5" / "policy.json").read_text())
    assert spec["seed"] == 5


def test_random_search(home):
    command = next(c for c in COMMANDS if "sweep.samples=64" in c)
    proc = run(command, home, COMMANDS[command])
    assert "3 configurations × 8 seeds = 24 runs" in proc.stderr


def test_report_compares_a_sweep_and_a_run(grid_sweep, main_run, home):
    run_dir, _ = main_run
    command = "python -m jaxrl.report runs/sweep-CartPole-v1-ppo-… runs/CartPole-v1-ppo-…"
    proc = run(
        command,
        home,
        **{"runs/sweep-CartPole-v1-ppo-…": str(grid_sweep), "runs/CartPole-v1-ppo-…": str(run_dir)},
    )
    assert "IQM" in proc.stdout and run_dir.name in proc.stdout
    out = Path(re.findall(r"report written to (.+)$", proc.stderr, re.M)[-1])
    for name in ("report.md", "report.csv", "report.json"):
        assert (out / name).is_file(), name
    # a new ./report-<timestamp> where the user ran it; the runs' own files untouched
    assert out.parent == home and out.name.startswith("report-")
    assert not (run_dir / "report.md").exists() and not (grid_sweep / "report-").exists()
    curves = (run_dir / "curves.png").stat().st_mtime_ns
    one = run("python -m jaxrl.report RUN_DIR", home, RUN_DIR=str(run_dir))
    assert (run_dir / "curves.png").stat().st_mtime_ns == curves and not (run_dir / "report.md").exists()
    assert "No performance profile: all 16 runs scored 500" in one.stdout  # every seed solved: nothing to profile


def test_pbt(home):
    import jax

    import jaxrl

    command = next(c for c in COMMANDS if "pbt.population=16" in c)
    proc = run(command, home, COMMANDS[command])
    run_dir, summary = check_train_run(proc, 16)
    assert "PBT: best member" in proc.stdout
    trajectory = summary["pbt"]["best_trajectory"]
    assert len(trajectory) == summary["num_chunks"] and set(trajectory[0]["hparams"]) == {"lr", "ent_coef", "clip_eps"}
    with open(run_dir / "metrics.jsonl") as f:
        evals = [r for r in map(json.loads, f) if r["type"] == "eval"]
    assert all(len(r["hparams"]["lr"]) == 16 for r in evals)
    assert sum(p >= 0 for r in evals for p in r["parents"]) > 0  # members were copied
    assert evals[-1]["parents"] == [-1] * 16  # no PBT step after the final evaluation
    act = jaxrl.load_policy(str(run_dir), seed=summary["pbt"]["best_member"])
    assert np.asarray(act(np.zeros((4,), np.float32), jax.random.key(0))).shape == ()


def test_heldout_evaluation(home):
    command = next(c for c in COMMANDS if "eval.perturb" in c)
    proc = run(command, home, COMMANDS[command])
    run_dir, summary = check_train_run(proc, 16)
    assert "held-out evaluation" in proc.stdout
    assert len(summary["heldout"]) == 1 + 3 * 2  # the training setting and every combination


CONTINUOUS = [  # the categorical critics' and the fast presets' commands are tests/test_value_readme.py's
    c
    for c in COMMANDS
    if re.search(r"env=(pendulum|inverted_pendulum) ", c)
    and "algo=td3" not in c
    and "algo.critic" not in c
    and "preset=fast" not in c
]
# every seed beats this final return at the CI budget (random play: Pendulum ≈ −1200, inverted_pendulum 5–30)
LEARNS = {
    "python -m jaxrl.train env=pendulum algo=sac seeds=4": -400.0,
    "python -m jaxrl.train env=inverted_pendulum seeds=2": 500.0,
}


LINEAGE = [c for c in COMMANDS if "algo=reinforce" in c or "algo=a2c" in c]
# at the CI budgets above (random play: ≈ 20): an IQM / mean well above it
LINEAGE_LEARNS = {
    "python -m jaxrl.train env=cartpole algo=reinforce seeds=16": ("mean", 80.0),
    "python -m jaxrl.train env=cartpole algo=a2c seeds=16": ("iqm", 200.0),
}


@pytest.mark.parametrize("command", LINEAGE)
def test_lineage(command, home):
    run_dir, summary = check_train_run(run(command, home, COMMANDS[command]), 16)
    if command in LINEAGE_LEARNS:
        stat, floor = LINEAGE_LEARNS[command]
        assert summary[stat] > floor, summary[stat]
    with open(run_dir / "metrics.jsonl") as f:
        update = next(r for r in map(json.loads, f) if r["type"] == "update")
    from jaxrl import algos

    assert set(algos.get(re.search(r"algo=(\w+)", command).group(1)).metrics) <= set(update)


@pytest.mark.parametrize("command", CONTINUOUS)
def test_continuous_control(command, home):
    members = int(re.search(r"seeds=(\d+)", command).group(1))
    run_dir, summary = check_train_run(run(command, home, COMMANDS[command]), members)
    final = np.asarray(summary["final_eval_return"], float)
    assert np.all(np.isfinite(final))
    if command in LEARNS and floors_apply(command):
        assert np.all(final > LEARNS[command]), final


@pytest.fixture(scope="module")
def pomdp_run(home) -> tuple[Path, dict]:
    return check_train_run(run(POMDP_GRU, home, COMMANDS[POMDP_GRU]), 4)


def test_the_recurrent_preset_solves_cartpole_without_velocities_and_the_mlp_cannot(pomdp_run, home):
    _, summary = pomdp_run
    assert summary["solved_fraction"] >= 3 / 4 and summary["iqm"] >= 475, summary[
        "final_eval_return"
    ]  # measured: 4 / 4 (14 / 16 with 16 seeds, docs/pixels-memory.md)
    _, mlp = check_train_run(run(POMDP_MLP, home, COMMANDS[POMDP_MLP]), 4)
    assert mlp["solved_fraction"] == 0 and mlp["iqm"] < 150, mlp["final_eval_return"]


def test_recurrent_evaluate_load_policy_and_export_reproduce_the_trainer(pomdp_run, home):
    """evaluate replays the in-program deterministic evaluation; load_policy
    and the exported artifact (carry in, carry out) give the trainer's own
    recurrent actions on one observation sequence with an episode reset."""
    import jax
    import jax.numpy as jnp

    import jaxrl
    from jaxrl.run.policy import open_run

    run_dir, summary = pomdp_run
    run("python -m jaxrl.evaluate RUN_DIR", home, RUN_DIR=str(run_dir))
    result = json.loads((run_dir / "evaluation.json").read_text())
    assert [s["mean"] for s in result["seeds"]] == summary["final_eval_return"]

    obs = np.asarray(jax.random.uniform(jax.random.key(3), (12, 5, 2), minval=-0.2, maxval=0.2))
    done = np.zeros((12, 5), bool)
    done[6, 1:3] = True  # those envs start a new episode after step 6
    trained = open_run(str(run_dir))
    agent = trained.trainer.agent
    state = jax.tree.map(lambda x: x[3], trained.carry.states.agent)  # seed 3
    carry, expected = agent.init_carry(state, (5,)), []
    for t in range(12):
        carry, action = agent.act(state, carry, obs[t], jax.random.key(0))
        expected.append(np.asarray(action))
        carry = jnp.where(done[t][:, None], 0.0, carry)
    policy = jaxrl.load_policy(str(run_dir), seed=3)
    carry, got = policy.init_carry((5,)), []
    for t in range(12):
        carry, action = policy(carry, obs[t], jax.random.key(1))
        got.append(np.asarray(action))
        carry = jnp.where(done[t][:, None], 0.0, carry)
    np.testing.assert_array_equal(np.stack(got), np.stack(expected))
    assert len({tuple(a) for a in expected}) > 1  # the sequence exercises the policy

    run("python -m jaxrl.export RUN_DIR seed=3", home, RUN_DIR=str(run_dir))
    out = run_dir / "export-seed3"
    spec = json.loads((out / "policy.json").read_text())
    assert spec["obs_shape"] == [2] and spec["carry_size"] == carry.shape[-1]
    exported = subprocess.run(
        [sys.executable, "-c", EXPORTED_RECURRENT, str(out), json.dumps(obs.tolist()), json.dumps(done.tolist())],
        env=user_env(),
        capture_output=True,
        text=True,
        cwd=home,
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert json.loads(exported.stdout) == np.stack(expected).tolist()


def test_memorychain_preset_remembers(home):
    """MemoryChain rewards +1 / −1 for recalling the first observation's
    context at the end: a memoryless policy scores 0 in expectation."""
    _, summary = check_train_run(run("python -m jaxrl.train env=memorychain seeds=8", home), 8)
    assert summary["solved_fraction"] == 1.0 or summary["iqm"] >= 0.9, summary["final_eval_return"]


def test_minatar_cnn_beats_random_play(home):
    """Breakout-MinAtar's CNN preset at a CI budget (10 updates of 64 × 128
    steps): uniformly random play scores 0.37 per episode (1000 episodes;
    docs/pixels-memory.md); the IQM must be at least 2, over five times that (measured: 3.0)."""
    command = "python -m jaxrl.train env=Breakout-MinAtar seeds=4"
    _, summary = check_train_run(run(command, home, COMMANDS[command]), 2)
    if floors_apply(command):
        assert summary["iqm"] >= 2.0, summary["final_eval_return"]
