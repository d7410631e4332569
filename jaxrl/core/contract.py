"""The algorithm contract: what the trainer, sharding, PBT, checkpoints,
records, dashboards, evaluate and export may know about an algorithm.

An :class:`Algorithm` is a typed, complete bundle in the spirit of optax's
``GradientTransformation``: one pure factory (``make_agent``, which binds the
algorithm to an env, a number of envs and a budget and returns an
:class:`Agent` of pure functions) plus the declarations the host needs — its
config class and which of its fields are traced, its traced hyperparameter
pytree, the metrics it logs, which state fields hold the env axis and which a
PBT member keeps as its own, its warm-up, the action kinds it handles, its
presets, its validation and its PBT bounds. Nothing else is asked of an
algorithm; :func:`register` adds one from outside the package.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "Agent",
    "Algorithm",
    "LOOP_METRICS",
    "register",
    "get",
    "names",
    "configs",
    "own_metrics",
    "policy_step",
    "reset_carry",
]

# Per-update metrics every agent returns for the loop itself (besides its own):
# episode statistics over the episodes completed in the update, and whether the
# update's loss, gradients and parameters were finite (a non-finite one is not applied).
LOOP_METRICS = ("episode_return_sum", "episode_length_sum", "episodes", "finite")


class Agent(NamedTuple):
    """An algorithm bound to an env, a number of parallel envs and a budget.

    Every function is pure and written for ONE member (seed × hyperparameter
    setting); the trainer vmaps them. ``update``'s metrics are a NamedTuple of
    scalars holding :data:`LOOP_METRICS` and the algorithm's declared
    :attr:`Algorithm.metrics`."""

    init: Any  # (key, hp) -> state (SAC: including the random-action warm-up)
    update: Any  # (state, hp, update_idx int32 []) -> (state, metrics)
    act: Any  # (state, obs [..., *obs], key) -> deterministic env action [...]
    sample: Any  # (state, obs [..., *obs], key) -> env action sampled from the policy [...]
    network: Any  # the flax module(s)
    steps_per_update: int  # env steps per update and member
    warmup_steps: int = 0  # env steps per member taken inside init (SAC's random warm-up)
    # For profile=true: cumulative prefixes of ``update`` as ``(label, fn(state, hp) -> outputs)``,
    # each ending one phase later than the one before; the rest of ``update`` is the learner.
    phases: tuple = ()
    # Recurrent policies: (state, batch_shape) -> the carry at an episode's start, float32
    # [*batch_shape, C] zeros; ``act`` and ``sample`` then take and return it:
    # (state, carry, obs, key) -> (carry, action). None: memoryless act(state, obs, key) -> action.
    init_carry: Any = None


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
    """The fields of an agent's metrics NamedTuple beyond :data:`LOOP_METRICS`:
    what :attr:`Algorithm.metrics` declares."""
    return tuple(f for f in metrics_type._fields if f not in LOOP_METRICS)


def _no_warmup(algo_config: Any, num_envs: int) -> int:
    return 0


def _no_checks(config: Any) -> None:
    return None


@dataclass(frozen=True)
class Algorithm:
    """One algorithm as the rest of jaxrl sees it.

    ``config`` is a frozen dataclass with a ``name`` field (the ``algo=NAME``
    hydra group; its other fields are ``algo.*`` keys), a ``num_steps`` field
    (env steps per env and update) and a ``TRACED`` class attribute naming its
    float hyperparameters; ``hparams`` is the pytree of
    those (``hparams.from_config(config)``), passed to the compiled program as
    an argument so that one compile serves every seed and setting.
    ``make_agent(algo_config, env, num_envs, num_updates, env_params, **seams) -> Agent``
    where ``seams`` holds the keyword arguments it declares in :attr:`seams`
    (``network=``, ``optimizer=``) when research code passes them to ``make_train``.
    """

    name: str
    config: type
    hparams: type
    make_agent: Callable[..., Agent]
    metrics: tuple[str, ...]  # its per-update metrics beyond LOOP_METRICS, logged everywhere
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
    validate: Callable[[Any], None] = _no_checks  # (Config) -> None, raising ConfigError; beyond the common checks
    pbt_bounds: Mapping[str, tuple[float, float, bool]] = field(default_factory=dict)  # name -> (lo, hi, log)
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
        traced = getattr(self.config, "TRACED", None)
        fields = {f.name for f in dataclasses.fields(self.config)}
        if not isinstance(traced, tuple) or not set(traced) <= fields:
            raise TypeError(f"Algorithm {self.name!r}: config.TRACED must be a tuple of its field names")
        if not hasattr(self.hparams, "from_config"):
            raise TypeError(f"Algorithm {self.name!r}: hparams needs a from_config(config) classmethod")
        clash = set(self.metrics) & set(LOOP_METRICS)
        if clash:
            raise TypeError(f"Algorithm {self.name!r}: metrics {sorted(clash)} are the loop's own")
        unknown = set(self.pbt_bounds) - set(traced)
        if unknown:
            raise TypeError(f"Algorithm {self.name!r}: PBT bounds for untraced fields {sorted(unknown)}")
        if not set(self.seams) <= {"network", "optimizer", "perf"}:
            raise TypeError(f"Algorithm {self.name!r}: seams may name network, optimizer and perf")
        if not set(self.actions) <= {"discrete", "continuous"} or not self.actions:
            raise TypeError(f"Algorithm {self.name!r}: actions must name discrete and/or continuous")

    @property
    def traced(self) -> tuple[str, ...]:
        return tuple(self.config.TRACED)


# Built-in algorithms, imported on first use (each module defines ALGORITHM).
_BUILTIN = {
    "ppo": "jaxrl.algos.ppo",
    "sac": "jaxrl.algos.sac",
    "a2c": "jaxrl.algos.a2c",
    "reinforce": "jaxrl.algos.reinforce",
    "pqn": "jaxrl.algos.pqn",
    "dqn": "jaxrl.algos.dqn",
    "td3": "jaxrl.algos.td3",
}
_REGISTRY: dict[str, Algorithm] = {}


def register(algorithm: Algorithm, *, replace: bool = False) -> Algorithm:
    """Make ``algorithm`` available as ``algo=NAME`` (CLI, sweeps, PBT,
    resume, evaluate, export) in this process. Returns it. A name already
    taken (a built-in one included) needs ``replace=True``."""
    if not isinstance(algorithm, Algorithm):
        raise TypeError(f"register() takes a jaxrl.algos.Algorithm, not {type(algorithm).__name__}")
    taken = algorithm.name in _REGISTRY or algorithm.name in _BUILTIN
    if taken and not replace and _REGISTRY.get(algorithm.name) is not algorithm:
        raise ValueError(f"algorithm {algorithm.name!r} is registered already (pass replace=True)")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def unregister(name: str) -> None:
    """Remove an algorithm :func:`register` added (a built-in one cannot be removed;
    one that replaced a built-in gives the built-in back)."""
    if name not in _REGISTRY and name not in _BUILTIN:
        raise KeyError(name)
    if name in _BUILTIN and _REGISTRY.get(name, None) in (None, importlib.import_module(_BUILTIN[name]).ALGORITHM):
        raise ValueError(f"algorithm {name!r} is built in")
    _REGISTRY.pop(name, None)


def get(name: str) -> Algorithm:
    """The algorithm registered as ``name`` (KeyError if none)."""
    if name not in _REGISTRY and name in _BUILTIN:
        module = importlib.import_module(_BUILTIN[name])
        _REGISTRY.setdefault(name, module.ALGORITHM)
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
        return isinstance(name, str) and name in names()


configs = _Configs()


def algorithm_for(algo: Any) -> Algorithm:
    """The registered :class:`Algorithm` of an algorithm config (or its name)."""
    return get(algo if isinstance(algo, str) else algo.name)


def hparams_for(algo: Any) -> Any:
    """The traced hyperparameter pytree of an algorithm config."""
    return algorithm_for(algo).hparams.from_config(algo)
