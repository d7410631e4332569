"""The run config: frozen dataclasses for one training run (env × algorithm × seeds).

Its fields split by *type* into two kinds (STYLE #4): static settings — shapes,
counts, flags, module choices — that the compiled program closes over, and float
hyperparameters (each algorithm config's ``TRACED`` fields) that become a pytree
passed *as an argument* to the compiled program, so one compile serves many
seeds and hyperparameter settings. Parsing and validation of the command line
live in :mod:`jaxrl.run.config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from jaxrl.core.contract import configs

__all__ = [
    "Config",
    "DistConfig",
    "EnvConfig",
    "EvalConfig",
    "MAX_MEMBERS",
    "PBTConfig",
    "PBT_BOUNDS",
    "SweepConfig",
    "seed_ids",
]


@dataclass(frozen=True)
class EnvConfig:
    """The environment: ``env=NAME`` is short for ``env.name=NAME``."""

    name: str = "cartpole"  # short name, gymnax id, brax name or brax:<name>
    backend: str = "positional"  # brax physics backend: positional | generalized | spring | mjx
    episode_length: int = 0  # brax time limit; 0: 1000 (gymnax envs keep their own limits)
    params: str = ""  # env parameters changed from their defaults, e.g. "memory_length=20" (gymnax EnvParams fields)
    observe: tuple[int, ...] = ()  # keep only these entries of the flattened observation, e.g. [0,2]; (): all
    # domain randomization: parameters drawn per env at every episode reset, e.g.
    # "length=uniform(0.25,1.0) gravity=loguniform(8,12) masscart=choice(0.5,1,2)" (gymnax EnvParams fields)
    randomize: str = ""


@dataclass(frozen=True)
class EvalConfig:
    """Deterministic evaluation on separate env copies."""

    episodes: int = 16  # episodes per seed at every evaluation point
    max_steps: int = 0  # step cap per episode; 0: the env's own time limit
    # Held-out evaluation of the final policies on changed env parameters, e.g.
    # "length=0.25,0.5,1.0 gravity=9.8,12" (the grid of all combinations).
    perturb: str = ""
    # Named sets evaluated at every evaluation point, e.g.
    # "train; nominal; test: length=1.5,2 gravity=15; wide: length=uniform(0.25,2)"
    # (train: the training distribution; nominal: the env's own parameters;
    # NAME: a grid and/or per-episode draws). See jaxrl.envs.sets.
    sets: str = ""


# Evolvable hyperparameters and their bounds (log: perturbed multiplicatively
# and resampled log-uniformly).
PBT_BOUNDS: dict[str, tuple[float, float, bool]] = {
    "lr": (1e-5, 1e-1, True),
    "ent_coef": (0.0, 0.1, False),
    "clip_eps": (0.05, 0.5, False),
    "gae_lambda": (0.8, 1.0, False),
    "gamma": (0.9, 0.9999, False),
    "vf_coef": (0.05, 2.0, True),
    "max_grad_norm": (0.05, 10.0, True),
    "alpha_lr": (1e-5, 1e-2, True),
    "tau": (1e-3, 0.1, True),
    "target_entropy_scale": (0.1, 2.0, False),
    "reward_scale": (0.01, 100.0, True),
    "q_lambda": (0.0, 1.0, False),
    "exploration_noise": (0.01, 1.0, True),
    "target_noise": (0.01, 1.0, True),
    "noise_correlation": (0.0, 0.99, False),
}


@dataclass(frozen=True)
class PBTConfig:
    """Population-based training (Jaderberg et al., 2017, arXiv:1711.09846)
    inside the compiled program; ``population=0`` turns it off."""

    population: int = 0  # members (each its own seed id: seed, seed+1, …)
    interval: int = 0  # updates between exploit/explore steps; 0: total/num_evals
    fraction: float = 0.25  # the bottom fraction copies from the top fraction
    resample_prob: float = 0.25  # explore: resample within bounds instead of perturbing
    perturb_factors: tuple[float, ...] = (0.8, 1.25)
    hparams: tuple[str, ...] = ("lr", "ent_coef", "clip_eps")
    init_spread: float = 2.0  # initial hyperparameters: base × U[1/spread, spread] (log)
    seed: int = 0  # PRNG seed of the exploit/explore decisions
    fitness: str = ""  # rank members on this set of eval.sets (e.g. a held-out set); "": the run's own evaluation


@dataclass(frozen=True)
class DistConfig:
    """Multi-host runs through ``jax.distributed`` (one process per host, each
    driving its local devices). ``auto=true`` lets JAX detect SLURM / Open MPI /
    TPU / Kubernetes clusters from their environment variables."""

    coordinator: str = ""  # HOST:PORT of process 0; empty and auto=false: single process
    num_processes: int = 1
    process_id: int = 0
    auto: bool = False
    heartbeat_s: int = 30  # a process silent this long counts as dead: the others stop with an error


@dataclass(frozen=True)
class SweepConfig:
    """``python -m jaxrl.sweep``: grid (default) or random search."""

    samples: int = 0  # >0: random search with this many configurations
    seed: int = 0  # PRNG seed of the random search
    # split a static group into programs of at most this many members (configurations × seeds,
    # whole configurations each), e.g. when one group does not fit one device; 0: one program per group
    max_members: int = 0


@dataclass(frozen=True)
class Config:
    """One training run: env × algorithm × seeds."""

    env: EnvConfig = field(default_factory=EnvConfig)
    algo: Any = field(default_factory=lambda: configs["ppo"]())  # the registered algorithm's config
    seeds: Any = 16  # a count N (seed ids seed..seed+N-1) or an explicit list of ids
    seed: int = 0  # first seed id when `seeds` is a count
    num_envs: int = 4  # parallel envs per seed
    total_timesteps: int = 500_000  # env steps per seed (rounded up to whole chunks)
    num_evals: int = 20  # evaluation / logging / checkpoint points
    eval: EvalConfig = field(default_factory=EvalConfig)
    pbt: PBTConfig = field(default_factory=PBTConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    run_dir: str | None = None  # default: <runs_root>/<env>-<algo>-<timestamp>
    runs_root: str = "runs"
    resume: str | None = None  # a run directory to continue
    checkpoint: bool = True
    keep: int = 2  # checkpoints kept on disk
    progress: Any = True  # true: live line fed every update from inside the program | chunk: once per chunk (cacheable program) | false
    plots: bool = True
    on_nan: str = "stop"  # stop: end the run at a non-finite update | drop: mark that seed failed, go on
    logger: str = "jsonl"  # jsonl | tensorboard | wandb | tensorboard+wandb (JSON lines are always written)
    wandb_project: str = "jaxrl"
    deterministic: bool = False  # ask XLA for deterministic GPU kernels (CPU is deterministic anyway)
    compile_cache: str = (
        "auto"  # persistent XLA cache: auto ($JAXRL_COMPILE_CACHE or the user cache dir) | off | a directory
    )
    profile: bool = False  # time rollout / advantages / learner per update and write a jax.profiler trace
    perf: str = "auto"  # jaxrl's XLA:CPU kernels: auto (on for the CPU backend only) | on | off (plain flax/optax/JAX)
    parallel: str = "seeds"  # seeds: members (seeds × configurations) sharded over devices | data: one run's envs split over devices
    devices: int = 0  # devices to use (0: all; in multi-process runs, all of every process)

    @property
    def rollout_size(self) -> int:
        """Env steps per update and seed: ``num_envs × algo.num_steps``."""
        return self.num_envs * self.algo.num_steps


# Members (seeds × configurations, or a PBT population) one program may hold.
MAX_MEMBERS = 2**20


def seed_ids(config: Config) -> tuple[int, ...]:
    """The seed ids a config runs, e.g. ``seeds=4 seed=10`` → (10, 11, 12, 13)."""
    if isinstance(config.seeds, (list, tuple)):
        return tuple(int(s) for s in config.seeds)
    return tuple(range(config.seed, config.seed + int(config.seeds)))
