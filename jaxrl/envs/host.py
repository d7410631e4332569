"""Host environments: worlds that are not written in JAX, stepped by the host.

``env=gymnasium:ID`` names any registered gymnasium id (the user's own too,
registered by a module named with ``env.module=...``); ``env=envpool:ID`` any
envpool task (Atari ``Pong-v5``, MuJoCo ``HalfCheetah-v4``, classic control,
Box2D), stepped by envpool's C++ thread pool. Such an env cannot live
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
envpool's Atari frames (``[4, 84, 84]`` uint8 grey, stacked) become
``[84, 84, 4]`` float32 in ``[0, 1]``, channels last as jaxrl's CNN takes them;
its training pool ends an episode at each lost life and clips rewards to their
sign (the Atari recipe; each life starts with FIRE in games that have it), its
evaluation pool plays whole games at their raw score, each life started alike.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import math
import re
import warnings
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from jaxrl.core.errors import ConfigError, error_line, install_command
from jaxrl.envs.core import Box, Discrete

__all__ = [
    "HOST_BACKENDS",
    "HostSpec",
    "HostStep",
    "HostVecEnv",
    "GymnasiumVec",
    "EnvpoolVec",
    "envpool_family",
    "preset_name",
    "EnvFailure",
    "failed_env",
    "is_host",
    "host_spec",
    "make_vec",
    "render_episode",
    "import_module",
]

HOST_BACKENDS = ("gymnasium", "envpool")
AUTORESET = ("same_step", "next_step")


def is_host(name: str) -> bool:
    """Whether ``env=name`` is a host env (``gymnasium:ID`` or ``envpool:ID``)."""
    prefix, sep, _ = str(name).partition(":")
    return bool(sep) and prefix.lower() in HOST_BACKENDS


@dataclass(frozen=True)
class HostSpec:
    """What the learner needs to know of a host env, without stepping it."""

    name: str  # backend:ID with the backend's own spelling of the id: gymnasium:CartPole-v1
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

    return Tagged(make_env(env_id, **kwargs))


def make_env(env_id: str, evaluation: bool = False, render_mode: str | None = None, **kwargs: Any) -> Any:
    """One gymnasium env of ``env_id``; Atari ids (``ALE/…``) through the Atari
    recipe (:func:`_atari`)."""
    gym = _gymnasium()
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if is_ale(env_id):
        return _atari(gym, env_id, evaluation, **kwargs)
    return gym.make(env_id, **kwargs)


def is_ale(env_id: str) -> bool:
    """Whether ``env_id`` is one of ale-py's Atari ids (``ALE/Pong-v5``, …)."""
    return env_id.lower().startswith("ale/")


def _register_ale(gym: Any) -> None:
    """Register ale-py's ids with gymnasium (once), or a one-line error naming the
    extra (ale-py, and OpenCV for the frames' resize)."""
    if any(k.startswith("ALE/") for k in gym.registry):
        return
    modules = {}
    for package in ("ale_py", "cv2"):
        try:
            modules[package] = importlib.import_module(package)
        except ImportError:
            raise ConfigError(
                "env", "gymnasium:ALE/…", f"needs the {package} package", f"install it: {install_command('atari')}"
            ) from None
    gym.register_envs(modules["ale_py"])


def _atari(gym: Any, env_id: str, evaluation: bool, **kwargs: Any) -> Any:
    """The Atari recipe of envpool's preset on an ale-py id: 4 frames skipped
    (max-pooled), up to 30 no-ops at reset, FIRE at the start of every life in
    games that have it, 84×84 grey frames stacked by 4, observed as
    ``[84, 84, 4]`` float32 in [0, 1]. Training (``evaluation=False``) ends an
    episode at each lost life, the game going on, and clips rewards to their
    sign; evaluation plays whole games at their raw score. The id's own
    settings (v5: sticky actions with probability 0.25, the full 108k-frame
    limit) stay."""
    from gymnasium import spaces, wrappers

    _register_ale(gym)
    env = wrappers.AtariPreprocessing(
        gym.make(env_id, frameskip=1, **kwargs), noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True
    )
    env = _lives_class()(env, episodic=not evaluation)
    if not evaluation:
        env = wrappers.TransformReward(env, lambda r: float(np.sign(r)))
    env = wrappers.FrameStackObservation(env, 4)
    space = spaces.Box(0.0, 1.0, (84, 84, 4), np.float32)
    return wrappers.TransformObservation(env, _frames, space)


def _frames(obs: np.ndarray) -> np.ndarray:
    """Stacked frames ``[4, 84, 84]`` uint8 → ``[84, 84, 4]`` float32 in [0, 1] (the CNN's layout)."""
    return np.ascontiguousarray(np.transpose(obs, (1, 2, 0)), dtype=np.float32) * np.float32(1 / 255)


def _lives_class() -> Any:
    gym = _gymnasium()

    class Lives(gym.Wrapper):
        """An Atari game's lives as envpool's Atari pool treats them. Every life
        starts with FIRE in games that have it (Breakout waits for it before
        serving: a policy that never learned to press it, because training's
        lives began with it, would stall a game to its time limit).
        ``episodic``: a lost life ends the episode (``terminated``) but not the
        game: the reset that follows presses FIRE (or one no-op) and the game
        goes on; a game over resets for real. Otherwise (evaluation) an
        episode is the whole game, and the life after a lost one starts with
        FIRE inside the step that lost it (its reward counted)."""

        def __init__(self, env: Any, episodic: bool):
            super().__init__(env)
            meanings = env.unwrapped.get_action_meanings()
            self.fire = meanings.index("FIRE") if "FIRE" in meanings else None
            self.episodic = episodic
            self.lives, self.game_over = 0, True

        def _start_life(self) -> tuple[Any, float, bool, bool, Any]:
            return self.env.step(self.fire if self.fire is not None else 0)

        def step(self, action: Any) -> Any:
            obs, reward, terminated, truncated, info = self.env.step(action)
            lives = self.env.unwrapped.ale.lives()
            lost = 0 < lives < self.lives and not (terminated or truncated)
            if lost and self.episodic:
                terminated = True
            elif lost and self.fire is not None:
                obs, more, terminated, truncated, info = self._start_life()
                reward = float(reward) + float(more)
                lives = self.env.unwrapped.ale.lives()
            self.game_over = bool(self.env.unwrapped.ale.game_over()) or truncated
            self.lives = lives
            return obs, reward, terminated, truncated, info

        def reset(self, **kwargs: Any) -> Any:
            if self.game_over:
                obs, info = self._new_game(**kwargs)
            else:
                obs, _, terminated, truncated, info = self._start_life()
                if terminated or truncated:  # the game ended on that step
                    obs, info = self._new_game(**kwargs)
            self.game_over = False
            self.lives = self.env.unwrapped.ale.lives()
            return obs, info

        def _new_game(self, **kwargs: Any) -> tuple[Any, Any]:
            obs, info = self.env.reset(**kwargs)
            if self.fire is not None:
                obs, _, terminated, truncated, info = self.env.step(self.fire)
                if terminated or truncated:
                    obs, info = self.env.reset(**kwargs)
            return obs, info

    return Lives


def _backend_package(package: str) -> Any:
    """The backend's package, or a one-line :class:`ConfigError` with the pip line of its extra."""
    try:
        return importlib.import_module(package)
    except ImportError:
        raise ConfigError(
            "env", f"{package}:…", f"needs the {package} package", f"install it: {install_command(package)}"
        ) from None


def _gymnasium() -> Any:
    return _backend_package("gymnasium")


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
    if is_ale(name.partition(":")[2]):
        _register_ale(gym)
    return _known_id(name, list(gym.registry.keys()), "is not a registered gymnasium id", "gymnasium.registry")


def _known_id(name: str, known: list[str], constraint: str, listing: str) -> str:
    """The id of ``backend:ID`` among a backend's ``known`` ids (case aside), or a
    one-line :class:`ConfigError` naming the nearest ones."""
    backend, _, wanted = name.partition(":")
    if wanted in known:
        return wanted
    lowered = {k.lower(): k for k in known}
    if wanted.lower() in lowered:
        return lowered[wanted.lower()]
    close = difflib.get_close_matches(wanted, known, n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(f'{backend}:{c}' for c in close)}?" if close else f"see {listing}"
    raise ConfigError("env", name, constraint, hint)


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
    if _backend(name) == "envpool":
        return _envpool_spec(name)
    gym = _gymnasium()
    env_id = _resolve_id(name)
    try:
        env = make_env(env_id, evaluation=True)
    except ConfigError:
        raise
    except Exception as error:
        # gymnasium's MuJoCo ids need the bindings: the project's extra installs them
        mujoco = str(getattr(gym.registry.get(env_id), "entry_point", "")).startswith("gymnasium.envs.mujoco")
        raise ConfigError(
            "env",
            name,
            f"could not be built ({type(error).__name__}: {error})",
            f"install it: {install_command('mujoco')}" if mujoco else "install what it needs",
        ) from None
    try:
        obs_shape = _flat_size(env.observation_space, gym)
        action = _action_space(env.action_space, gym, name)
        spec = env.spec
        steps = getattr(spec, "max_episode_steps", None)
        threshold = getattr(spec, "reward_threshold", None)
    finally:
        env.close()
    return _spec(f"gymnasium:{env_id}", obs_shape, action, steps, threshold)


def _spec(name: str, obs_shape: tuple[int, ...], action: Discrete | Box, steps: Any, threshold: Any) -> HostSpec:
    """A :class:`HostSpec` from a backend's time limit and solved threshold (either may be absent or infinite)."""
    solved = float(threshold) if threshold is not None and math.isfinite(float(threshold)) else None
    return HostSpec(name, obs_shape, action, int(steps) if steps else None, solved)


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
        evaluation: bool = False,
    ):
        gym = _gymnasium()
        self.spec, self.num_envs = spec, num_envs
        env_id = spec.name.partition(":")[2]
        vector = gym.vector
        reset_mode = vector.AutoresetMode.SAME_STEP if autoreset == "same_step" else vector.AutoresetMode.NEXT_STEP
        kwargs: dict[str, Any] = {"evaluation": evaluation}
        if max_episode_steps:
            kwargs["max_episode_steps"] = max_episode_steps
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


def render_episode(spec: HostSpec, act: Any, seed: int, max_steps: int) -> tuple[list[np.ndarray], np.ndarray]:
    """One episode of a gymnasium id drawn by the env itself (``render_mode="rgb_array"``):
    ``act(obs [1, *obs_shape]) -> actions [1, ...]``; returns the frames (uint8 ``[H, W, 3]``,
    the start and one per step) and the rewards ``[T]``. Raises :class:`ConfigError` when the
    env cannot draw frames (envpool's envs do not; a gymnasium env without ``rgb_array``)."""
    if _backend(spec.name) == "envpool":
        raise ConfigError(
            "render",
            "true",
            f"{spec.name}: envpool's envs do not draw frames",
            "drop render=true (evaluate still plays and scores the episodes)",
        )
    gym = _gymnasium()
    env_id = spec.name.partition(":")[2]
    try:
        with warnings.catch_warnings():  # gymnasium warns of a mode the env lacks: said below, in one line
            warnings.simplefilter("ignore")
            env = make_env(env_id, evaluation=True, render_mode="rgb_array")
    except Exception as error:  # an env class that takes no render_mode
        raise ConfigError(
            "render", "true", f"{spec.name} cannot draw rgb_array frames ({error_line(error)})", "drop render=true"
        ) from None
    modes = list(env.metadata.get("render_modes", []))
    if "rgb_array" not in modes:
        env.close()
        raise ConfigError(
            "render",
            "true",
            f"{spec.name} cannot draw rgb_array frames (its render modes: {modes})",
            "drop render=true",
        )
    flatten = _Flatten(env.observation_space, gym)
    discrete = isinstance(spec.action_space, Discrete)
    try:
        obs, _ = env.reset(seed=int(seed))
        frames, rewards = [np.asarray(env.render(), np.uint8)], []
        for _ in range(max_steps):
            action = np.asarray(act(flatten.one(obs)[None]))[0]
            action = int(action) if discrete else action.astype(np.float32)
            obs, reward, terminated, truncated, _ = env.step(action)
            frames.append(np.asarray(env.render(), np.uint8))
            rewards.append(float(reward))
            if terminated or truncated:
                break
    except ConfigError:
        raise
    except Exception as error:  # pygame missing, a renderer that fails: one line
        raise ConfigError(
            "render", "true", f"{spec.name} could not draw its frames ({error_line(error)})", "drop render=true"
        ) from None
    finally:
        env.close()
    return frames, np.asarray(rewards, np.float64)


def make_vec(
    spec: HostSpec, num_envs: int, mode: str = "sync", autoreset: str = "same_step", evaluation: bool = False
) -> HostVecEnv:
    """``num_envs`` copies of ``spec``'s env (gymnasium's ``mode``: sync | async;
    envpool steps its pool in its own threads). ``evaluation``: the copies that
    measure a policy (envpool's Atari: whole games, raw scores)."""
    if _backend(spec.name) == "envpool":
        return EnvpoolVec(spec, num_envs, evaluation=evaluation)
    return GymnasiumVec(spec, num_envs, mode=mode, autoreset=autoreset, evaluation=evaluation)


def _backend(name: str) -> str:
    return str(name).partition(":")[0].lower()


# -- envpool ----------------------------------------------------------------

# envpool's modules → the family a task belongs to (presets and observation handling)
_ENVPOOL_FAMILIES = {
    "envpool.atari": "atari",
    "envpool.classic_control": "classic_control",
    "envpool.box2d": "box2d",
    "envpool.mujoco.gym": "mujoco",
}


def _envpool() -> Any:
    envpool = _backend_package("envpool")
    # envpool declares float64 Box bounds, which gymnasium warns about at every pool built
    warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32", category=UserWarning)
    return envpool


def _envpool_id(name: str) -> str:
    return _known_id(name, list(_envpool().list_all_envs()), "is not an envpool task", "envpool.list_all_envs()")


def envpool_family(task: str) -> str:
    """``atari``, ``mujoco``, ``classic_control``, ``box2d`` (or envpool's module
    name for the others) of an envpool task id."""
    from envpool.registration import registry

    module = registry.specs[task][0]
    return _ENVPOOL_FAMILIES.get(module, module)


def preset_name(name: str) -> str | None:
    """The preset key of a host env beyond its id's own: ``envpool:atari`` for
    every envpool Atari task, ``envpool:mujoco`` for its MuJoCo tasks,
    ``gymnasium:atari`` for ale-py's ids (``ALE/Pong-v5``, …), ``gymnasium:mujoco``
    for gymnasium's MuJoCo ids (``HalfCheetah-v5``, …);
    None else (classic control ids take their gymnax twins' presets)."""
    try:
        if _backend(name) == "gymnasium":
            env_id = _resolve_id(name)
            if is_ale(env_id):
                return "gymnasium:atari"
            entry = _gymnasium().registry[env_id].entry_point
            return "gymnasium:mujoco" if str(entry).startswith("gymnasium.envs.mujoco") else None
        if _backend(name) == "envpool":
            family = envpool_family(_envpool_id(name))
            return f"envpool:{family}" if family in ("atari", "mujoco") else None
    except ConfigError:  # an unknown id or a missing extra: the run's preparation says so in one line
        return None
    return None


def _envpool_options(family: str, evaluation: bool) -> dict[str, Any]:
    # the Atari recipe: a lost life ends envpool's episode, so that the next life
    # starts with envpool's reset (no-ops, then FIRE in games that have it); rewards
    # clipped to their sign while training. Evaluation keeps the lives' resets (a
    # policy trained on them never learned to press FIRE) and joins the lives into
    # whole games at their raw scores (EnvpoolVec)
    return {"episodic_life": True, "reward_clip": not evaluation} if family == "atari" else {}


def _envpool_spec(name: str) -> HostSpec:
    envpool = _envpool()
    task = _envpool_id(name)
    family = envpool_family(task)
    try:
        env = envpool.make(task, env_type="gymnasium", num_envs=1, seed=0, **_envpool_options(family, True))
    except Exception as error:
        raise ConfigError(
            "env", name, f"could not be built ({type(error).__name__}: {error})", "install what it needs"
        ) from None
    try:
        gym = _gymnasium()
        space = env.single_observation_space if hasattr(env, "single_observation_space") else env.observation_space
        shape = _flat_size(space, gym)
        if _is_frames(space):
            shape = (shape[1], shape[2], shape[0])  # [C, H, W] → [H, W, C]
        action = _action_space(getattr(env, "single_action_space", env.action_space), gym, name)
        config = env.spec.config
        steps = getattr(config, "max_episode_steps", None)
        threshold = getattr(config, "reward_threshold", None)
    finally:
        env.close()
    return _spec(f"envpool:{task}", shape, action, steps, threshold)


def _is_frames(space: Any) -> bool:
    """Stacked uint8 frames ``[C, H, W]`` (envpool's Atari observations)."""
    return len(getattr(space, "shape", ()) or ()) == 3 and np.dtype(space.dtype) == np.uint8


class EnvpoolVec:
    """``num_envs`` copies of an envpool task in one envpool pool, normalized to
    :class:`HostStep`. envpool resets an env on the call after its episode
    ended (that call's action is ignored, its reward 0): that step is
    ``valid=False``; the ending step's observation is the final one. The pool is
    seeded when built, so :meth:`reset` builds it (env ``i``: seed ``seed + i``);
    ``options`` go to ``envpool.make`` (e.g. ``max_episode_steps``)."""

    def __init__(self, spec: HostSpec, num_envs: int, evaluation: bool = False, **options: Any):
        self.spec, self.num_envs = spec, num_envs
        self.task = spec.name.partition(":")[2]
        self.options = {**_envpool_options(envpool_family(self.task), evaluation), **options}
        # an evaluation pool of lives (Atari): an episode is the whole game
        self.games = evaluation and bool(self.options.get("episodic_life"))
        self.discrete = isinstance(spec.action_space, Discrete)
        self.env: Any = None
        self.frames = False
        self._pending = np.zeros(num_envs, bool)

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        if self.frames:
            return np.ascontiguousarray(np.transpose(obs, (0, 2, 3, 1)), dtype=np.float32) * np.float32(1 / 255)
        return np.asarray(obs, np.float32).reshape(self.num_envs, *self.spec.obs_shape)

    def reset(self, seed: int) -> np.ndarray:
        self.close()
        self.env = _envpool().make(
            self.task, env_type="gymnasium", num_envs=self.num_envs, seed=int(seed) % 2**30, **self.options
        )
        self.frames = _is_frames(self.env.observation_space)
        obs, _ = self.env.reset()  # envpool does not say which env raised: the actor names itself
        self._pending[:] = False
        return self._obs(obs)

    def step(self, actions: np.ndarray) -> HostStep:
        actions = np.asarray(actions)
        actions = actions.astype(np.int32) if self.discrete else actions.astype(np.float64)
        obs, reward, terminated, truncated, info = self.env.step(actions)
        obs = self._obs(obs)
        valid = ~self._pending
        reward = np.where(valid, np.asarray(reward, np.float32), 0.0).astype(np.float32)
        terminated = np.asarray(terminated, bool) & valid
        truncated = np.asarray(truncated, bool) & valid & ~terminated
        # the next call is envpool's reset step: after an episode's end, and (whole
        # games) after a lost life, whose end is not the episode's
        self._pending = terminated | truncated
        if self.games:
            terminated &= np.asarray(info["terminated"], bool)  # game over, not a lost life
        return HostStep(obs, reward, terminated, truncated, obs.copy(), valid)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
