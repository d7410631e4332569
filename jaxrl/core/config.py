"""The run config: frozen dataclasses for one training run (env × algorithm × seeds).

Its fields split by *type* into two kinds (STYLE #4): static settings — shapes,
counts, flags, module choices — that the compiled program closes over, and float
hyperparameters (each algorithm config's :func:`~jaxrl.core.fields.traced`
fields) that become a pytree passed *as an argument* to the compiled program, so
one compile serves many seeds and hyperparameter settings.

Every field declares its own policy (:mod:`jaxrl.core.fields`): whether it may
change on resume (and so is not hashed), whether it may be swept, its range.
:data:`RESUMABLE`, :data:`UNHASHED` and :func:`sweep_refusal` are derived from
those declarations. Parsing and validation of the command line live in
:mod:`jaxrl.run.overrides`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from jaxrl.core.checks import POSITIVE_INT, Range
from jaxrl.core.contract import configs
from jaxrl.core.fields import Policy, policy_of, setting, walk

__all__ = [
    "ActorConfig",
    "Config",
    "DistConfig",
    "EnvConfig",
    "EvalConfig",
    "MAX_MEMBERS",
    "PBTConfig",
    "RESUMABLE",
    "SECTIONS",
    "SweepConfig",
    "key_policy",
    "seed_ids",
    "sweep_refusal",
]

ONCE = "set it once"


@dataclass(frozen=True)
class EnvConfig:
    """The environment: ``env=NAME`` is short for ``env.name=NAME``."""

    name: str = setting(  # short name, gymnax id, brax name or brax:<name>
        "cartpole", sweep="run one sweep per environment (compare them with python -m jaxrl.report)"
    )
    backend: str = "positional"  # brax physics backend: positional | generalized | spring | mjx
    episode_length: int = setting(  # brax time limit; 0: 1000 (gymnax envs keep their own limits)
        0, check=Range(0, integer=True, note="0 = 1000")
    )
    params: str = ""  # env parameters changed from their defaults, e.g. "memory_length=20" (gymnax EnvParams fields)
    observe: tuple[int, ...] = ()  # keep only these entries of the flattened observation, e.g. [0,2]; (): all
    # domain randomization: parameters drawn per env at every episode reset, e.g.
    # "length=uniform(0.25,1.0) gravity=loguniform(8,12) masscart=choice(0.5,1,2)" (gymnax EnvParams fields)
    randomize: str = ""
    module: str = ""  # host envs (env=gymnasium:ID): a module to import first, e.g. one that registers your env


@dataclass(frozen=True)
class ActorConfig:
    """The actor–learner pipeline of host envs (``env=gymnasium:ID``): actors
    (threads of this process, or env runners on Ray: ``actor=ray``) step the
    envs and act with parameters at most ``max_lag`` learner updates old; the
    learner learns from their trajectories (jaxrl.actors)."""

    kind: str = "threads"  # threads (in this process) | ray (env runners as Ray actors); actor=ray is short for it
    threads: int = setting(1, check=POSITIVE_INT)  # actor threads; each steps num_envs / threads envs per seed
    max_lag: int = setting(  # learner updates an actor's parameters may trail by; 0: lock-step
        1, check=Range(0, integer=True, note="0 = lock-step")
    )
    sync: bool = False  # lock-step acting and learning (max_lag=0): no overlap
    envs: str = "sync"  # gymnasium vectorization: sync (in the actor's thread) | async (one process per env)
    timeout_s: float = setting(60.0, check=Range(0, note="0 = off"))  # an env step this slow is a hang: stop the run
    # actor=ray: env runners (Ray actors), each with its own vector env and CPU policy
    runners: int = setting(2, check=POSITIVE_INT)  # each steps num_envs / runners envs per seed
    envs_per_runner: int = (
        setting(  # envs per seed in each runner; sets num_envs = runners × this; 0: num_envs / runners
            0, check=Range(0, integer=True, note="0 = num_envs / runners")
        )
    )
    cpus_per_runner: float = setting(1.0, check=Range(0, lo_open=True))  # Ray CPUs reserved per runner (may be < 1)
    strategy: str = "PACK"  # placement group strategy: PACK | SPREAD | STRICT_PACK | STRICT_SPREAD
    address: str = ""  # "": start a local Ray runtime; auto or HOST:PORT: join that cluster
    max_replaced: int = setting(  # runners replaced (a killed process, a lost node) before the run stops
        8, check=Range(0, integer=True)
    )


@dataclass(frozen=True)
class EvalConfig:
    """Deterministic evaluation on separate env copies."""

    episodes: int = setting(16, check=POSITIVE_INT)  # episodes per seed at every evaluation point
    max_steps: int = setting(  # step cap per episode; 0: the env's own time limit
        0, check=Range(0, integer=True, note="0 = env's limit")
    )
    # Held-out evaluation of the final policies on changed env parameters, e.g.
    # "length=0.25,0.5,1.0 gravity=9.8,12" (the grid of all combinations).
    perturb: str = ""
    # Named sets evaluated at every evaluation point, e.g.
    # "train; nominal; test: length=1.5,2 gravity=15; wide: length=uniform(0.25,2)"
    # (train: the training distribution; nominal: the env's own parameters;
    # NAME: a grid and/or per-episode draws). See jaxrl.envs.sets.
    sets: str = ""


@dataclass(frozen=True)
class PBTConfig:
    """Population-based training (Jaderberg et al., 2017, arXiv:1711.09846)
    inside the compiled program; ``population=0`` turns it off. Which
    hyperparameters may evolve, and within which bounds, each algorithm config
    declares on its fields (``traced(…, pbt=(lo, hi, log))``)."""

    population: int = 0  # members (each its own seed id: seed, seed+1, …)
    interval: int = setting(  # updates between exploit/explore steps; 0: total/num_evals
        0, check=Range(0, integer=True, note="0 = one chunk")
    )
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
    heartbeat_s: int = setting(
        30, check=POSITIVE_INT
    )  # a process silent this long counts as dead: the others stop with an error


@dataclass(frozen=True)
class SweepConfig:
    """``python -m jaxrl.sweep``: grid (default) or random search."""

    samples: int = setting(
        0, check=Range(0, integer=True, note="0 = grid")
    )  # >0: random search with this many configurations
    seed: int = 0  # PRNG seed of the random search
    # split a static group into programs of at most this many members (configurations × seeds,
    # whole configurations each), e.g. when one group does not fit one device; 0: one program per group
    max_members: int = setting(0, check=Range(0, integer=True, note="0 = one program per group"))


@dataclass(frozen=True)
class Config:
    """One training run: env × algorithm × seeds."""

    env: EnvConfig = setting(factory=EnvConfig)
    algo: Any = setting(  # the registered algorithm's config
        factory=lambda: configs["ppo"](), sweep="run one sweep per algorithm"
    )
    seeds: Any = setting(  # a count N (seed ids seed..seed+N-1) or an explicit list of ids
        16, sweep="seeds are the inner axis of every configuration; set seeds=N once"
    )
    seed: int = setting(
        0, sweep="set seed= once; every configuration runs the same seeds"
    )  # first seed id when `seeds` is a count
    preset: str = setting(  # default: the env's preset | NAME: a named preset over it (e.g. fast)
        "default", sweep="run one sweep per preset"
    )
    num_envs: int = setting(4, check=POSITIVE_INT)  # parallel envs per seed
    total_timesteps: int = setting(500_000, check=POSITIVE_INT)  # env steps per seed (rounded up to whole chunks)
    num_evals: int = setting(  # evaluation / logging / checkpoint points
        20,
        check=POSITIVE_INT,
        sweep="set it once (it fixes the evaluation points every configuration is compared at)",
    )
    eval: EvalConfig = setting(factory=EvalConfig, sweep="set evaluation settings once", inherit=True)
    pbt: PBTConfig = setting(
        factory=PBTConfig, sweep="PBT runs through python -m jaxrl.train pbt.population=N", inherit=True
    )
    sweep: SweepConfig = setting(factory=SweepConfig, sweep="sweep settings configure the sweep itself", inherit=True)
    dist: DistConfig = setting(factory=DistConfig, resumable=True, sweep=ONCE, inherit=True)
    actor: ActorConfig = setting(factory=ActorConfig, resumable=True, sweep=ONCE, inherit=True)
    run_dir: str | None = setting(None, hashed=False, sweep=ONCE)  # default: <runs_root>/<env>-<algo>-<timestamp>
    runs_root: str = setting("runs", hashed=False, sweep=ONCE)
    resume: str | None = setting(
        None, hashed=False, sweep="resume a whole sweep with resume=SWEEP_DIR"
    )  # a run directory to continue
    checkpoint: bool = setting(True, resumable=True, sweep=ONCE)
    keep: int = setting(2, resumable=True, sweep=ONCE, check=POSITIVE_INT)  # checkpoints kept on disk
    progress: Any = setting(  # true: live line, up to 8 times per chunk | chunk: once per chunk | false: none
        True, resumable=True, sweep=ONCE
    )
    plots: bool = setting(True, resumable=True, sweep=ONCE)
    on_nan: str = setting(
        "stop", sweep=ONCE
    )  # stop: end the run at a non-finite update | drop: mark that seed failed, go on
    logger: str = setting(
        "jsonl", resumable=True
    )  # jsonl | tensorboard | wandb | tensorboard+wandb (JSON lines are always written)
    wandb_project: str = setting("jaxrl", resumable=True)
    deterministic: bool = setting(
        False, sweep=ONCE
    )  # ask XLA for deterministic GPU kernels (CPU is deterministic anyway)
    compile_cache: str = (
        setting(  # persistent XLA cache: auto ($JAXRL_COMPILE_CACHE or the user cache dir) | off | a directory
            "auto", resumable=True, sweep=ONCE
        )
    )
    profile: bool = setting(
        False, resumable=True, sweep=ONCE
    )  # time rollout / advantages / learner per update and write a jax.profiler trace
    perf: str = "auto"  # jaxrl's XLA:CPU kernels: auto (on for the CPU backend only) | on | off (plain flax/optax/JAX)
    parallel: str = setting(
        "seeds", sweep=ONCE
    )  # seeds: members (seeds × configurations) sharded over devices | data: one run's envs split over devices
    devices: int = setting(
        0, resumable=True, sweep=ONCE
    )  # devices to use (0: all; in multi-process runs, all of every process)

    @property
    def rollout_size(self) -> int:
        """Env steps per update and seed: ``num_envs × algo.num_steps``."""
        return self.num_envs * self.algo.num_steps


# Members (seeds × configurations, or a PBT population) one program may hold.
MAX_MEMBERS = 2**20

# The config's sections (their fields are written SECTION.FIELD); ``algo`` is the
# algorithm's own config class.
SECTIONS: dict[str, type] = {
    "env": EnvConfig,
    "eval": EvalConfig,
    "pbt": PBTConfig,
    "sweep": SweepConfig,
    "dist": DistConfig,
    "actor": ActorConfig,
}


def key_policy(key: str, algo_cls: type | None = None) -> Policy:
    """The policy of a dotted key (``num_envs``, ``eval.episodes``, ``algo.lr``,
    ``env`` for ``env.name``, ``algo`` for the algorithm's choice); ``algo_cls``
    is the algorithm config class whose ``algo.*`` fields are meant."""
    fields = {f.name: f for f in dataclasses.fields(Config)}
    head, _, rest = key.partition(".")
    if key == "env":
        head, rest = "env", "name"
    if head not in fields:
        return Policy()
    outer = policy_of(fields[head])
    if not rest:
        return outer
    if head == "algo":
        cls = algo_cls or type(configs["ppo"]())
    else:
        cls = SECTIONS.get(head)
    inner = {f.name: f for f in dataclasses.fields(cls)} if cls is not None else {}
    return policy_of(inner[rest], outer) if rest in inner else Policy()


def sweep_refusal(key: str, algo_cls: type | None = None) -> str:
    """Why ``key`` cannot be swept ("": it can)."""
    return key_policy(key, algo_cls).sweep


# Keys that may change when a run is resumed (how it is watched or laid out);
# they are not part of the checkpoint's config hash.
RESUMABLE: tuple[str, ...] = tuple(key for key, _, policy in walk(Config) if policy.resumable)


def seed_ids(config: Config) -> tuple[int, ...]:
    """The seed ids a config runs, e.g. ``seeds=4 seed=10`` → (10, 11, 12, 13)."""
    if isinstance(config.seeds, (list, tuple)):
        return tuple(int(s) for s in config.seeds)
    return tuple(range(config.seed, config.seed + int(config.seeds)))
