"""brax environments behind the jaxrl contract (imported only when used).

brax's own ``AutoResetWrapper`` restarts every episode from the first state it
ever saw and overwrites the final observation; this adapter instead keeps
the pre-reset observation (``final_obs``) and resets each finished episode
from a fresh random initial state. The time limit is brax's
``EpisodeWrapper``: ``state.info["truncation"]`` tells a time limit apart from a
termination.

Physical parameters (:class:`BraxParams`: mass, friction and gravity scales)
are env parameters like a gymnax ``EnvParams``: ``env.params``,
``env.randomize``, ``eval.perturb`` and ``eval.sets`` name them. A step under
other scales than the model file's runs on a copy of the system with every
body's mass and inertia (``link.inertia`` for the positional, generalized and
spring pipelines, ``body_mass``/``body_inertia`` for mjx), every geom's
friction (``geom_friction``, read by the contact model of every backend) and
gravity (``gravity`` and ``opt.gravity``) scaled, so all four backends see them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import warnings
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.core.errors import ConfigError, install_command
from jaxrl.envs.backends import Backend
from jaxrl.envs.core import Box, Env

__all__ = ["BACKEND", "BRAX_NAMES", "BraxEnv", "BraxParams", "scaled_system", "quietly"]

# brax environments listed by jaxrl.envs.names() (``brax:<name>`` reaches any other)
BRAX_NAMES = (
    "ant",
    "halfcheetah",
    "hopper",
    "walker2d",
    "humanoid",
    "humanoidstandup",
    "inverted_pendulum",
    "inverted_double_pendulum",
    "reacher",
    "pusher",
)


@struct.dataclass
class BraxParams:
    """Scales of a brax system's physical parameters (1: the model file's values)."""

    mass_scale: float = 1.0  # every body's mass and rotational inertia
    friction_scale: float = 1.0  # every geom's friction coefficients
    gravity_scale: float = 1.0  # the gravity vector


NOMINAL = BraxParams()


def scaled_system(sys: Any, params: BraxParams) -> Any:
    """``sys`` with its masses, inertias, frictions and gravity scaled by ``params``
    (each field every backend reads)."""
    mass = jnp.asarray(params.mass_scale, jnp.float32)
    gravity = jnp.asarray(params.gravity_scale, jnp.float32)
    return sys.tree_replace(
        {
            "link.inertia.mass": sys.link.inertia.mass * mass,
            "link.inertia.i": sys.link.inertia.i * mass,
            "body_mass": sys.body_mass * mass,
            "body_inertia": sys.body_inertia * mass,
            "geom_friction": sys.geom_friction * jnp.asarray(params.friction_scale, jnp.float32),
            "gravity": sys.gravity * gravity,
            "opt.gravity": sys.opt.gravity * gravity,
        }
    )


def _nominal(params: Any) -> bool:
    """Whether ``params`` are known, while tracing, to be all 1 (the model file's
    system): Python or NumPy values, not traced ones. A transformation that
    passes the params through unmapped (``vmap(in_axes=None)``) rebuilds the
    dataclass around the same Python floats, so identity alone misses them."""
    if params is None or params is NOMINAL:
        return True
    leaves = jax.tree.leaves(params)
    return all(isinstance(x, (int, float, np.ndarray, np.generic)) and np.all(np.asarray(x) == 1.0) for x in leaves)


@contextlib.contextmanager
def quietly() -> Iterator[None]:
    """brax's import and env construction print to stdout (mujoco's optional
    warp backend: "Failed to import warp") and warn that brax is unmaintained;
    neither is news to a jaxrl user, so neither reaches the terminal."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Brax System", category=UserWarning)
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        yield


class BraxEnv(Env):
    """A brax ``PipelineEnv`` with a time limit and a fresh-state auto-reset."""

    trace_once = True

    def __init__(self, name: str, backend: str = "positional", episode_length: int = 1000, action_repeat: int = 1):
        with quietly():
            from brax import envs as brax_envs
            from brax.envs.wrappers.training import EpisodeWrapper

            raw = brax_envs.get_environment(name, backend=backend)
        self.raw = raw
        self.env = EpisodeWrapper(raw, episode_length, action_repeat)
        self.name = name
        self.backend = backend
        self.obs_shape = (int(raw.observation_size),)
        size = int(raw.action_size)
        self.action_space = Box(-np.ones(size, np.float32), np.ones(size, np.float32), (size,))
        self.default_params = NOMINAL
        self.max_episode_steps = int(episode_length)
        self.action_repeat = int(action_repeat)
        # "near the maximum" for the pendulums (1000 steps of reward 1 / ≈ 9.36)
        self.solved_return = {"inverted_pendulum": 950.0, "inverted_double_pendulum": 9000.0}.get(name)

    def truncation_period(self, params: Any = None) -> int | None:
        """``EpisodeWrapper`` truncates once its step count (``action_repeat``
        per step, zeroed by the reset) reaches ``episode_length``."""
        if type(self)._step is not BraxEnv._step or type(self)._step_drawn is not BraxEnv._step_drawn:
            return None  # a subclass may truncate otherwise
        if self.max_episode_steps < 1 or self.action_repeat < 1:
            return None
        return -(-self.max_episode_steps // self.action_repeat)

    @contextlib.contextmanager
    def _system(self, params: Any) -> Iterator[None]:
        """brax's env reads its system from ``self.sys``: under other
        parameters than the model file's, a scaled copy stands there while the
        step is traced."""
        if _nominal(params):
            yield
            return
        base = self.raw.sys
        self.raw.sys = scaled_system(base, params)
        try:
            yield
        finally:
            self.raw.sys = base

    def _reset(self, key: jax.Array, params: Any) -> tuple[Any, jax.Array]:
        with self._system(params):
            state = self.env.reset(key)
        return state, state.obs

    def _step(self, key, inner, action, params):
        with self._system(params):
            nxt = self.env.step(inner, action)
            fresh = self.env.reset(key)
        truncated = nxt.info["truncation"] > 0
        done = nxt.done > 0
        terminated = jnp.logical_and(done, ~truncated)
        state = jax.tree.map(lambda r, s: jnp.where(done, r, s), fresh, nxt)
        return state, state.obs, nxt.reward, terminated, truncated, nxt.obs


def _resolve(text: str, explicit: bool) -> str | None:
    key = text.strip().lower()
    if key.startswith("brax:"):  # a canonical "brax:<name>" typed again
        key, explicit = key[5:], True
    if key in BRAX_NAMES:
        return key
    return f"brax:{key}" if explicit and key else None


def _available() -> tuple[str, str] | None:
    if importlib.util.find_spec("brax") is None:
        return "is a brax environment and brax is not installed", install_command("brax")
    return None


def _make(canonical: str, backend: str = "positional", episode_length: int = 1000, **options: Any) -> BraxEnv:
    missing = _available()
    if missing is not None:
        raise ConfigError("env", canonical, *missing)
    with quietly():
        from brax import envs as brax_envs

    inner = canonical.split(":", 1)[1] if canonical.startswith("brax:") else canonical
    known = brax_envs._envs  # brax's registry (no public listing)
    if inner not in known:
        raise ConfigError(
            "env", canonical, f"is not a brax environment (brax has: {', '.join(sorted(known))})", "pick one of those"
        )
    return BraxEnv(inner, backend=backend, episode_length=episode_length)


BACKEND = Backend(
    name="brax",
    names=lambda: list(BRAX_NAMES),
    resolve=_resolve,
    make=_make,
    actions=lambda canonical: "continuous",  # every brax env acts with a real vector in [-1, 1]
    available=_available,
)
