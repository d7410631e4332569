"""Host environments: worlds that are not written in JAX, stepped by the host.

``env=gymnasium:ID`` names any registered gymnasium id (the user's own too,
registered by a module named with ``env.module=...``). Such an env cannot live
inside a compiled program, so it is trained by the actor–learner pipeline
(:mod:`jaxrl.actors`): actor threads step a :class:`HostVecEnv` and hand
trajectories to the learner.

Every host backend keeps the same step contract as the JAX envs
(:class:`~jaxrl.envs.core.EnvStep`), whatever its own auto-reset mode:
``obs`` is where to act next (a fresh start where an episode ended),
``final_obs`` the observation before that reset (truncations bootstrap from
it), ``terminated`` and ``truncated`` stay apart, and a backend's reset step
(gymnasium's next-step mode: the step after an end ignores its action and
only resets) is marked ``valid=False`` so that it never becomes a transition.

Observations are float32 arrays: Box as they are, Discrete one-hot, Dict and
Tuple flattened (sorted keys); Text, Graph and Sequence spaces are refused.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import math
import re
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from jaxrl.core.errors import ConfigError, install_command
from jaxrl.envs.core import Box, Discrete

__all__ = [
    "HOST_BACKENDS",
    "HostSpec",
    "HostStep",
    "HostVecEnv",
    "GymnasiumVec",
    "EnvFailure",
    "failed_env",
    "is_host",
    "host_spec",
    "make_vec",
    "import_module",
]

HOST_BACKENDS = ("gymnasium",)
AUTORESET = ("same_step", "next_step")


def is_host(name: str) -> bool:
    """Whether ``env=name`` is a host env (``gymnasium:ID``)."""
    prefix, sep, _ = str(name).partition(":")
    return bool(sep) and prefix.lower() in HOST_BACKENDS


@dataclass(frozen=True)
class HostSpec:
    """What the learner needs to know of a host env, without stepping it."""

    name: str  # as the user wrote it: gymnasium:CartPole-v1
    obs_shape: tuple[int, ...]
    action_space: Discrete | Box
    max_episode_steps: int | None = None
    solved_return: float | None = None


class HostStep(NamedTuple):
    """One step of ``N`` host envs (numpy, leading axis ``N``)."""

    obs: np.ndarray  # float32 [N, *obs]: where to act next (a fresh start where an episode ended)
    reward: np.ndarray  # float32 [N]
    terminated: np.ndarray  # bool [N]
    truncated: np.ndarray  # bool [N]
    final_obs: np.ndarray  # float32 [N, *obs]: before the reset (equal to obs where nothing ended)
    valid: np.ndarray  # bool [N]: False where the backend only reset (no transition)


class HostVecEnv(Protocol):
    """``N`` copies of a host env behind one call."""

    spec: HostSpec
    num_envs: int

    def reset(self, seed: int) -> np.ndarray:
        """float32 ``[N, *obs]``; env ``i`` seeded ``seed + i``."""

    def step(self, actions: np.ndarray) -> HostStep:
        """Step every env with ``actions`` ``[N]`` (discrete) or ``[N, d]``."""

    def close(self) -> None: ...


class EnvFailure(RuntimeError):
    """An exception inside one host env, tagged with its index in the vector
    env (the message starts ``env I:``; it crosses process boundaries as text)."""

    @property
    def index(self) -> int | None:
        match = re.match(r"env (\d+): ", str(self))
        return int(match.group(1)) if match else None


def failed_env(error: BaseException) -> int | None:
    """The vector-env index an exception names (:class:`EnvFailure`), if any."""
    match = re.match(r"env (\d+): ", str(error))
    return int(match.group(1)) if match else None


# -- gymnasium --------------------------------------------------------------


def _tagged_env(env_id: str, index: int, kwargs: dict[str, Any]) -> Any:
    gym = _gymnasium()

    class Tagged(gym.Wrapper):
        """Names its index in any exception its env raises."""

        def step(self, action: Any) -> Any:
            try:
                return self.env.step(action)
            except Exception as error:
                raise EnvFailure(f"env {index}: {type(error).__name__}: {error}") from error

        def reset(self, **reset_kwargs: Any) -> Any:
            try:
                return self.env.reset(**reset_kwargs)
            except Exception as error:
                raise EnvFailure(f"env {index}: {type(error).__name__}: {error}") from error

    return Tagged(gym.make(env_id, **kwargs))


def _gymnasium() -> Any:
    try:
        import gymnasium
    except ImportError:
        raise ConfigError(
            "env", "gymnasium:…", "needs the gymnasium package", f"install it: {install_command('gymnasium')}"
        ) from None
    return gymnasium


def import_module(module: str) -> None:
    """Import ``env.module`` (a module that registers the user's envs)."""
    if not module:
        return
    try:
        importlib.import_module(module)
    except Exception as error:  # a user's module: any error is theirs, named in one line
        raise ConfigError(
            "env.module",
            module,
            f"must import ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})",
            "pass a module on the Python path that registers your env (gymnasium.register)",
        ) from None


def _resolve_id(name: str) -> str:
    gym = _gymnasium()
    env_id = name.partition(":")[2]
    known = list(gym.registry.keys())
    if env_id in gym.registry:
        return env_id
    lowered = {k.lower(): k for k in known}
    if env_id.lower() in lowered:
        return lowered[env_id.lower()]
    close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join('gymnasium:' + c for c in close)}?" if close else "see gymnasium.registry"
    raise ConfigError("env", name, "is not a registered gymnasium id", hint)


def _flat_size(space: Any, gym: Any) -> tuple[int, ...]:
    spaces = gym.spaces
    if isinstance(space, spaces.Box):
        return tuple(int(d) for d in space.shape)
    if isinstance(space, spaces.Discrete):
        return (int(space.n),)
    if isinstance(space, (spaces.Dict, spaces.Tuple, spaces.MultiDiscrete, spaces.MultiBinary)):
        return (int(spaces.flatdim(space)),)
    raise ConfigError(
        "env",
        type(space).__name__,
        "is an observation space that cannot be flattened into an array (Box, Discrete, Dict, Tuple can)",
        "wrap the env so that it observes a Box",
    )


def _action_space(space: Any, gym: Any, name: str) -> Discrete | Box:
    spaces = gym.spaces
    if isinstance(space, spaces.Discrete):
        return Discrete(int(space.n))
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        return Box(np.asarray(space.low, np.float32), np.asarray(space.high, np.float32), tuple(space.shape))
    raise ConfigError(
        "env",
        name,
        f"has action space {space}, which jaxrl's learners cannot take (Discrete or a 1-d Box)",
        "wrap the env so that it acts through Discrete or a 1-d Box",
    )


def host_spec(name: str, module: str = "") -> HostSpec:
    """The :class:`HostSpec` of ``name`` (one env built and closed). Raises
    :class:`ConfigError` for an unknown id, a missing package or spaces jaxrl cannot take."""
    import_module(module)
    gym = _gymnasium()
    env_id = _resolve_id(name)
    try:
        env = gym.make(env_id)
    except Exception as error:
        raise ConfigError(
            "env", name, f"could not be built ({type(error).__name__}: {error})", "install what it needs"
        ) from None
    try:
        obs_shape = _flat_size(env.observation_space, gym)
        action = _action_space(env.action_space, gym, name)
        spec = env.spec
        steps = getattr(spec, "max_episode_steps", None)
        threshold = getattr(spec, "reward_threshold", None)
    finally:
        env.close()
    return HostSpec(
        f"gymnasium:{env_id}",
        obs_shape,
        action,
        int(steps) if steps else None,
        float(threshold) if threshold is not None and math.isfinite(threshold) else None,
    )


class _Flatten:
    """Observations of a gymnasium space as float32 arrays (batched or single)."""

    def __init__(self, space: Any, gym: Any):
        self.space, self.gym = space, gym
        spaces = gym.spaces
        self.kind = (
            "box" if isinstance(space, spaces.Box) else "discrete" if isinstance(space, spaces.Discrete) else "flat"
        )

    def batch(self, obs: Any, n: int) -> np.ndarray:
        if self.kind == "box":
            return np.asarray(obs, np.float32)
        if self.kind == "discrete":
            return np.eye(self.space.n, dtype=np.float32)[np.asarray(obs, np.int64) - int(self.space.start)]
        return np.stack([self.one(self._item(obs, i)) for i in range(n)])

    def one(self, obs: Any) -> np.ndarray:
        if self.kind == "box":
            return np.asarray(obs, np.float32)
        return np.asarray(self.gym.spaces.flatten(self.space, obs), np.float32)

    def _item(self, obs: Any, i: int) -> Any:
        if isinstance(obs, dict):
            return {k: self._item(v, i) for k, v in obs.items()}
        if isinstance(obs, tuple):
            return tuple(self._item(v, i) for v in obs)
        return obs[i]


class GymnasiumVec:
    """``num_envs`` copies of a gymnasium id in a gymnasium vector env
    (``mode``: ``sync`` steps them in this thread, ``async`` in one process
    each), normalized to :class:`HostStep` from either auto-reset mode."""

    def __init__(
        self,
        spec: HostSpec,
        num_envs: int,
        mode: str = "sync",
        autoreset: str = "same_step",
        max_episode_steps: int | None = None,
    ):
        gym = _gymnasium()
        self.spec, self.num_envs = spec, num_envs
        env_id = spec.name.partition(":")[2]
        vector = gym.vector
        reset_mode = vector.AutoresetMode.SAME_STEP if autoreset == "same_step" else vector.AutoresetMode.NEXT_STEP
        kwargs = {"max_episode_steps": max_episode_steps} if max_episode_steps else {}
        fns = [functools.partial(_tagged_env, env_id, i, kwargs) for i in range(num_envs)]
        kind = vector.AsyncVectorEnv if mode == "async" else vector.SyncVectorEnv
        self.vec = kind(fns, autoreset_mode=reset_mode)
        self.mode = self.vec.metadata.get("autoreset_mode", reset_mode)
        self.same_step = self.mode == vector.AutoresetMode.SAME_STEP
        self.flatten = _Flatten(self.vec.single_observation_space, gym)
        self.discrete = isinstance(spec.action_space, Discrete)
        self._pending = np.zeros(num_envs, bool)  # next-step mode: these envs reset on the next call

    def reset(self, seed: int) -> np.ndarray:
        obs, _ = self.vec.reset(seed=int(seed))
        self._pending[:] = False
        return self.flatten.batch(obs, self.num_envs)

    def step(self, actions: np.ndarray) -> HostStep:
        actions = np.asarray(actions)
        actions = actions.astype(np.int64) if self.discrete else actions.astype(np.float32)
        obs, reward, terminated, truncated, info = self.vec.step(actions)
        obs = self.flatten.batch(obs, self.num_envs)
        reward = np.asarray(reward, np.float32)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        final_obs = obs.copy()
        valid = np.ones(self.num_envs, bool)
        if self.same_step:
            ended = np.flatnonzero(info.get("_final_obs", np.zeros(self.num_envs, bool)))
            for i in ended:
                final_obs[i] = self.flatten.one(info["final_obs"][i])
        else:  # next-step mode: this call only reset the envs that ended on the last one
            valid = ~self._pending
            reward = np.where(valid, reward, 0.0).astype(np.float32)
            terminated, truncated = terminated & valid, truncated & valid
            self._pending = terminated | truncated
        return HostStep(obs, reward, terminated, truncated, final_obs, valid)

    def render_one(self) -> Any:
        return self.vec.render()

    def close(self) -> None:
        self.vec.close()


def make_vec(spec: HostSpec, num_envs: int, mode: str = "sync", autoreset: str = "same_step") -> HostVecEnv:
    """``num_envs`` copies of ``spec``'s env (``mode``: sync | async)."""
    return GymnasiumVec(spec, num_envs, mode=mode, autoreset=autoreset)
