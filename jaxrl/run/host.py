"""Training on host envs (``env=gymnasium:ID``) through the actor–learner
pipeline (:mod:`jaxrl.actors.sebulba`): the run directory, records,
evaluation, checkpoints, resume and the summary a compiled run has, with the
pipeline's own figures (where the time went, policy lag, the verdict) in every
update record, the live line, ``summary.json`` and the final table.

Learner state is checkpointed and resumed exactly; host env states cannot be
saved in general, so episodes in flight restart on resume (said in one line).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import shutil
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from flax import struct

from jaxrl import perf as perf_lib
from jaxrl.actors.ray_runners import RayRunners, RunnerParts, connect
from jaxrl.actors.sebulba import LEVERS, TIME_FIELDS, HostEnvError, Sebulba, Stopped, UpdateReport, verdict
from jaxrl.algos import algorithm_for
from jaxrl.core.config import Config
from jaxrl.core.contract import policy_step
from jaxrl.core.errors import ConfigError, make_dir
from jaxrl.core.version import __version__
from jaxrl.envs.core import Discrete, Env
from jaxrl.envs.host import HostSpec, host_spec, make_vec
from jaxrl.run import stats, summary
from jaxrl.run.checkpoint import Checkpointer
from jaxrl.run.io import JsonlWriter, jsonable, write_json
from jaxrl.run.logs import flat, format_count, open_dashboards
from jaxrl.run.overrides import to_dict
from jaxrl.run.records import EvalRecord, UpdateRecord
from jaxrl.run.records import read as read_records
from jaxrl.run.rundir import HOST_KEPT_BEFORE, accepted_hashes, new_run_dir, save_checkpoint, write_config
from jaxrl.run.signals import StopRequest
from jaxrl.run.spec import Members, members_of, pick_members
from jaxrl.trainer import pbt as pbt_lib

__all__ = [
    "HostRun",
    "prepare_host",
    "run_host",
    "evaluate_members",
    "open_host_run",
    "host_member",
    "member_index",
    "evaluate_host_run",
]

_UNSUPPORTED = (  # (key, value on this config, default): features the pipeline does not have yet
    ("eval.sets", lambda c: c.eval.sets, ""),
    ("eval.perturb", lambda c: c.eval.perturb, ""),
    ("env.randomize", lambda c: c.env.randomize, ""),
    ("env.params", lambda c: c.env.params, ""),
    ("env.observe", lambda c: tuple(c.env.observe), ()),
    ("parallel", lambda c: c.parallel, "seeds"),
    ("dist.num_processes", lambda c: c.dist.num_processes, 1),
    ("profile", lambda c: c.profile, False),
)


class ShapeEnv(Env):
    """A host env's shapes behind the Env contract, for building an agent
    (networks, initial state); it is never stepped in a program."""

    steps_in_program = False

    def __init__(self, spec: HostSpec):
        self.name, self.obs_shape, self.action_space = spec.name, spec.obs_shape, spec.action_space
        self.default_params, self.max_episode_steps, self.solved_return = (
            None,
            spec.max_episode_steps,
            spec.solved_return,
        )

    def _reset(self, key: Any, params: Any) -> tuple[Any, Any]:
        import jax.numpy as jnp

        return jnp.zeros((), jnp.int32), jnp.zeros(self.obs_shape, jnp.float32)

    def _step(self, key: Any, inner: Any, action: Any, params: Any) -> Any:
        raise NotImplementedError("a host env steps outside the program (jaxrl.actors)")


class HostRun(NamedTuple):
    """A host-env run, prepared once (every check done, nothing written)."""

    config: Config
    spec: HostSpec
    agent: Any
    seeds: tuple[int, ...]
    hparams: Any  # HParams with a leading member axis
    per_member: int  # envs per member in each actor thread
    num_updates: int
    chunk_updates: int
    metric_names: tuple[str, ...]
    config_index: tuple[int, ...] = ()  # a sweep group's: each member's configuration (else empty)
    labels: tuple[str, ...] = ()  # a sweep group's: one per configuration (else empty)

    def member_name(self, i: int) -> str:
        """Member ``i`` as the live line, errors and dashboards name it."""
        seed = self.seeds[i]
        return f"{self.labels[self.config_index[i]]} seed {seed}" if self.labels else f"seed {seed}"


def _checked_actors(config: Config) -> Config:
    """``config`` with the pipeline's settings checked (features it lacks, the
    actors' kind, their share of the envs); ``actor.envs_per_runner`` sets
    ``num_envs``. ConfigError (one line) otherwise."""
    for key, value, default in _UNSUPPORTED:
        if value(config) != default:
            raise ConfigError(
                key,
                value(config),
                "is not available on host envs (gymnasium:…, envpool:…) yet",
                f"drop {key}= for this run",
            )
    actor = config.actor
    if actor.envs not in ("sync", "async"):
        raise ConfigError("actor.envs", actor.envs, "must be sync or async", "pass actor.envs=sync")
    if actor.kind not in ("threads", "ray"):
        raise ConfigError(
            "actor", actor.kind, "must be threads or ray", "pass actor=threads, or actor=ray for env runners"
        )
    if actor.kind == "ray":
        if actor.envs_per_runner:
            config = dataclasses.replace(config, num_envs=actor.runners * actor.envs_per_runner)
        elif actor.runners > config.num_envs or config.num_envs % actor.runners:
            raise ConfigError(
                "actor.runners",
                actor.runners,
                f"must divide num_envs={config.num_envs} (each runner steps num_envs / runners envs of every seed)",
                f"pass actor.envs_per_runner=E (num_envs becomes runners × E) or num_envs="
                f"{actor.runners * max(1, config.num_envs // actor.runners)}",
            )
    elif actor.threads > config.num_envs or config.num_envs % actor.threads:
        raise ConfigError(
            "actor.threads",
            actor.threads,
            f"must divide num_envs={config.num_envs} (each thread steps num_envs / threads envs of every seed)",
            f"pass actor.threads=1 or num_envs={actor.threads * max(1, config.num_envs // actor.threads)}",
        )
    return config


def prepare_host(config: Config, members: Any = None) -> HostRun:
    """Check ``config`` for a host env and build its agent; raises
    :class:`ConfigError` (one line) before anything is written. ``members``
    (a sweep group's :class:`jaxrl.run.spec.Members`: configurations × seeds,
    each with its traced hyperparameters) replaces the config's own seeds."""
    import jax

    config = _checked_actors(config)
    algorithm = algorithm_for(config.algo)
    spec = host_spec(config.env.name, config.env.module)
    kind = "discrete" if isinstance(spec.action_space, Discrete) else "continuous"
    if kind not in algorithm.actions:
        raise ConfigError(
            "algo",
            algorithm.name,
            f"needs {' or '.join(algorithm.actions)} actions and {spec.name} has {kind} ones",
            "use algo=ppo",
        )
    steps = config.num_envs * config.algo.num_steps
    num_updates = max(1, math.ceil(config.total_timesteps / steps))
    # as make_train does: XLA:CPU's speed code (perf=auto|on), e.g. convolutions as
    # patches × kernel, which XLA:CPU runs an order of magnitude faster inside the learner's loops
    seams = {"perf": perf_lib.of(config)} if "perf" in algorithm.seams else {}
    agent = algorithm.make_agent(config.algo, ShapeEnv(spec), config.num_envs, num_updates, **seams)
    if agent.behave is None or agent.complete is None:
        raise ConfigError(
            "algo",
            algorithm.name,
            "does not train on host envs yet",
            "pass algo=ppo",
        )
    chunk = max(1, math.ceil(num_updates / config.num_evals))
    per_member = config.num_envs // actors(config)
    if members is None:  # a train run: the config's seeds (or PBT population), one configuration
        own = members_of(config)
        hparams = jax.tree.map(lambda x: np.array(x, np.float32), own.hparams)  # writable: PBT evolves them
        if config.pbt.population and config.pbt.interval:
            chunk = config.pbt.interval  # a PBT step closes every chunk
        return HostRun(config, spec, agent, own.seeds, hparams, per_member, num_updates, chunk, algorithm.metrics)
    if config.pbt.population:
        raise ConfigError(
            "pbt.population",
            config.pbt.population,
            "is not available in sweeps over host envs yet",
            "train the population alone: python -m jaxrl.train … pbt.population=N",
        )
    hparams = jax.tree.map(lambda x: np.asarray(x).copy(), members.hparams)
    group = (tuple(members.config_index), tuple(members.labels))
    seeds = tuple(members.seeds)
    return HostRun(config, spec, agent, seeds, hparams, per_member, num_updates, chunk, algorithm.metrics, *group)


def _runner_members(run: HostRun) -> Any:
    """A sweep group's members as a Ray env runner's :func:`prepare_host` takes
    them (None for a train run): who they are, not their hyperparameters (the
    learner's alone; acting reads the learner's view)."""
    if not run.labels:
        return None
    return Members(run.seeds, run.config_index, run.labels, None, record_updates=False)


def actors(config: Config) -> int:
    """The pipeline's actors: threads, or Ray env runners (``actor=ray``)."""
    return config.actor.runners if config.actor.kind == "ray" else config.actor.threads


def runner_parts(config: Config, members: Any = None) -> RunnerParts:
    """What a Ray env runner builds in its own process: its vector env (every
    member's share) and the members' jitted policy (the learner's own program);
    ``members``: a sweep group's (:func:`prepare_host`)."""
    run = prepare_host(config, members)
    env = make_vec(run.spec, len(run.seeds) * run.per_member, mode=config.actor.envs)
    return RunnerParts(env, _programs(run).policy, run.spec.obs_shape)


class _Programs(NamedTuple):
    init: Any  # (keys [M], hparams) -> states
    learn: Any  # (states, steps {field: [M, T, N, ...]}, hparams, update) -> (states, metrics)
    policy: Any  # (states, obs [M, n, *obs], key, step[, carry [M, n, C]]) -> (env action, Behaviour[, carry])
    act: Any  # (states, obs [M, n, *obs], carry [M, n, C] | None) -> (carry, deterministic env action)
    view: Any  # (states, hparams, update) -> what the actors' policy reads for that update (None: the states)
    start_carry: Any  # (states, n) -> [M, n, C]: a recurrent policy's carry at an episode's start (None: memoryless)
    actor_carry: Any  # (states, n) -> [M, n, C]: the actors' per-env carry at an episode's start (recurrent or explore)


def warm_updates(run: HostRun) -> int:
    """Updates of a replay learner's random-action warm-up on host envs (its buffer
    filled to ``algo.learning_starts`` by the actors, no gradient step); 0 for the others."""
    agent = run.agent
    return 0 if agent.warm is None else -(-agent.warmup_steps // agent.steps_per_update)


def _programs(run: HostRun) -> _Programs:
    import jax
    import jax.numpy as jnp

    agent, members, warming = run.agent, len(run.seeds), warm_updates(run)

    def learn_one(state, steps, hp, update):
        batch = agent.complete(state, steps)
        if warming:  # the update index is the members' own: a real branch under vmap
            new, metrics = jax.lax.cond(update < warming, agent.warm, agent.learn, state, batch, hp, update)
        else:
            new, metrics = agent.learn(state, batch, hp, update)
        keep = metrics.loop.finite  # a non-finite update is not applied (its keys still advance)
        new = jax.tree.map(
            lambda a, b: a if jnp.issubdtype(a.dtype, jax.dtypes.prng_key) else jnp.where(keep, a, b), new, state
        )
        return new, metrics

    def policy(states, obs, key, step, *carry):
        keys = jax.random.split(jax.random.fold_in(key, step), members)
        if carry:  # each env's carry (a recurrent policy's, or exploration memory) goes in and comes back
            after, action, record = jax.vmap(agent.behave)(states, carry[0], obs, keys)
            return action, record, after
        return jax.vmap(agent.behave)(states, obs, keys)

    _, step_fn = policy_step(agent, deterministic=True)

    def act(states, obs, carry):
        keys = jax.random.split(jax.random.key(0), members)
        return jax.vmap(step_fn)(states, carry, obs, keys)

    def starting(init_carry: Any) -> Any:
        if init_carry is None:
            return None

        def start_carry(states: Any, n: int) -> np.ndarray:
            return np.asarray(jax.vmap(lambda state: init_carry(state, (n,)))(states))

        return start_carry

    start_carry = starting(agent.init_carry)
    return _Programs(
        jax.jit(jax.vmap(agent.init)),
        jax.jit(jax.vmap(learn_one, in_axes=(0, 0, 0, None))),
        jax.jit(policy),
        jax.jit(act),
        None if agent.acting is None else jax.jit(jax.vmap(agent.acting, in_axes=(0, 0, None))),
        start_carry,
        start_carry if agent.explore_carry is None else starting(agent.explore_carry),
    )


def _compile(run: HostRun, programs: _Programs, states: Any, actor_device: Any = None) -> _Programs:
    """The learner's and the actors' programs compiled ahead of the first update
    (the compile is timed apart from training, and no actor compiles in its thread)."""
    import jax

    members, steps, n = len(run.seeds), run.config.algo.num_steps, run.config.num_envs
    obs = np.zeros((members, n, *run.spec.obs_shape), np.float32)
    key = jax.random.key(0)
    view = states if programs.view is None else programs.view(states, run.hparams, np.int32(0))
    carry = () if programs.actor_carry is None else (programs.actor_carry(states, run.per_member),)
    action, record = jax.eval_shape(programs.policy, view, obs[:, : run.per_member], key, np.int32(0), *carry)[:2]

    def like(x: Any, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros((members, steps, n, *shape), x.dtype)

    example = {
        "obs": like(obs, run.spec.obs_shape),
        "action": like(record.action, record.action.shape[2:]),
        "log_prob": like(record.log_prob, ()),
        "reward": np.zeros((members, steps, n), np.float32),
        "terminated": np.zeros((members, steps, n), bool),
        "truncated": np.zeros((members, steps, n), bool),
        "final_obs": like(obs, run.spec.obs_shape),
        "episode_return": np.zeros((members, steps, n), np.float32),
        "episode_length": np.zeros((members, steps, n), np.int32),
        "cut": np.zeros((members, steps, n), bool),
    }
    if carry:  # the carry each step was acted from
        example["carry"] = np.zeros((members, steps, n, carry[0].shape[-1]), np.float32)
    learn = programs.learn.lower(states, example, run.hparams, np.int32(0)).compile()
    acting = view if actor_device is None else jax.device_put(view, actor_device)
    if carry and actor_device is not None:
        carry = (jax.device_put(carry[0], actor_device),)
    policy = programs.policy.lower(acting, obs[:, : run.per_member], key, np.int32(0), *carry).compile()
    episodes = run.config.eval.episodes
    eval_carry = None if programs.start_carry is None else programs.start_carry(states, episodes)
    act = programs.act.lower(states, np.zeros((members, episodes, *run.spec.obs_shape), np.float32), eval_carry)
    return programs._replace(learn=learn, policy=policy, act=act.compile())


def evaluate_members(
    run: HostRun,
    act: Callable[..., Any],
    states: Any,
    episodes: int,
    max_steps: int,
    seed: int,
    carry: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every member's policy ``act(states, obs [M, E, *obs], carry) -> (carry,
    action)`` on ``episodes`` fresh episodes of its own (one env each, seeded
    ``seed + i``): the returns and lengths ``[M, E]``. ``carry``: a recurrent
    policy's at an episode's start ``[M, E, C]`` (None: memoryless). An episode
    still running after ``max_steps`` steps counts with what it had."""
    members = len(run.seeds)
    env = make_vec(run.spec, members * episodes, evaluation=True)
    memory = carry
    try:
        obs = env.reset(seed)
        ret, length = np.zeros(members * episodes), np.zeros(members * episodes)
        running = np.ones(members * episodes, bool)
        for _ in range(max_steps):
            memory, action = act(states, obs.reshape(members, episodes, *obs.shape[1:]), memory)
            action = np.asarray(action)
            out = env.step(action.reshape(members * episodes, *action.shape[2:]))
            counted = running & out.valid
            ret += np.where(counted, out.reward, 0.0)
            length += counted
            running &= ~((out.terminated | out.truncated) & out.valid)
            if not running.any():
                break
            obs = out.obs
    finally:
        env.close()
    return ret.reshape(members, episodes), length.reshape(members, episodes)


class _Loop(NamedTuple):
    run: HostRun
    programs: _Programs
    pipeline: Sebulba
    writer: JsonlWriter
    dashboards: list[Any]  # TensorBoard / W&B writers (logger=)
    ckpt: Checkpointer | None
    log: Callable[[str], None]
    stopper: StopRequest
    run_dir: str
    chash: str


def _eval_steps(run: HostRun) -> int:
    return run.config.eval.max_steps or run.spec.max_episode_steps or 10_000


def _update_record(run: HostRun, chunk: int, update: int, metrics: Any, report: UpdateReport) -> UpdateRecord:
    loop = metrics.loop
    episodes = np.asarray(loop.episodes)
    returns = np.asarray(loop.episode_return_sum) / np.maximum(episodes, 1)
    lengths = np.asarray(loop.episode_length_sum) / np.maximum(episodes, 1)
    own = {name: np.asarray(getattr(metrics, name)).astype(float).tolist() for name in run.metric_names}
    return UpdateRecord(
        chunk=chunk,
        update=update,
        env_steps=update * run.config.rollout_size,
        episode_return=[float(r) if e else None for r, e in zip(returns, episodes, strict=True)],
        episode_length=[float(r) if e else None for r, e in zip(lengths, episodes, strict=True)],
        episodes=episodes.astype(int).tolist(),
        metrics={**own, "pipeline": report.to_json()},
    )


def _chunk_end(
    loop: _Loop, states: Any, chunk: int, update: int, seconds: float, reports: list[UpdateReport]
) -> tuple[EvalRecord, Any]:
    """The chunk's evaluation record, a PBT step (a population, before the last
    chunk) and the checkpoint of what the next chunk starts from; returns the
    record and the states the learner goes on with."""
    run, config = loop.run, loop.run.config
    episodes, start_carry = config.eval.episodes, loop.programs.start_carry
    carry = None if start_carry is None else start_carry(states, episodes)
    returns, lengths = evaluate_members(
        run, loop.programs.act, states, episodes, _eval_steps(run), 10_000_019 + chunk, carry
    )
    means = returns.mean(1).tolist()
    steps = update * config.rollout_size
    record = EvalRecord(
        chunk=chunk,
        update=update,
        env_steps=steps,
        eval_return=means,
        eval_return_std=returns.std(1).tolist(),
        eval_length=lengths.mean(1).tolist(),
        failed_at_update=[0] * len(run.seeds),
        chunk_time_s=seconds,
        env_steps_per_s=len(reports) * config.rollout_size * len(run.seeds) / seconds if seconds > 0 else 0.0,
    )
    if config.pbt.population:  # the hyperparameters the chunk trained with, then the step's copies
        record.hparams = jsonable(run.hparams.to_dict())
        states, parents = _pbt_step(run, states, returns, chunk, update < run.num_updates)
        record.parents = parents
    if loop.ckpt is not None:
        failed = save_checkpoint(loop.ckpt, chunk, _saved(run, states), {"update": update, "config_hash": loop.chash})
        if failed is not None:
            raise HostEnvError(f"checkpoint of chunk {chunk} could not be written: {failed}")
    last = reports[-1]
    if config.progress:
        lever = _pipeline_totals(reports, config, len(run.seeds))
        loop.log(
            f"chunk {chunk + 1}/{math.ceil(run.num_updates / run.chunk_updates)} · {format_count(steps)} steps each · "
            f"eval IQM {stats.iqm(means):.1f} (min {min(means):.1f}, max {max(means):.1f}) · "
            f"{format_count(record.env_steps_per_s)} steps/s · lag ≤ {last.lag_max} · {lever['verdict']}"
        )
    return record, states


@struct.dataclass
class _Population:
    """A host run's learner states as :func:`jaxrl.trainer.pbt.exploit_explore` takes a population."""

    agent: Any
    failed_at: Any


def _pbt_step(run: HostRun, states: Any, returns: np.ndarray, chunk: int, more: bool) -> tuple[Any, list[int]]:
    """PBT's exploit/explore on the members after chunk ``chunk`` (``more``: a chunk follows;
    none after the last), ranked by their evaluation ``returns`` ``[M, E]``: the states the
    learner goes on with and the member each slot copied (−1: none). ``run.hparams`` is
    updated in place (the learner's program and the actors' view read it at every update)."""
    import jax

    if not more:
        return states, [-1] * len(run.seeds)
    pbt = run.config.pbt
    algorithm = algorithm_for(run.config.algo)
    key = jax.random.fold_in(jax.random.key(pbt.seed), 1_000 + chunk)  # per chunk: a resumed run repeats it
    population = _Population(states, np.zeros(len(run.seeds), np.int32))
    fitness = np.asarray(returns, np.float32).mean(axis=1)
    new, hparams, step = pbt_lib.exploit_explore(
        population, run.hparams, fitness, key, pbt, algorithm.pbt_bounds, algorithm.own_fields
    )
    _set_hparams(run, hparams)
    return new.agent, [int(p) for p in np.asarray(step.parents)]


RAY_LEVER = "more env runners (actor.runners, on more nodes: actor.address) or envs per runner (actor.envs_per_runner)"


def lever_of(word: str, config: Config) -> str:
    """What to change for a run with ``word``'s verdict; a learner-bound replay
    learner's lever is its gradient steps per env step (``algo.utd``), that of
    one gradient step per rollout (A2C, IMPALA) longer rollouts; a rollout-bound run on
    Ray env runners adds runners, one on gymnasium's sync vector envs may also
    step them in processes (envpool's pool has its own threads)."""
    algo = config.algo
    if word == "learner-bound" and hasattr(algo, "utd"):
        return "fewer gradient steps per env step (algo.utd) or a smaller batch (algo.batch_size)"
    if word == "learner-bound" and not hasattr(algo, "update_epochs"):  # one gradient step per rollout (A2C, IMPALA)
        return "longer rollouts (algo.num_steps: fewer, larger updates) or a smaller network"
    if word == "rollout-bound" and config.actor.kind == "ray":
        return RAY_LEVER
    gymnasium_sync = config.env.name.lower().startswith("gymnasium:") and config.actor.envs == "sync"
    if word == "rollout-bound" and not gymnasium_sync:
        return "more actor threads (actor.threads) or more envs (num_envs)"
    return LEVERS[word]


def _pipeline_totals(reports: list[UpdateReport], config: Config, members: int) -> dict[str, Any]:
    """Per-update means of the pipeline's figures, the lag range, the share of env steps
    dropped past the lag bound, the run's verdict and its lever (on Ray env runners also
    the parameter fetch and trajectory transfer per runner, and the faults)."""
    n = len(reports)
    mean = {f: sum(getattr(r, f) for r in reports) / n for f in TIME_FIELDS}
    ray = config.actor.kind == "ray"
    fetch = sum(r.fetch_s for r in reports) / n
    busy = mean["actor_env_s"] + mean["actor_infer_s"] + mean["actor_copy_s"] + fetch * actors(config)
    word = verdict(busy, mean["learn_s"])
    stale = sum(r.stale_steps for r in reports)
    learned = n * config.rollout_size * members
    out = {
        **{f"{k}_per_update": round(v, 6) for k, v in mean.items()},
        "lag_min": min(r.lag_min for r in reports),
        "lag_mean": round(sum(r.lag_mean for r in reports) / n, 4),
        "lag_max": max(r.lag_max for r in reports),
        "steps_per_s": round(sum(r.steps_per_s for r in reports) / n, 1),
        "stale_share": round(stale / (stale + learned), 4) if stale else 0.0,
        "verdict": word,
        "lever": lever_of(word, config),
    }
    if ray:
        out.update(
            fetch_s_per_runner=round(fetch, 6),
            transfer_s_per_runner=round(sum(r.transfer_s for r in reports) / n, 6),
            runners_replaced=sum(r.replaced for r in reports),
            trajectories_dropped=sum(r.dropped for r in reports),
        )
    return out


def pipeline_text(totals: dict[str, Any]) -> str:
    """The final table's pipeline lines."""
    ms = {k: 1000 * totals[f"{k}_per_update"] for k in TIME_FIELDS}
    share = totals.get("stale_share", 0.0)
    stale = f" · {100 * share:.1f} % of env steps dropped past the lag bound" if share else ""
    ray = ""
    if "fetch_s_per_runner" in totals:
        ray = (
            f"Ray env runners per update: parameter broadcast {1000 * totals['fetch_s_per_runner']:.1f} ms · "
            f"trajectory transfer {1000 * totals['transfer_s_per_runner']:.1f} ms per runner · "
            f"{totals['runners_replaced']} runner(s) replaced ({totals['trajectories_dropped']} trajectories dropped)\n"
        )
    return (
        f"pipeline per update: actors env {ms['actor_env_s']:.1f} ms · inference {ms['actor_infer_s']:.1f} ms · "
        f"copies {ms['actor_copy_s']:.1f} ms · waiting {ms['actor_wait_s']:.1f} ms | learner waiting "
        f"{ms['learner_wait_s']:.1f} ms · learning {ms['learn_s']:.1f} ms | policy lag {totals['lag_min']}–"
        f"{totals['lag_max']} (mean {totals['lag_mean']:.2f}){stale}\n"
        f"{ray}verdict: {totals['verdict']} — lever: {totals['lever']}"
    )


def _train(loop: _Loop, states: Any, start: int) -> tuple[Any, list[Any], list[UpdateReport], float, str | None]:
    """Updates ``start`` … the budget; returns states, records, reports, train seconds and the stop reason."""
    import jax

    run, pipeline, programs = loop.run, loop.pipeline, loop.programs
    records: list[Any] = []
    reports: list[UpdateReport] = []
    chunk_reports: list[UpdateReport] = []
    train_s, chunk_t0 = 0.0, time.perf_counter()
    for k in range(start, pipeline.num_updates):
        t0 = time.perf_counter()
        try:
            steps, collected = pipeline.collect(k, lambda: loop.stopper.signum is not None)
        except Stopped:
            return states, records, reports, train_s, "signal"
        t1 = time.perf_counter()
        states, metrics = programs.learn(states, steps, run.hparams, np.int32(k))
        metrics = jax.block_until_ready(metrics)
        learn_s = time.perf_counter() - t1
        ends = (k + 1) % run.chunk_updates == 0 or k + 1 == run.num_updates
        evolving = ends and run.config.pbt.population > 0  # the actors wait for the PBT step's copies
        if not evolving:
            pipeline.publish(states, k + 1)
        report = pipeline.report(k, collected, learn_s, time.perf_counter() - t0)
        train_s += time.perf_counter() - t0
        reports.append(report)
        chunk_reports.append(report)
        chunk = k // run.chunk_updates
        records.append(_update_record(run, chunk, k + 1, metrics, report))
        if not bool(np.all(np.asarray(metrics.loop.finite))):
            bad = [s for s, ok in zip(run.seeds, np.asarray(metrics.loop.finite), strict=True) if not ok]
            return states, records, reports, train_s, f"on_nan: update {k + 1} of seed(s) {bad} was not finite"
        if ends:
            seconds = time.perf_counter() - chunk_t0
            record, states = _chunk_end(loop, states, chunk, k + 1, seconds, chunk_reports)
            records.append(record)
            if evolving:
                pipeline.publish(states, k + 1)
            new = [r.to_json() for r in records[-len(chunk_reports) - 1 :]]
            loop.writer.write(new)
            for dashboard in loop.dashboards:
                dashboard.write(new)
            chunk_reports, chunk_t0 = [], time.perf_counter()
    return states, records, reports, train_s, None


def _start_states(
    run: HostRun,
    programs: _Programs,
    run_dir: str,
    resuming: bool,
    digests: tuple[str, ...],
    log: Callable[[str], None],
) -> tuple[Any, int, Checkpointer | None]:
    import jax

    keys = jax.vmap(jax.random.key)(np.asarray(run.seeds, np.uint32))
    states = programs.init(keys, run.hparams)
    ckpt = Checkpointer(run_dir, keep=run.config.keep) if run.config.checkpoint else None
    if not resuming:
        return states, 0, ckpt
    if ckpt is None or ckpt.latest() is None:
        raise ConfigError("resume", run_dir, "has no checkpoint to continue from", "start a new run without resume=")
    abstract = jax.eval_shape(lambda: _saved(run, states))
    device = jax.devices()[0]
    shardings = jax.tree.map(lambda _: jax.sharding.SingleDeviceSharding(device), abstract)
    restored = ckpt.restore(abstract, shardings)
    if restored.meta.get("config_hash") not in digests:
        raise ConfigError("resume", run_dir, "was written with other settings", "resume with its own config.yaml")
    if "hparams" in restored.state:  # a PBT population's evolved hyperparameters
        _set_hparams(run, restored.state["hparams"])
    update = int(restored.meta["update"])
    log(f"resuming at update {update}: the learner's state is restored; host env episodes in flight restart")
    return restored.state["states"], update, ckpt


def _set_hparams(run: HostRun, hparams: Any) -> None:
    """``run.hparams`` set to ``hparams`` in place (the learner's program and the actors' view read it)."""
    import jax

    for old, value in zip(jax.tree.leaves(run.hparams), jax.tree.leaves(hparams), strict=True):
        old[...] = np.asarray(value)


def _saved(run: HostRun, states: Any) -> dict[str, Any]:
    """What a checkpoint holds: the learner's states (and a PBT population's hyperparameters)."""
    return {"states": states, **({"hparams": run.hparams} if run.config.pbt.population else {})}


def _pipeline(
    run: HostRun,
    programs: _Programs,
    start: int,
    stop_after: int | None,
    actor_device: Any,
    ray_started: bool = False,
    log: Callable[[str], None] = lambda text: None,
    carry: np.ndarray | None = None,
) -> Sebulba:
    """The actor–learner pipeline of ``run`` from update ``start`` (``stop_after``: updates to run, if not all);
    ``ray_started``: this run started the local Ray runtime its runners use (``actor=ray``); ``carry``:
    a recurrent policy's carry at an episode's start ``[M, per_member, C]``."""
    import jax

    config, members = run.config, len(run.seeds)
    end = run.num_updates if stop_after is None else min(run.num_updates, start + stop_after)
    transport = None
    unit = "actor"
    if config.actor.kind == "ray":
        unit = "runner"
        build = functools.partial(runner_parts, config, _runner_members(run))

        def transport(pipeline: Sebulba) -> RayRunners:
            return RayRunners(
                pipeline,
                build=lambda index, generation: build,
                runners=config.actor.runners,
                cpus_per_runner=config.actor.cpus_per_runner,
                strategy=config.actor.strategy,
                max_replaced=config.actor.max_replaced,
                started=ray_started,
                log=log,
            )

    return Sebulba(
        transport=transport,
        make_env=lambda i: make_vec(run.spec, members * run.per_member, mode=config.actor.envs),
        policy=programs.policy,
        view=None if programs.view is None else lambda states, version: programs.view(states, run.hparams, version),
        members=members,
        per_member=run.per_member,
        threads=config.actor.threads,
        num_steps=config.algo.num_steps,
        num_updates=end,
        max_lag=0 if config.actor.sync else config.actor.max_lag,
        timeout_s=config.actor.timeout_s,
        seed=config.seed * 1_000_003 + start,
        key=jax.random.key(config.seed + 7919 * start),
        actor_device=actor_device,
        start_update=start,
        describe_env=lambda actor, env: (
            f"env {run.spec.name}: {run.member_name(env // run.per_member)} "
            f"(its env {env % run.per_member} in {unit} {actor})"
        ),
        carry=carry,
        fresh_episodes=run.agent.fresh_episodes,
    )


def _actors_text(config: Config) -> str:
    a = config.actor
    if a.kind == "ray":
        where = a.address or "a local Ray runtime"
        return f"{a.runners} Ray env runner(s) ({a.cpus_per_runner:g} CPU each, {a.strategy}, on {where})"
    return f"{a.threads} actor thread(s)"


def run_host(
    config: Config,
    log: Callable[[str], None],
    stopper: StopRequest | None,
    stop_after_chunks: int | None = None,
    group: tuple[HostRun, str, bool] | None = None,
) -> int:
    """Train ``config`` (a host env) through the pipeline; returns the exit code.
    ``stop_after_chunks``: stop there with a checkpoint (tests, scripted preemption).
    ``group``: a sweep group's ``(prepared run, its directory, resuming)`` instead
    of ``config``'s own run."""
    started = time.perf_counter()
    stopper = stopper or StopRequest()  # signals are the caller's to install
    run = prepare_host(config) if group is None else group[0]
    config = run.config  # actor.envs_per_runner sets num_envs
    ray_started = False
    if config.actor.kind == "ray":  # join (or start) Ray and check its CPUs before anything is written
        a = config.actor
        ray_started = connect(a.address, a.runners, a.cpus_per_runner, a.strategy)
    try:
        return _run_host(run, log, stopper, stop_after_chunks, started, ray_started, group)
    finally:
        if ray_started:  # the runners' close shuts it down; a run stopped before them, here
            import ray

            ray.shutdown()


def _run_host(
    run: HostRun,
    log: Callable[[str], None],
    stopper: StopRequest,
    stop_after_chunks: int | None,
    started: float,
    ray_started: bool,
    group: tuple[HostRun, str, bool] | None = None,
) -> int:
    import jax

    config = run.config
    if group is None:
        resuming = config.resume is not None
        run_dir = config.run_dir if resuming else new_run_dir(config)
    else:
        _, run_dir, resuming = group
    data = {
        k: v
        for k, v in to_dict(config).items()
        if k not in ("run_dir", "runs_root", "resume", "actor", "progress", "plots", "keep", "checkpoint", "logger")
    }
    digests = accepted_hashes(data, config, HOST_KEPT_BEFORE)  # this version's first, then earlier ones'

    chash = digests[0]
    if not resuming:
        make_dir("run_dir" if config.run_dir else "runs_root", run_dir)
        write_config(os.path.join(run_dir, "config.yaml"), dataclasses.replace(config, run_dir=run_dir))
    log(f"run directory: {run_dir}")
    members = len(run.seeds)
    who = f"{len(run.labels)} configurations × {members // len(run.labels)}" if run.labels else str(members)
    log(
        f"{run.spec.name} · {config.algo.name} · {who} seed(s) × {config.num_envs} envs in "
        f"{_actors_text(config)} · {run.num_updates} updates · actor–learner pipeline "
        f"(policy lag ≤ {0 if config.actor.sync else config.actor.max_lag})"
    )
    stop_after_updates = None if stop_after_chunks is None else stop_after_chunks * run.chunk_updates
    programs = _programs(run)
    t0 = time.perf_counter()
    states, start, ckpt = _start_states(run, programs, run_dir, resuming, digests, log)
    # the learner on the last accelerator, the actors on the first, where there are several (the
    # CPU's devices share one client: splitting them costs copies and saves no waiting)
    devices = jax.devices()
    actor_device = devices[0] if len(devices) > 1 and jax.default_backend() != "cpu" else None
    if actor_device is not None:
        states = jax.device_put(states, devices[-1])
    programs = _compile(run, programs, states, actor_device)
    compile_s = time.perf_counter() - t0
    carry = None if programs.actor_carry is None else programs.actor_carry(states, run.per_member)
    pipeline = _pipeline(run, programs, start, stop_after_updates, actor_device, ray_started, log, carry)
    writer = JsonlWriter(os.path.join(run_dir, "metrics.jsonl"))
    if resuming:
        writer.truncate(lambda r: r.get("update", 0) <= start)
    dashboards = _dashboards(run, run_dir, start * config.rollout_size, fresh=not resuming)
    loop = _Loop(run, programs, pipeline, writer, dashboards, ckpt, log, stopper, run_dir, chash)
    try:
        return _drive(loop, states, start, stop_after_updates, compile_s, started)
    finally:
        for dashboard in dashboards:
            dashboard.close()


def _drive(
    loop: _Loop, states: Any, start: int, stop_after_updates: int | None, compile_s: float, started: float
) -> int:
    """The pipeline from update ``start`` to the budget (or ``stop_after_updates``), then the summary."""
    run, pipeline, log, stopper = loop.run, loop.pipeline, loop.log, loop.stopper
    try:
        pipeline.start(states, start, run.spec.obs_shape)
        states, records, reports, train_s, reason = _train(loop, states, start)
    except HostEnvError as error:
        return _stopped(loop, str(error), 2)
    finally:
        stuck = pipeline.close()
        if loop.ckpt is not None:
            loop.ckpt.close()
    if stuck:
        log(f"note: {', '.join(stuck)} still inside an env step (a hung env cannot be interrupted)")
    if reason == "signal":
        return _stopped(
            loop,
            f"{'SIGINT' if stopper.signum == 2 else 'signal'}: stopped; the last checkpoint is kept",
            stopper.exit_code,
        )
    if reason is not None:
        return _stopped(loop, reason, 2)
    if stop_after_updates is not None and pipeline.num_updates < run.num_updates:
        return 0
    return _finish(loop, states, loop.writer, compile_s, train_s, reports, started)


def _dashboards(run: HostRun, run_dir: str, start_env_steps: int, fresh: bool) -> list[Any]:
    """TensorBoard / W&B writers (``logger=``): one curve per seed and declared
    metric, and the pipeline's figures under ``pipeline/``. One that cannot
    start is a setup problem: a ConfigError (a new run directory is removed)."""
    config = run.config
    return open_dashboards(
        config.logger,
        config.wandb_project,
        to_dict(dataclasses.replace(config, resume=None)),
        run_dir,
        [
            f"{run.labels[c].replace(' ', ',')}/seed_{s}" if len(run.labels) > 1 else f"seed_{s}"
            for s, c in zip(run.seeds, run.config_index or [0] * len(run.seeds), strict=True)
        ],
        start_env_steps,
        run.metric_names,
        lambda: shutil.rmtree(run_dir, ignore_errors=True) if fresh else None,
    )


def _stopped(loop: _Loop, text: str, code: int) -> int:
    kept = loop.ckpt.latest() if loop.ckpt is not None else None
    resume = (
        f"python -m jaxrl.sweep resume={os.path.dirname(loop.run_dir)}" if loop.run.labels else f"resume={loop.run_dir}"
    )
    where = f"; last checkpoint: chunk {kept} ({resume})" if kept is not None else "; no checkpoint was written"
    loop.log(f"error: {text}{where}" if code == 2 else f"{text}{where}")
    return code


def _finish(
    loop: _Loop,
    states: Any,
    writer: JsonlWriter,
    compile_s: float,
    train_s: float,
    reports: list[UpdateReport],
    started: float,
) -> int:
    import jax

    run, config = loop.run, loop.run.config
    records = read_records(writer.path)
    evals = [r for r in records if isinstance(r, EvalRecord)]
    final = [float(v) for v in evals[-1].eval_return]
    total = run.num_updates * config.rollout_size
    totals = _pipeline_totals(reports, config, len(run.seeds)) if reports else {}
    result = {
        "env": run.spec.name,
        "algo": config.algo.name,
        "seeds": list(run.seeds),
        "total_timesteps": total,
        "final_eval_return": final,
        **stats.summarize(final, run.spec.solved_return),
        "failed_seeds": [],
        "solved_threshold": run.spec.solved_return,
        "eval_episodes": config.eval.episodes,
        "compile_time_s": compile_s,
        "train_time_s": train_s,
        "wall_time_s": time.perf_counter() - started,
        "env_steps_per_s": total * len(run.seeds) / train_s if train_s > 0 else None,
        "num_updates": run.num_updates,
        "members": len(run.seeds),
        "actor": "threads",
        "pipeline": totals,
        "run_dir": loop.run_dir,
        "jaxrl_version": __version__,
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
        "devices": 1,  # the learner's: every seed in one vmapped program on one device
    }
    if config.pbt.population:  # the best member's lineage, as an in-program population's summary has
        result["pbt"] = summary.pbt_summary(evals, list(final), config.pbt.hparams)
    if run.labels:  # a sweep group: one block per configuration, as a compiled group's summary has
        result["configs"] = _config_blocks(run, final)
        for key in ("seeds", "final_eval_return", *stats.summarize(final, run.spec.solved_return)):
            result.pop(key)
    write_json(os.path.join(loop.run_dir, "summary.json"), result)
    hyper = flat(to_dict(dataclasses.replace(config, run_dir=None, resume=None)))
    for dashboard in loop.dashboards:
        dashboard.finish(hyper, {k: result.get(k) for k in ("iqm", "mean", "solved_fraction")})
    if config.plots:
        summary.plot_run(loop.run_dir, records, f"{run.spec.name} · {config.algo.name}", run.spec.solved_return)
    title = f"{run.spec.name} · {config.algo.name} · final deterministic evaluation ({config.eval.episodes} episodes per seed)"
    for block in result.get("configs") or [result]:
        heading = f"{title} · {block['label']}" if "label" in block else title
        table = stats.robustness_table(
            block["seeds"], block["final_eval_return"], block, run.spec.solved_return, heading
        )
        print(table, flush=True)
    if "pbt" in result:
        print(summary.pbt_text(result["pbt"]), flush=True)
    if totals:
        print(pipeline_text(totals), flush=True)
    count = "?" if result["env_steps_per_s"] is None else format_count(result["env_steps_per_s"])
    loop.log(
        f"compile {compile_s:.1f} s · train {train_s:.1f} s · {count} env steps/s · wall {result['wall_time_s']:.1f} s"
    )
    loop.log(f"run directory: {loop.run_dir}")
    return 0


def _config_blocks(run: HostRun, final: list[float]) -> list[dict[str, Any]]:
    """A sweep group's configurations: each one's label, traced hyperparameters,
    seeds, final returns and their statistics."""
    blocks = []
    for c, label in enumerate(run.labels):
        members = [i for i, ci in enumerate(run.config_index) if ci == c]
        values = [final[i] for i in members]
        blocks.append(
            {
                "label": label,
                "hparams": {k: float(np.asarray(v)[members[0]]) for k, v in run.hparams.to_dict().items()},
                "seeds": [run.seeds[i] for i in members],
                "final_eval_return": values,
                **stats.summarize(values, run.spec.solved_return),
                "failed_seeds": [],
            }
        )
    return blocks


class OpenedHostRun(NamedTuple):
    """A finished or stopped host-env run, loaded for use after training."""

    run: HostRun
    states: Any  # the learner's states of every member (leading member axis)
    update: int  # updates done when the checkpoint was written
    chunk: int  # the checkpoint's index
    run_dir: str


def open_host_run(run_dir: str, config: Config, members: Any = None) -> OpenedHostRun:
    """``run_dir``'s host-env run (its ``config``; a sweep group's ``members``)
    with its newest checkpoint."""
    import jax

    run = prepare_host(config, members)
    ckpt = Checkpointer(run_dir, keep=config.keep)
    try:
        if ckpt.latest() is None:
            raise ConfigError("run_dir", run_dir, "holds no checkpoint", "train it first (python -m jaxrl.train)")
        keys = jax.vmap(jax.random.key)(np.asarray(run.seeds, np.uint32))
        abstract = jax.eval_shape(lambda: _saved(run, jax.vmap(run.agent.init)(keys, run.hparams)))
        device = jax.devices()[0]
        shardings = jax.tree.map(lambda _: jax.sharding.SingleDeviceSharding(device), abstract)
        restored = ckpt.restore(abstract, shardings, field="run_dir")
    finally:
        ckpt.close()
    if "hparams" in restored.state:  # a PBT population's evolved hyperparameters
        _set_hparams(run, restored.state["hparams"])
    return OpenedHostRun(run, restored.state["states"], int(restored.meta.get("update", 0)), restored.chunk, run_dir)


def pick(run: HostRun, seed: int | str | None, config_label: str | None = None) -> list[int]:
    """:func:`jaxrl.run.spec.pick_members` of a host-env run (a train run: one configuration)."""
    config_index = run.config_index or (0,) * len(run.seeds)
    return pick_members(run.seeds, config_index, run.labels or ("default",), seed, config_label)


def member_index(opened: OpenedHostRun, seed: int | None, config_label: str | None = None) -> int:
    """The member of ``seed`` (default: the run's first seed; in a sweep group,
    of configuration ``config_label``); ConfigError if there is no such member
    or several."""
    return pick(opened.run, seed, config_label)[0]


def host_member(opened: OpenedHostRun, seed: int | None, config_label: str | None = None) -> tuple[Any, Any]:
    """``(state, agent)`` of one member (:func:`jaxrl.load_policy` of a host-env run,
    ``evaluate render=true``): its state and the run's agent, whose ``act``/``sample``
    (:func:`jaxrl.core.contract.policy_step`) take raw observations."""
    import jax

    member = member_index(opened, seed, config_label)
    return jax.tree.map(lambda x: x[member], opened.states), opened.run.agent


def evaluate_host_run(
    opened: OpenedHostRun,
    episodes: int,
    seed: int | str,
    deterministic: bool,
    max_steps: int,
    config_label: str | None = None,
) -> dict[str, Any]:
    """``python -m jaxrl.evaluate`` of a host-env run: every (``seed="all"``) or
    one member's policy (of configuration ``config_label`` in a sweep group) on
    ``episodes`` fresh episodes of its own; returns evaluation.json's content."""
    import jax

    run = opened.run
    members = pick(run, seed if seed == "all" else int(seed), config_label)
    states = jax.tree.map(lambda x: x[np.asarray(members)], opened.states)
    init_carry, choose = policy_step(run.agent, deterministic)

    @jax.jit
    def act(states: Any, obs: Any, carry: Any, step: Any) -> Any:
        keys = jax.random.split(jax.random.fold_in(jax.random.key(12345), step), len(members))
        return jax.vmap(choose)(states, carry, obs, keys)

    counter = iter(range(10**9))
    sub = run._replace(seeds=tuple(run.seeds[i] for i in members))
    carry = jax.vmap(lambda state: init_carry(state, (episodes,)))(states)
    returns, _ = evaluate_members(
        sub, lambda s, o, c: act(s, o, c, np.int32(next(counter))), states, episodes, max_steps, 20_000_003, carry
    )
    per_seed = []
    for i, row in zip(members, returns, strict=True):
        lo, hi = stats.bootstrap_ci(row, np.mean, n_resamples=1000)
        label = {"config": run.labels[run.config_index[i]]} if run.labels else {}
        per_seed.append(
            {"seed": run.seeds[i], **label, "returns": row.tolist(), "mean": float(row.mean()), "ci95": [lo, hi]}
        )
    return {
        "run_dir": opened.run_dir,
        "episodes": episodes,
        "deterministic": deterministic,
        "max_steps": max_steps,
        "seeds": per_seed,
        **stats.summarize(returns.mean(1), run.spec.solved_return),
    }
