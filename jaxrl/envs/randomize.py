"""Domain randomization inside the compiled rollout: every episode of every env
runs under environment parameters drawn at its reset.

``parse_randomize("length=uniform(0.25,1.0) gravity=loguniform(8,12)
masscart=choice(0.5,1,2)", env)`` reads a specification; ``Randomized(env,
dists)`` is the env whose resets draw those parameters — from the key of the
reset, so each env copy and each member draws from its own stream — and whose
episodes keep them until they end. Parameters not named keep the values of
the ``params`` passed to ``reset``/``step``; derived ones (CartPole's
``total_mass``, ``polemass_length``) are recomputed as ``eval.perturb`` does
(:func:`jaxrl.envs.with_params`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.core.errors import ConfigError
from jaxrl.envs.core import Env, EnvState, EnvStep, StepKeys
from jaxrl.envs.params import param_names, with_params

__all__ = [
    "Dist",
    "KINDS",
    "parse_randomize",
    "parse_dist_term",
    "is_dist_term",
    "draw_params",
    "Randomized",
    "RandomizedInner",
]

KINDS = ("uniform", "loguniform", "choice")
_TERM = re.compile(r"^(\w+)=(\w+)\((.*)\)$")
FIELD = "env.randomize"
EXAMPLE = 'env.randomize="length=uniform(0.25,1.0)"'


@dataclass(frozen=True)
class Dist:
    """One randomized parameter: ``uniform(lo, hi)``, ``loguniform(lo, hi)``
    (uniform in ``log``, ``0 < lo``) or ``choice(v1, …)`` (equally likely)."""

    name: str
    kind: str
    values: tuple[float, ...]

    def sample(self, key: jax.Array) -> jax.Array:
        """One float32 draw ``[]``."""
        if self.kind == "uniform":
            lo, hi = self.values
            return jax.random.uniform(key, (), jnp.float32, lo, hi)
        if self.kind == "loguniform":
            lo, hi = self.values
            return jnp.exp(jax.random.uniform(key, (), jnp.float32, math.log(lo), math.log(hi)))
        choices = jnp.asarray(self.values, jnp.float32)
        return choices[jax.random.randint(key, (), 0, len(self.values))]


def is_dist_term(part: str) -> bool:
    """Whether ``part`` reads ``name=kind(…)`` (a distribution, not a value list)."""
    return _TERM.match(part) is not None


def parse_dist_term(part: str, env: Env, field: str = FIELD, text: str = "", names: list[str] | None = None) -> Dist:
    """``"length=uniform(0.25,1)"`` → a :class:`Dist`; ConfigError naming
    ``field`` (its whole value ``text``) for a malformed term, an unknown
    distribution or parameter, an empty range (``lo ≥ hi``), ``loguniform``
    with ``lo ≤ 0``, an empty ``choice`` or values that are not finite numbers."""
    text = text or part
    names = param_names(env) if names is None else names
    example = EXAMPLE.replace(FIELD, field)
    match = _TERM.match(part)
    if not match:
        raise ConfigError(field, text, f"{part!r} is not name=kind(values)", f"write e.g. {example}")
    name, kind, inner = match.groups()
    if name not in names:
        raise ConfigError(
            field,
            text,
            f"{name!r} is not a parameter of {env.name} (parameters: {', '.join(names) or 'none'})",
            "use one of those names",
        )
    if kind not in KINDS:
        raise ConfigError(field, text, f"{kind!r} must be one of {', '.join(KINDS)}", f"write e.g. {example}")
    try:
        values = tuple(float(v) for v in inner.split(",") if v.strip() != "")
    except ValueError:
        raise ConfigError(field, text, f"the values of {name} must be numbers", f"write e.g. {example}") from None
    if not all(math.isfinite(v) for v in values):
        raise ConfigError(field, text, f"the values of {name} must be finite", f"write e.g. {example}")
    if kind == "choice":
        if not values:
            raise ConfigError(field, text, f"choice() of {name} is empty", f"write e.g. {name}=choice(0.5,1,2)")
    else:
        if len(values) != 2 or not values[0] < values[1]:
            raise ConfigError(
                field,
                text,
                f"{kind} of {name} needs two numbers lo < hi (got {list(values)})",
                f"write e.g. {name}={kind}(0.5,2)",
            )
        if kind == "loguniform" and values[0] <= 0:
            raise ConfigError(
                field, text, f"loguniform of {name} needs 0 < lo (got {values[0]})", f"use {name}=uniform(…)"
            )
    return Dist(name, kind, values)


def parse_randomize(text: str, env: Env) -> tuple[Dist, ...]:
    """``"name=kind(a,b,…) …"`` → one :class:`Dist` per parameter.

    Raises :class:`ConfigError` (field ``env.randomize``) for a bad term
    (:func:`parse_dist_term`) or a parameter named twice."""
    text = (text or "").strip()
    names = param_names(env)
    found: dict[str, Dist] = {}
    for part in text.replace(";", " ").split():
        dist = parse_dist_term(part, env, FIELD, text, names)
        if dist.name in found:
            raise ConfigError(FIELD, text, f"{dist.name!r} is randomized twice", f"give {dist.name} one distribution")
        found[dist.name] = dist
    if not found:
        raise ConfigError(FIELD, text, "names no parameter", f"write e.g. {EXAMPLE}")
    return tuple(found.values())


def draw_params(env: Env, dists: tuple[Dist, ...], key: jax.Array, params: Any) -> Any:
    """``params`` with each parameter of ``dists`` drawn (one key each, split
    from ``key``) and the derived ones recomputed."""
    keys = jax.random.split(key, len(dists))
    return with_params(env, params, **{d.name: d.sample(k) for d, k in zip(dists, keys, strict=True)})


@struct.dataclass
class RandomizedInner:
    """The wrapped env's state and the parameters its current episode runs under."""

    base: Any
    params: Any


@struct.dataclass
class _Drawn:
    base: Any  # the wrapped env's randomness of one step
    keys: StepKeys  # [..., 2]: the next episode's parameter draw and its reset


class Randomized(Env):
    """``env`` whose every episode runs under parameters drawn at its reset from
    ``dists``. An episode that ends in a step is reset again under the new
    parameters, so the observation a step returns after an episode end is the
    first one of an episode that runs under the parameters stored with it."""

    def __init__(self, env: Env, dists: tuple[Dist, ...]):
        self.inner = env
        self.dists = tuple(dists)
        spec = " ".join(f"{d.name}={d.kind}({','.join(f'{v:g}' for v in d.values)})" for d in self.dists)
        self.name = f"{env.name}[randomize {spec}]"
        self.base_name = getattr(env, "base_name", env.name)
        self.obs_shape = env.obs_shape
        self.action_space = env.action_space
        self.default_params = env.default_params
        self.max_episode_steps = env.max_episode_steps
        self.solved_return = env.solved_return

    def _params(self, params: Any) -> Any:
        return self.default_params if params is None else params

    def truncation_period(self, params: Any = None) -> int | None:
        return self.inner.truncation_period(self._params(params))

    def reset(self, key: jax.Array, params: Any = None) -> tuple[EnvState, jax.Array]:
        key_params, key_reset = jax.random.split(key)
        drawn = draw_params(self.inner, self.dists, key_params, self._params(params))
        state, obs = self.inner.reset(key_reset, drawn)
        return state.replace(inner=RandomizedInner(state.inner, drawn)), obs

    def _advance(
        self, state: EnvState, stepped: tuple[EnvState, EnvStep], keys: jax.Array, params: Any
    ) -> tuple[EnvState, EnvStep]:
        base_state, out = stepped
        fresh, obs = self.reset(keys, params)  # the next episode, used where this one ended
        done = out.done

        def pick(new: Any, old: Any) -> Any:
            return jax.tree.map(lambda a, b: jnp.where(done, a, b), new, old)

        inner = pick(fresh.inner, RandomizedInner(base_state.inner, state.inner.params))
        return base_state.replace(inner=inner), out._replace(obs=jnp.where(done, obs, out.obs))

    def _base(self, state: EnvState) -> EnvState:
        return state.replace(inner=state.inner.base)

    def step(self, key: jax.Array, state: EnvState, action: jax.Array, params: Any = None) -> tuple[EnvState, EnvStep]:
        key_step, key_next = jax.random.split(key)
        stepped = self.inner.step(key_step, self._base(state), action, state.inner.params)
        return self._advance(state, stepped, key_next, self._params(params))

    def draw_steps(self, keys: jax.Array, params: Any = None) -> Any:
        if not jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
            keys = jax.random.wrap_key_data(keys)
        split = jax.vmap(jax.random.split)(keys.reshape(-1)).reshape(keys.shape + (2,))
        base = self.inner.draw_steps(split[..., 0], self._params(params))
        nxt = split[..., 1]
        return _Drawn(base, StepKeys(jax.random.key_data(nxt), jax.random.key_impl(nxt)))

    def step_drawn(
        self, drawn: Any, state: EnvState, action: jax.Array, params: Any = None
    ) -> tuple[EnvState, EnvStep]:
        stepped = self.inner.step_drawn(drawn.base, self._base(state), action, state.inner.params)
        return self._advance(state, stepped, drawn.keys.key, self._params(params))

    def random_action(self, key: jax.Array) -> jax.Array:
        return self.inner.random_action(key)
