"""A run resolved once: :func:`prepare` turns a validated :class:`Config` (and
the members a job trains) into a :class:`RunSpec` — the env, the trainer with
its evaluation sets, the held-out settings, the algorithm, the members'
hyperparameters and the device layout — raising every
:class:`~jaxrl.core.errors.ConfigError` before anything is written. The
training and sweep jobs, the chunk loop and the tools that read a finished run
take the RunSpec; nothing after it parses or validates again (STYLE #15).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from jaxrl import envs
from jaxrl.core.config import Config, seed_ids
from jaxrl.core.contract import Algorithm, algorithm_for
from jaxrl.core.errors import ConfigError, error_line
from jaxrl.core.fields import HParams
from jaxrl.envs.params import grid, param_names, parse_grid_term
from jaxrl.perf.platform import Process
from jaxrl.run import parallel
from jaxrl.run.validation import check_env_actions
from jaxrl.trainer import pbt
from jaxrl.trainer.loop import Trainer, make_train

__all__ = ["Members", "RunSpec", "prepare", "members_of", "pick_members", "parse_perturb"]


@dataclass(frozen=True)
class Members:
    """The members of one compiled program: a (configuration, seed) pair each."""

    seeds: tuple[int, ...]  # seed id of each member
    config_index: tuple[int, ...]  # configuration of each member
    labels: tuple[str, ...]  # one per configuration
    hparams: HParams  # traced hyperparameters, every leaf [M] (PBT: the initial population)
    record_updates: bool = True  # one metrics record per update; else one per chunk (sweeps)

    def __len__(self) -> int:
        return len(self.seeds)


def pick_members(
    seeds: tuple[int, ...],
    config_index: tuple[int, ...],
    labels: tuple[str, ...],
    seed: int | str | None,
    config_label: str | None = None,
) -> list[int]:
    """The members (indices) with seed id ``seed`` (``"all"``: every seed;
    ``None``: the first member's) of configuration ``config_label`` (``None``:
    any). One seed must name one member: in a sweep group, whose configurations
    share their seed ids, ``config_label`` picks it. ConfigError (one line)
    for a label or seed the run does not have, or a seed in several
    configurations."""
    if config_label is not None and config_label not in labels:
        have = ", ".join(labels) if len(labels) > 1 else "a train run: one configuration"
        raise ConfigError("config", config_label, f"is not a configuration of this run ({have})", "pass one of them")
    seed = seeds[0] if seed is None else seed
    found = [
        i
        for i, (s, c) in enumerate(zip(seeds, config_index, strict=True))
        if (seed == "all" or s == seed) and (config_label is None or labels[c] == config_label)
    ]
    if not found:
        raise ConfigError("seed", seed, f"is not in this run (seeds: {sorted(set(seeds))})", "pass one of those seeds")
    if seed != "all" and len(found) > 1:
        names = [labels[config_index[i]] for i in found]
        raise ConfigError(
            "seed", seed, f"is in several configurations of this sweep group ({names})", "pass config=LABEL too"
        )
    return found


@dataclass(frozen=True)
class RunSpec:
    """Everything a run needs, built and checked once (:func:`prepare`)."""

    config: Config  # the static settings every member shares (run_dir set)
    env: envs.Env
    trainer: Trainer  # the compiled program's pure functions; its eval_sets are eval.sets parsed
    algorithm: Algorithm
    members: Members
    heldout: tuple[dict[str, float], ...]  # eval.perturb: every combination of changed env parameters
    layout: Any  # jaxrl.run.parallel.Plan, or None: one device
    process: Process
    run_dir: str
    resuming: bool = False
    created: bool = True  # run_dir is made for this run (removed if it stops before any checkpoint)
    resume_cmd: str = ""  # how to continue it after a stop

    @property
    def num_members(self) -> int:
        return len(self.members)


def members_of(config: Config) -> Members:
    """The members of a train run: one configuration over its seeds, or a PBT
    population (members = seed ids seed … seed+population−1, hyperparameters
    drawn around the config's)."""
    import jax
    import numpy as np

    base = HParams.from_config(config.algo)
    if config.pbt.population:
        seeds = tuple(range(config.seed, config.seed + config.pbt.population))
        key = jax.random.fold_in(jax.random.key(config.pbt.seed), 1)
        hparams = pbt.init_hparams(base, config.pbt, key, len(seeds), algorithm_for(config.algo).pbt_bounds)
        return Members(seeds, (0,) * len(seeds), ("pbt",), hparams)
    seeds = seed_ids(config)
    hparams = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (len(seeds),)).copy(), base)
    return Members(seeds, (0,) * len(seeds), ("default",), hparams)


def prepare(
    config: Config,
    run_dir: str,
    *,
    process: Process | None = None,
    members: Members | None = None,
    env: envs.Env | None = None,
    resuming: bool = False,
    layout: bool = True,
    resume_cmd: str = "",
) -> RunSpec:
    """Build and check everything a run of the validated ``config`` needs,
    before anything is written: the env (``env``: one already built for it),
    the trainer, ``eval.perturb``'s settings, PBT's ranking set, the members
    (default: :func:`members_of`) and — unless ``layout=False`` (a launcher
    that leaves the layout to each job's machine) — the device layout."""
    process = process or Process()
    if config.actor.kind != "threads":
        raise ConfigError(
            "actor",
            config.actor.kind,
            f"steps host envs (env=gymnasium:…, envpool:…) and env={config.env.name} steps inside the compiled program",
            "drop actor= for this env",
        )
    env = build_env(config) if env is None else env
    check_env_actions(config, env)
    trainer = make_train(config, env)
    _check_fitness(config, trainer.eval_sets)
    heldout = tuple(parse_perturb(config.eval.perturb, env))
    members = members_of(config) if members is None else members
    plan = parallel.plan(config, len(members), process.cpu_devices) if layout else None
    return RunSpec(
        config=dataclasses.replace(config, run_dir=run_dir),
        env=env,
        trainer=trainer,
        algorithm=trainer.algorithm,
        members=members,
        heldout=heldout,
        layout=plan,
        process=process,
        run_dir=run_dir,
        resuming=resuming,
        created=not resuming,
        resume_cmd=resume_cmd or f"python -m jaxrl.train resume={run_dir}",
    )


def build_env(config: Config) -> envs.Env:
    """The env of ``config``; one that cannot be built (a download it needs, a
    suite that fails to import) is a one-line ConfigError."""
    try:
        return envs.from_config(config)
    except ConfigError:
        raise
    except Exception as error:  # e.g. an env that needs a download
        raise ConfigError(
            "env",
            config.env.name,
            f"could not be built ({error_line(error, 120)})",
            "pick another env from jaxrl.envs.names()",
        ) from None


def parse_perturb(text: str, env: Any) -> list[dict[str, float]]:
    """``"length=0.25,0.5 gravity=9.8,12"`` → every combination as a dict.

    Raises ConfigError naming unknown parameters or non-numeric values."""
    text = (text or "").strip()
    if not text:
        return []
    names = param_names(env)
    axes = dict(parse_grid_term(part, env, "eval.perturb", text, names) for part in text.replace(";", " ").split())
    return grid(axes)


def _check_fitness(config: Config, eval_sets: tuple[Any, ...]) -> None:
    """``pbt.fitness`` names a set of ``eval.sets`` of a PBT run."""
    name = config.pbt.fitness
    if not name:
        return
    if not config.pbt.population:
        raise ConfigError("pbt.fitness", name, "ranks a PBT population and none is set", "add pbt.population=16")
    names = [s.name for s in eval_sets]
    if name not in names:
        raise ConfigError(
            "pbt.fitness",
            name,
            f"is not a set of eval.sets (its sets: {', '.join(names) or 'none'})",
            f'add it, e.g. eval.sets="{name}: PARAM=V1,V2", or leave pbt.fitness unset',
        )
