"""The training program: ``init`` / ``update`` / ``train_chunk`` / ``train``.

Everything here is written for ONE seed and one hyperparameter setting (STYLE
#3); the driver (and research code) adds the seed / hyperparameter axes with
``jax.vmap`` outside::

    trainer = jaxrl.make_train(config)
    hp = trainer.hparams                                  # HParams pytree of the algorithm
    keys = jax.vmap(jax.random.key)(jnp.arange(3))
    state = jax.jit(jax.vmap(trainer.init, (0, None)))(keys, hp)
    state, metrics = jax.jit(jax.vmap(trainer.train_chunk, (0, None)))(state, hp)

A chunk is ``chunk_updates`` PPO updates (a ``lax.scan``) followed by a
deterministic evaluation on separate env copies; the host logs and
checkpoints between chunks. ``train(key, hp)`` is the whole run as one
program (init plus every chunk in one ``lax.scan``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.extend.core
import jax.numpy as jnp
from flax import struct

if TYPE_CHECKING:
    from jaxrl.trainer.evaluate import EvalMetrics

from jaxrl import envs as envs_lib
from jaxrl import perf as perf_lib
from jaxrl.algos import get as get_algorithm
from jaxrl.core.config import Config, seed_ids
from jaxrl.envs.params import with_params
from jaxrl.envs.randomize import Randomized
from jaxrl.envs.sets import EvalSet, parse_sets
from jaxrl.trainer.evaluate import make_evaluate  # (lazy: keeps `python -m jaxrl.evaluate` clean)

__all__ = [
    "TrainState",
    "EvalMetrics",
    "ChunkMetrics",
    "Trainer",
    "make_train",
    "seed_keys",
    "make_batched",
    "make_segments",
    "traced_once",
    "Progress",
    "make_evaluate_sets",
]


@struct.dataclass
class TrainState:
    """One seed's complete training state (checkpointed as is)."""

    agent: Any  # algorithm state, e.g. ppo.PPOState
    eval_key: jax.Array  # typed PRNG key []: evaluation stream, separate from training's
    update: jax.Array  # int32 [] updates done
    failed_at: jax.Array  # int32 [] first update (1-based) with non-finite loss/grads/params; 0 = healthy
    last_eval_key: jax.Array  # uint32 [2] data of the key the latest evaluation used (to replay it)


class ChunkMetrics(NamedTuple):
    updates: Any  # algorithm UpdateMetrics, each field [chunk_updates]
    eval: EvalMetrics  # at the end of the chunk
    sets: Any = {}  # noqa: RUF012  (never mutated) eval.sets' name → EvalMetrics, returns [points × episodes]


class Trainer(NamedTuple):
    """Pure functions of one seed plus the static facts of the run."""

    init: Callable[[jax.Array, Any], TrainState]
    update: Callable[[TrainState, Any], tuple[TrainState, Any]]
    evaluate: Callable[..., tuple[TrainState, EvalMetrics]]
    train_chunk: Callable[[TrainState, Any], tuple[TrainState, ChunkMetrics]]
    train: Callable[[jax.Array, Any], tuple[TrainState, ChunkMetrics]]
    hparams: Any  # default traced hyperparameters from the config
    config: Config
    env: envs_lib.Env
    agent: Any  # jaxrl.algos.Agent
    num_updates: int  # total updates per seed
    chunk_updates: int  # updates per chunk
    num_chunks: int
    steps_per_update: int  # env steps per update and seed
    warmup_steps: int = 0  # env steps per seed taken before the first update
    algorithm: Any = None  # jaxrl.algos.Algorithm: the declarations the host reads
    eval_sets: tuple[EvalSet, ...] = ()  # eval.sets, in the order given
    # evaluate_sets(state, eval) -> {name: EvalMetrics}: every named set evaluated
    # with the key of the state's latest evaluation (``eval``: its result, reused
    # for the ``train`` set); reads the state, changes nothing
    evaluate_sets: Callable[[TrainState, EvalMetrics], dict[str, EvalMetrics]] | None = None

    def env_steps(self, updates: int) -> int:
        """Env steps per seed after ``updates`` updates (host-side Python int)."""
        return self.warmup_steps + updates * self.steps_per_update

    @property
    def total_env_steps(self) -> int:
        """Env steps per seed actually trained (≥ config.total_timesteps rounded to a rollout)."""
        return self.env_steps(self.num_updates)


_TRAINER_FIELDS = {
    "init": "init(key, hparams) -> TrainState: one seed's initial state",
    "update": "update(state, hparams) -> (state, UpdateMetrics): one collect + learn step",
    "evaluate": "evaluate(state[, env_params]) -> (state, EvalMetrics): deterministic episodes",
    "train_chunk": "train_chunk(state, hparams) -> (state, ChunkMetrics): chunk_updates updates, then an evaluation",
    "train": "train(key, hparams) -> (state, ChunkMetrics [num_chunks, ...]): the whole run of one seed",
    "hparams": "the config's traced hyperparameters (an HParams pytree), the default second argument",
    "config": "the Config this trainer was built from",
    "env": "the env (jaxrl.envs.Env) it trains on",
    "agent": "the algorithm's Agent: init, collect, learn, act, sample, network",
    "num_updates": "updates per seed in the whole run",
    "chunk_updates": "updates per chunk (one evaluation after each chunk)",
    "num_chunks": "chunks in the whole run",
    "steps_per_update": "env steps per update and seed",
    "warmup_steps": "env steps per seed taken before the first update (off-policy warm-up)",
    "algorithm": "the jaxrl.algos.Algorithm: the declarations the host reads",
    "eval_sets": "eval.sets, in the order given",
    "evaluate_sets": "evaluate_sets(state, eval) -> {name: EvalMetrics}, or None without eval.sets",
}
for _name, _doc in _TRAINER_FIELDS.items():
    getattr(Trainer, _name).__doc__ = _doc


def _is_key(x: Any) -> bool:
    return jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def schedule(config: Config) -> tuple[int, int, int]:
    """``(num_updates, chunk_updates, num_chunks)`` for a config.

    The requested budget ``(total_timesteps − warm-up) / rollout`` is rounded up
    to whole updates, then split into ``num_evals`` chunks of equal length,
    rounding up to whole chunks: a run trains at least ``total_timesteps``.
    """
    warmup = warmup_steps(config)
    requested = max(1, -(-(config.total_timesteps - warmup) // config.rollout_size))
    if config.pbt.population and config.pbt.interval:
        chunk_updates = config.pbt.interval  # a PBT step closes every chunk
    else:
        chunk_updates = math.ceil(requested / config.num_evals)
    num_chunks = math.ceil(requested / chunk_updates)
    return chunk_updates * num_chunks, chunk_updates, num_chunks


def warmup_steps(config: Config) -> int:
    """Env steps per seed an algorithm takes before its first update (SAC's
    random-action warm-up): :attr:`jaxrl.algos.Algorithm.warmup`."""
    return int(get_algorithm(config.algo.name).warmup(config.algo, config.num_envs))


def seed_keys(config: Config) -> jax.Array:
    """Typed PRNG keys ``[S]``, ``jax.random.key(seed_id)`` per seed: a seed's
    stream never depends on which other seeds run beside it."""
    return jax.vmap(jax.random.key)(jnp.asarray(seed_ids(config), jnp.uint32))


def make_train(
    config: Config,
    env: Any = None,
    env_params: Any = None,
    *,
    network: Any = None,
    optimizer: Any = None,
) -> Trainer:
    """Build the pure training functions for ``config``.

    Args:
      config: a :class:`jaxrl.core.config.Config` (:func:`jaxrl.config_for` gives the CLI's).
      env: ``None`` (make ``config.env.name``), a :class:`jaxrl.envs.Env`,
        or a user's gymnax ``Environment`` instance.
      env_params: backend env parameters (default: the env's own defaults).
      network: a flax module ``[..., *obs_shape] → [..., features]`` used as the
        torso under the algorithm's heads (default: the registered
        ``config.algo.network``; register yours with
        :func:`jaxrl.nets.register_torso` to use it from the CLI too).
      optimizer: an ``optax.GradientTransformation`` or a function of the
        (traced) learning rate returning one, e.g. ``optax.adamw`` (default:
        clip + Adam over the raveled parameters; see :mod:`jaxrl.rl.optim`).

    Returns:
      a :class:`Trainer`. Its functions are pure and unbatched (one seed); the
      float hyperparameters are an argument (``trainer.hparams`` holds the
      config's values) so the caller may vmap over them.
    """
    env = envs_lib.from_config(config) if env is None else envs_lib.as_env(env)
    env_params = env.default_params if env_params is None else env_params
    num_updates, chunk_updates, num_chunks = schedule(config)
    algo = config.algo
    algorithm = get_algorithm(algo.name)
    seams = {name: value for name, value in (("network", network), ("optimizer", optimizer)) if value is not None}
    unsupported = sorted(set(seams) - set(algorithm.seams))
    if unsupported:
        raise TypeError(
            f"algorithm {algorithm.name!r} takes no {' or '.join(unsupported)}= (its seams: {algorithm.seams})"
        )
    if "perf" in algorithm.seams:
        seams["perf"] = perf_lib.of(config)
    agent = algorithm.make_agent(algo, env, config.num_envs, num_updates, env_params, **seams)
    hparams = algorithm.hparams(algo)
    eval_steps = config.eval.max_steps or env.max_episode_steps or 1000

    def init(key: jax.Array, hp: Any) -> TrainState:
        key_agent, key_eval = jax.random.split(key)
        return TrainState(
            agent=agent.init(key_agent, hp),
            eval_key=key_eval,
            update=jnp.zeros((), jnp.int32),
            failed_at=jnp.zeros((), jnp.int32),
            last_eval_key=jax.random.key_data(jax.random.key(0)),
        )

    def update(state: TrainState, hp: Any) -> tuple[TrainState, Any]:
        """One update. An update whose loss, gradients or parameters are not
        finite is not applied: the seed's state freezes at its last finite
        values and ``failed_at`` records the update (the host decides whether
        to stop the run or carry on without that seed)."""
        new_agent, metrics = agent.update(state.agent, hp, state.update)
        healthy = state.failed_at == 0
        apply = jnp.logical_and(healthy, metrics.loop.finite)
        # PRNG keys always advance (a frozen seed never reuses a consumed key).
        agent_state = jax.tree.map(
            lambda new, old: new if _is_key(new) else jax.lax.select(apply, new, old), new_agent, state.agent
        )
        failed_at = jnp.where(jnp.logical_and(healthy, ~metrics.loop.finite), state.update + 1, state.failed_at)
        return state.replace(agent=agent_state, update=state.update + 1, failed_at=failed_at), metrics

    run_eval = make_evaluate(env, agent.act, config.eval.episodes, eval_steps, env_params, agent.init_carry)
    # given parameters (held-out settings) are evaluated exactly: a randomized
    # env's draws replace none of them
    fixed = env.inner if isinstance(env, Randomized) else None
    run_fixed = (
        run_eval
        if fixed is None
        else make_evaluate(fixed, agent.act, config.eval.episodes, eval_steps, env_params, agent.init_carry)
    )

    def evaluate(state: TrainState, params: Any = None) -> tuple[TrainState, EvalMetrics]:
        """``eval.episodes`` deterministic episodes on fresh env copies (own PRNG
        stream), under ``params`` (default: the training env's parameters — for a
        randomized env, its training distribution; given ``params`` are used as
        they are, undrawn)."""
        eval_key, key = jax.random.split(state.eval_key)
        state = state.replace(eval_key=eval_key, last_eval_key=jax.random.key_data(key))
        return state, (run_eval if params is None else run_fixed)(state.agent, key, params)

    eval_sets = parse_sets(config.eval.sets, env)
    run_sets = make_evaluate_sets(
        eval_sets, env, agent.act, config.eval.episodes, eval_steps, env_params, agent.init_carry
    )

    def evaluate_sets(state: TrainState, eval_metrics: EvalMetrics) -> dict[str, EvalMetrics]:
        """Every set of ``eval.sets`` under the policy of ``state``, keyed by
        the state's latest evaluation (:func:`make_evaluate_sets`)."""
        key = jax.random.wrap_key_data(state.last_eval_key, impl=jax.random.key_impl(state.eval_key))
        return run_sets(state.agent, key, eval_metrics)

    def train_chunk(state: TrainState, hp: Any) -> tuple[TrainState, ChunkMetrics]:
        state, metrics = jax.lax.scan(lambda s, _: update(s, hp), state, None, length=chunk_updates)
        state, eval_metrics = evaluate(state)
        return state, ChunkMetrics(metrics, eval_metrics, evaluate_sets(state, eval_metrics))

    def train(key: jax.Array, hp: Any) -> tuple[TrainState, ChunkMetrics]:
        state = init(key, hp)
        return jax.lax.scan(lambda s, _: train_chunk(s, hp), state, None, length=num_chunks)

    return Trainer(
        init=init,
        update=update,
        evaluate=evaluate,
        train_chunk=train_chunk,
        train=train,
        hparams=hparams,
        config=config,
        env=env,
        agent=agent,
        num_updates=num_updates,
        chunk_updates=chunk_updates,
        num_chunks=num_chunks,
        steps_per_update=agent.steps_per_update,
        warmup_steps=agent.warmup_steps,
        algorithm=algorithm,
        eval_sets=eval_sets,
        evaluate_sets=evaluate_sets,
    )


def make_evaluate_sets(
    eval_sets: tuple[EvalSet, ...],
    env: envs_lib.Env,
    act: Callable,
    num_episodes: int,
    max_steps: int,
    env_params: Any = None,
    init_carry: Callable | None = None,
) -> Callable[[Any, jax.Array, EvalMetrics], dict[str, EvalMetrics]]:
    """``evaluate_sets(agent_state, key, train_eval) -> {name: EvalMetrics}``:
    every evaluation set (:mod:`jaxrl.envs.sets`) under ``act``.

    ``key`` is the key of the run's own evaluation, whose result ``train_eval``
    is the ``train`` set; set ``i`` draws from ``fold_in(key, i + 1)``, so adding
    a set changes neither training nor the other sets' episodes, and the same
    key replays the same episodes. ``nominal`` and the custom sets run on the
    un-randomized env (a custom set's own draws aside); a custom set's returns
    are ``[points × episodes]``, grid point by grid point.
    """
    fixed = env.inner if isinstance(env, Randomized) else env
    env_params = fixed.default_params if env_params is None else env_params
    programs = {s.name: _set_program(s, fixed, act, num_episodes, max_steps, env_params, init_carry) for s in eval_sets}

    def evaluate_sets(agent_state: Any, key: jax.Array, train_eval: EvalMetrics) -> dict[str, EvalMetrics]:
        out = {}
        for i, s in enumerate(eval_sets):
            program = programs[s.name]
            out[s.name] = train_eval if program is None else program(agent_state, jax.random.fold_in(key, i + 1))
        return out

    return evaluate_sets


def _set_program(
    s: EvalSet,
    fixed: envs_lib.Env,
    act: Callable,
    num_episodes: int,
    max_steps: int,
    env_params: Any,
    init_carry: Callable | None,
) -> Callable[[Any, jax.Array], EvalMetrics] | None:
    """``program(agent_state, key) -> EvalMetrics`` of one set (None for ``train``)."""
    if s.kind == "train":
        return None
    env = Randomized(fixed, s.dists) if s.dists else fixed
    run = make_evaluate(env, act, num_episodes, max_steps, env_params, init_carry)
    if s.kind == "nominal":
        return lambda agent_state, key: run(agent_state, key, env_params)
    points = [with_params(fixed, env_params, **p) for p in s.points]
    stacked = jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *points)
    over_points = jax.vmap(run, in_axes=(None, 0, 0))

    def program(agent_state: Any, key: jax.Array) -> EvalMetrics:
        result = over_points(agent_state, jax.random.split(key, len(points)), stacked)
        return jax.tree.map(lambda x: x.reshape(-1), result)

    return program


class Progress(NamedTuple):
    """What the host's progress line is fed after a run of updates."""

    update: Any  # int [] updates done (same for every seed)
    episode_return_sum: Any  # [S] over the updates since the last report
    episodes: Any  # [S] over the updates since the last report


def make_batched(trainer: Trainer, hparams_batched: bool = False) -> tuple[Callable, Callable]:
    """Seed-batched ``init(keys [S,2], hp)`` and ``chunk(states, hp)``: the
    chunk's ``chunk_updates`` updates, then its evaluation.

    The seed axis (and, with ``hparams_batched``, the hyperparameter pytree's
    leading axis) is added by ``jax.vmap``.
    """
    init_b, advance, close = make_segments(trainer, trainer.chunk_updates, hparams_batched)

    def chunk(states: TrainState, hp: Any) -> tuple[TrainState, ChunkMetrics]:
        states, updates = advance(states, hp, jnp.int32(trainer.chunk_updates))
        states, eval_metrics, sets = close(states)
        return states, ChunkMetrics(updates, eval_metrics, sets)

    return init_b, chunk


def traced_once(fn: Callable, *args: Any) -> tuple[Callable, Any]:
    """``fn`` traced once at ``args``: ``(replay, out_shape)``, where ``replay(*args)``
    (arguments of the same shapes) binds the recorded jaxpr — the same program as
    calling ``fn`` again, without tracing it a second time — and ``out_shape`` is
    ``jax.eval_shape(fn, *args)``. ``replay`` keeps ``fn``'s name, so ``jax.jit``
    names its program as it would ``fn``'s."""
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    flat, out_tree = jax.extend.core.jaxpr_as_fun(closed), jax.tree.structure(out_shape)

    def replay(*args: Any) -> Any:
        return jax.tree.unflatten(out_tree, flat(*jax.tree.leaves(args)))

    # jit names its program after the function (profiles, the compile cache's files)
    replay.__name__ = replay.__qualname__ = getattr(fn, "__name__", "replay")
    return replay, out_shape


def make_segments(
    trainer: Trainer, capacity: int, hparams_batched: bool = False
) -> tuple[Callable, Callable, Callable]:
    """A chunk as host-dispatched pieces, so that the host can report between
    them without a callback inside the program (programs with host callbacks
    cannot be kept in JAX's persistent compilation cache):

    * ``init(keys [S], hp) -> states``;
    * ``advance(states, hp, n) -> (states, updates)``: ``n ≤ capacity`` updates
      (``n`` is traced: one program for every length); ``updates`` is the
      algorithm's UpdateMetrics with leaves ``[S, capacity, ...]``, rows ``≥ n``
      zero;
    * ``close(states) -> (states, EvalMetrics, sets)``: the chunk's evaluation.

    The seed axis (and, with ``hparams_batched``, the hyperparameter pytree's
    leading axis) is added by ``jax.vmap``.
    """
    hp_axis = 0 if hparams_batched else None
    init_b = jax.vmap(trainer.init, in_axes=(0, hp_axis))
    update_b = jax.vmap(trainer.update, in_axes=(0, hp_axis))
    evaluate_b = jax.vmap(trainer.evaluate)
    sets_b = jax.vmap(trainer.evaluate_sets) if trainer.evaluate_sets is not None else (lambda states, ev: {})

    def advance(states: TrainState, hp: Any, n: jax.Array) -> tuple[TrainState, Any]:
        # the metrics' shapes give the rows the loop fills; the body replays the same trace
        update_once, out_shape = traced_once(update_b, states, hp)
        rows = jax.tree.map(lambda x: jnp.zeros((capacity, *x.shape), x.dtype), out_shape[1])

        def body(i, carry):
            states, rows = carry
            states, metrics = update_once(states, hp)
            rows = jax.tree.map(lambda r, m: jax.lax.dynamic_update_index_in_dim(r, m, i, 0), rows, metrics)
            return states, rows

        states, rows = jax.lax.fori_loop(0, jnp.minimum(n, capacity), body, (states, rows))
        # updates stack first: [U, S] → [S, U] so every leaf is seed-major.
        return states, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), rows)

    def close(states: TrainState) -> tuple[TrainState, EvalMetrics, Any]:
        states, eval_metrics = evaluate_b(states)
        return states, eval_metrics, sets_b(states, eval_metrics)

    return init_b, advance, close


def make_heldout(trainer: Trainer) -> Callable:
    """``heldout(states [M], params [K]) -> EvalMetrics [K, M, E]``: every
    member's policy evaluated under each of ``K`` env parameter settings
    (a pytree with a leading settings axis), all in one program."""

    def one(state: TrainState, params: Any) -> EvalMetrics:
        return trainer.evaluate(state, params)[1]

    over_members = jax.vmap(one, in_axes=(0, None))
    return jax.vmap(over_members, in_axes=(None, 0))
