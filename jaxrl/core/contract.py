"""The algorithm contract: what the trainer, sharding, PBT, checkpoints,
records, dashboards, evaluate and export may know about an algorithm.

An :class:`Algorithm` is a typed, complete bundle in the spirit of optax's
``GradientTransformation``: one pure factory (``make_agent``, which binds the
algorithm to an env, a number of envs and a budget and returns an
:class:`Agent` of pure functions) plus the declarations the host needs — its
config class (whose :func:`~jaxrl.core.fields.traced` fields are the
hyperparameters, with their ranges and PBT bounds), the metrics it logs, which
state fields hold the env axis and which a PBT member keeps as its own, its
warm-up, the action kinds it handles, its presets and its cross-field
validation. Nothing else is asked of an algorithm; :func:`register` adds one
from outside the package (``jaxrl.algos`` registers the built-in ones).

An agent separates acting from learning: ``collect`` is the in-program
rollout, ``learn`` updates from a batch of transitions or sequences whoever
collected it, and :meth:`Agent.update` is the two fused — what the compiled
loop runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from jaxrl.core.fields import HParams, pbt_bounds, traced_names

__all__ = [
    "Agent",
    "Algorithm",
    "LOOP_METRICS",
    "LoopMetrics",
    "Init",
    "Collect",
    "Learn",
    "Act",
    "RecurrentAct",
    "InitCarry",
    "register",
    "register_builtin",
    "unregister",
    "get",
    "names",
    "configs",
    "own_metrics",
    "policy_step",
    "reset_carry",
    "Behaviour",
]

State = Any  # an algorithm's state for one member: a flax.struct.dataclass (checkpointed as is)
Batch = Any  # what ``collect`` returns and ``learn`` takes: transitions or sequences, the algorithm's own type
Metrics = Any  # a NamedTuple: loop (LoopMetrics), then the algorithm's declared metrics (scalars)


class Behaviour(NamedTuple):
    """What an actor records of each step it takes outside the compiled loop
    (``Agent.behave``'s second output; :mod:`jaxrl.actors`)."""

    action: Any  # [N] int32 or [N, d] float32: the stored action (pre-tanh u / unclipped sample)
    log_prob: Any  # [N] behaviour log π(a|s) under the actor's parameters (0 where learn does not read it)


class LoopMetrics(NamedTuple):
    """What every update reports to the loop, besides the algorithm's own
    metrics: episode statistics over the episodes completed in the update, and
    whether its loss, gradients and parameters were finite (a non-finite update
    is not applied). An algorithm's metrics NamedTuple holds it as its first
    field, ``loop``."""

    episode_return_sum: Any  # float32 []
    episode_length_sum: Any  # float32 []
    episodes: Any  # int32 []
    finite: Any  # bool []

    @classmethod
    def of(cls, done: Any, episode_return: Any, episode_length: Any, finite: Any) -> LoopMetrics:
        """The loop's metrics of a batch of steps: ``done`` (bool), and the
        return and length of an episode ending at each step (same shape)."""
        import jax.numpy as jnp

        done_f = done.astype(jnp.float32)
        return cls(
            jnp.sum(episode_return * done_f), jnp.sum(episode_length * done_f), jnp.sum(done.astype(jnp.int32)), finite
        )


LOOP_METRICS = LoopMetrics._fields


class Init(Protocol):
    def __call__(self, key: Any, hp: HParams, /) -> State:
        """A member's first state (replay learners: including the random-action warm-up)."""


class Collect(Protocol):
    def __call__(self, state: State, hp: HParams, update_idx: Any, /) -> tuple[State, Batch]:
        """The in-program collect step: act in the member's envs, return what ``learn`` takes."""


class Learn(Protocol):
    def __call__(self, state: State, batch: Batch, hp: HParams, update_idx: Any, /) -> tuple[State, Metrics]:
        """One update from ``batch`` (whoever collected it): ``(state, metrics)``."""


class Act(Protocol):
    def __call__(self, state: State, obs: Any, key: Any, /) -> Any:
        """Env actions ``[...]`` for observations ``[..., *obs_shape]``."""


class RecurrentAct(Protocol):
    def __call__(self, state: State, carry: Any, obs: Any, key: Any, /) -> tuple[Any, Any]:
        """``(carry, action)``: a recurrent policy's step; the carry ``[..., C]`` goes in and comes back."""


class InitCarry(Protocol):
    def __call__(self, state: State, batch_shape: tuple[int, ...], /) -> Any:
        """float32 ``[*batch_shape, C]``: the carry at an episode's start."""


class Agent(NamedTuple):
    """An algorithm bound to an env, a number of parallel envs and a budget.

    Every function is pure and written for ONE member (seed × hyperparameter
    setting); the trainer vmaps them. Metrics are a NamedTuple: ``loop``
    (:class:`LoopMetrics`) and the algorithm's declared :attr:`Algorithm.metrics`
    (scalars)."""

    init: Init
    collect: Collect
    learn: Learn
    act: Act | RecurrentAct  # deterministic env action
    sample: Act | RecurrentAct  # env action sampled from the policy
    network: Any  # the flax module(s)
    steps_per_update: int  # env steps per update and member
    warmup_steps: int = 0  # env steps per member taken inside init (replay learners' random warm-up)
    # For profile=true: cumulative prefixes of ``update`` as ``(label, fn(state, hp) -> outputs)``,
    # each ending one phase later than the one before; the rest of ``update`` is the learner.
    phases: tuple[tuple[str, Callable[[State, HParams], Any]], ...] = ()
    # Recurrent policies: the carry at an episode's start; ``act`` and ``sample`` then
    # take and return it. None: memoryless act(state, obs, key) -> action.
    init_carry: InitCarry | None = None
    # Batches collected outside the compiled loop (host envs, jaxrl.actors): ``behave(state,
    # obs, key) -> (env action, record)`` acts and returns what ``learn`` needs of the step;
    # ``complete(state, steps) -> batch`` turns the actors' steps (a Transition-like pytree
    # ``[T, N, ...]``) into ``learn``'s batch with the learner's state. None: not supported.
    behave: Callable[..., Any] | None = None
    complete: Callable[..., Any] | None = None
    # Host envs: ``acting(state, hp, update_idx)`` is what ``behave`` reads when acting for
    # update ``update_idx`` (the parameters, e.g. an exploration rate), handed to the actors
    # instead of the whole state (optimizer and replay buffer stay with the learner); ``warm(state,
    # batch, hp, update_idx) -> (state, metrics)`` is an update of the random-action warm-up
    # (the batch into the buffer, no gradient step), run while fewer than ``warmup_steps``
    # steps are stored. None: behave reads the state; no warm-up.
    acting: Callable[[State, HParams, Any], Any] | None = None
    warm: Learn | None = None
    # Host envs: every trajectory starts fresh episodes in all envs (the actors reset them
    # first, as the in-program collect does: REINFORCE counts each env's first episode).
    fresh_episodes: bool = False
    # Host envs: each env's exploration memory at an episode's start (TD3's noise state and
    # σ), ``explore_carry(state, batch_shape) -> carry``: ``behave`` then takes and returns
    # it as a recurrent policy's does (``behave(view, carry, obs, key) -> (carry, env action,
    # record)``); the actors keep it per env and restart it after an episode's end. ``act``
    # and ``sample`` stay memoryless. None: no such memory.
    explore_carry: InitCarry | None = None

    def update(self, state: State, hp: HParams, update_idx: Any) -> tuple[State, Metrics]:
        """``collect`` then ``learn``: the in-program update the trainer scans."""
        state, batch = self.collect(state, hp, update_idx)
        return self.learn(state, batch, hp, update_idx)


def policy_step(agent: Agent, deterministic: bool = True) -> tuple[Any, Any]:
    """``(init_carry, step)`` of any agent in the carry form:
    ``init_carry(state, batch_shape) -> carry`` and ``step(state, carry, obs, key)
    -> (carry, action)`` — for a memoryless agent the carry is ``None``. Callers
    reset the carry where an episode ended (:func:`reset_carry`)."""
    choose = agent.act if deterministic else agent.sample
    if agent.init_carry is not None:
        return agent.init_carry, choose

    def init_none(state: Any, batch_shape: tuple[int, ...]) -> None:
        return None

    def step(state: Any, carry: Any, obs: Any, key: Any) -> tuple[Any, Any]:
        return None, choose(state, obs, key)

    return init_none, step


def reset_carry(carry: Any, done: Any) -> Any:
    """A policy carry ``[..., C]`` zeroed where ``done`` ``[...]`` (``None`` stays ``None``)."""
    if carry is None:
        return None
    import jax.numpy as jnp

    return jnp.where(done[..., None], jnp.zeros_like(carry), carry)


def own_metrics(metrics_type: type) -> tuple[str, ...]:
    """The fields of an agent's metrics NamedTuple beside its ``loop``
    (:class:`LoopMetrics`): what :attr:`Algorithm.metrics` declares."""
    if "loop" not in metrics_type._fields:
        raise TypeError(f"{metrics_type.__name__} needs a first field `loop: LoopMetrics`")
    return tuple(f for f in metrics_type._fields if f != "loop")


def _no_warmup(algo_config: Any, num_envs: int) -> int:
    return 0


def _no_checks(config: Any) -> None:
    return None


@dataclass(frozen=True)
class Algorithm:
    """One algorithm as the rest of jaxrl sees it.

    ``config`` is a frozen dataclass with a ``name`` field (the ``algo=NAME``
    hydra group; its other fields are ``algo.*`` keys) and a ``num_steps`` field
    (env steps per env and update); its float hyperparameters are declared with
    :func:`jaxrl.core.fields.traced` (range and PBT bounds on the same line) and
    reach the compiled program as an :class:`~jaxrl.core.fields.HParams` pytree,
    so one compile serves every seed and setting.
    ``make_agent(algo_config, env, num_envs, num_updates, env_params, **seams) -> Agent``
    where ``seams`` holds the keyword arguments it declares in :attr:`seams`
    (``network=``, ``optimizer=``, ``perf=``) when ``make_train`` passes them.
    """

    name: str
    config: type
    make_agent: Callable[..., Agent]
    metrics: tuple[str, ...]  # its per-update metrics beyond LoopMetrics, logged everywhere
    description: str = ""
    # Agent-state fields whose leading axis is the env axis (split by parallel=data).
    env_fields: tuple[str, ...] = ("env_state", "obs")
    # Agent-state fields a PBT member keeps when it copies another (its envs and PRNG
    # stream), and that export leaves out (a policy needs neither).
    own_fields: tuple[str, ...] = ("env_state", "obs", "key")
    actions: tuple[str, ...] = ("discrete", "continuous")  # action-space kinds it handles
    data_parallel: bool = False  # parallel=data (one run's envs split over devices) works
    warmup: Callable[[Any, int], int] = _no_warmup  # (algo_config, num_envs) -> env steps per member before update 1
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # env id -> overrides
    validate: Callable[[Any], None] = _no_checks  # (Config) -> None, raising ConfigError; checks across fields
    # Keyword arguments make_agent takes: "network" (a flax torso module) and
    # "optimizer" (jaxrl.rl.optim.Spec) from make_train(config, network=…, optimizer=…),
    # "perf" (bool: config.perf resolved by jaxrl.perf) from the run's config.
    seams: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.config) or "name" not in {f.name for f in dataclasses.fields(self.config)}:
            raise TypeError(f"Algorithm {self.name!r}: config must be a dataclass with a `name` field")
        if "num_steps" not in {f.name for f in dataclasses.fields(self.config)}:
            raise TypeError(f"Algorithm {self.name!r}: config needs num_steps (env steps per env and update)")
        if self.config().name != self.name:
            raise TypeError(f"Algorithm {self.name!r}: its config's default name is {self.config().name!r}")
        clash = set(self.metrics) & {*LOOP_METRICS, "loop"}
        if clash:
            raise TypeError(f"Algorithm {self.name!r}: metrics {sorted(clash)} are the loop's own")
        if not set(self.seams) <= {"network", "optimizer", "perf"}:
            raise TypeError(f"Algorithm {self.name!r}: seams may name network, optimizer and perf")
        if not set(self.actions) <= {"discrete", "continuous"} or not self.actions:
            raise TypeError(f"Algorithm {self.name!r}: actions must name discrete and/or continuous")

    @property
    def traced(self) -> tuple[str, ...]:
        """Its float hyperparameters (the config's traced fields), in order."""
        return traced_names(self.config)

    @property
    def pbt_bounds(self) -> dict[str, tuple[float, float, bool]]:
        """``{name: (lo, hi, log)}`` of the hyperparameters PBT may evolve."""
        return pbt_bounds(self.config)

    def hparams(self, algo_config: Any) -> HParams:
        """The traced hyperparameters of ``algo_config`` (float32 scalars)."""
        return HParams.from_config(algo_config)


_BUILTIN: dict[str, Algorithm] = {}
_REGISTRY: dict[str, Algorithm] = {}


def register_builtin(algorithm: Algorithm) -> Algorithm:
    """``jaxrl.algos`` registers each of its own algorithms with this once."""
    _BUILTIN[algorithm.name] = algorithm
    _REGISTRY.setdefault(algorithm.name, algorithm)
    return algorithm


def register(algorithm: Algorithm, *, replace: bool = False) -> Algorithm:
    """Make ``algorithm`` available as ``algo=NAME`` (CLI, sweeps, PBT,
    resume, evaluate, export) in this process. Returns it. A name already
    taken (a built-in one included) needs ``replace=True``."""
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"register() takes a jaxrl.algos.Algorithm, not {type(algorithm).__name__}")
    taken = algorithm.name in _REGISTRY
    if taken and not replace and _REGISTRY[algorithm.name] is not algorithm:
        raise ValueError(f"algorithm {algorithm.name!r} is registered already (pass replace=True)")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def unregister(name: str) -> None:
    """Remove an algorithm :func:`register` added (a built-in one cannot be removed;
    one that replaced a built-in gives the built-in back)."""
    if name not in _REGISTRY:
        raise KeyError(name)
    if name in _BUILTIN:
        if _REGISTRY[name] is _BUILTIN[name]:
            raise ValueError(f"algorithm {name!r} is built in")
        _REGISTRY[name] = _BUILTIN[name]
        return
    del _REGISTRY[name]


def get(name: str) -> Algorithm:
    """The algorithm registered as ``name`` (KeyError if none)."""
    return _REGISTRY[name]


def names() -> list[str]:
    """Every algorithm name: the built-in ones, then those registered."""
    return list(_BUILTIN) + [n for n in _REGISTRY if n not in _BUILTIN]


class _Configs(Mapping):
    """``{name: config class}`` over the registry (what hydra's ``algo`` group holds)."""

    def __getitem__(self, name: str) -> type:
        try:
            return get(name).config
        except KeyError:
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(names())

    def __len__(self) -> int:
        return len(names())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in _REGISTRY


configs = _Configs()


def algorithm_for(algo: Any) -> Algorithm:
    """The registered :class:`Algorithm` of an algorithm config (or its name)."""
    return get(algo if isinstance(algo, str) else algo.name)
