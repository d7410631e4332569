"""Jumanji (InstaDeep's combinatorial and grid worlds) behind the jaxrl contract:
``env=jumanji:Snake-v1`` (``pip install 'jaxrl[jumanji]'``).

- **Observations** are structured (a NamedTuple of arrays: a grid, positions,
  an action mask, a step count): the adapter flattens every field, the action
  mask included, into one float32 vector in the order of the observation's
  fields, so any torso of jaxrl takes them.
- **Episode ends**: a ``LAST`` time step with discount 0 is a termination, one
  with a non-zero discount a time limit (``truncated``, bootstrapped from the
  final observation).
- **Actions**: a ``DiscreteArray`` is :class:`~jaxrl.envs.Discrete`; a
  ``MultiDiscreteArray`` (e.g. Tetris' rotation × column) becomes one
  discrete action over the joint choices (at most 4096), decoded in row-major
  order.
- **Time limits**: jumanji's envs (Snake, Maze, …) end an episode at their
  ``time_limit`` with discount 0, as a death would. The adapter counts the
  steps since each reset itself: an end at the env's time limit is
  ``truncated`` (bootstrapped), any earlier end with discount 0
  ``terminated``. (A true terminal state on exactly the last allowed step
  counts as truncated.)
- Multi-agent envs (per-agent rewards) and envs that download data when built
  (Sokoban's levels) are not listed; multi-agent ones are refused.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.core.errors import ConfigError
from jaxrl.envs.core import Box, Discrete
from jaxrl.envs.suite import Clocked, NoParams, SuiteEnv, flatten_obs, load, suite_backend, suite_id, unknown

__all__ = ["BACKEND", "JUMANJI_IDS", "JumanjiEnv"]

# Single-agent ids of jumanji 1.1 that build offline, with at most 4096 joint actions.
JUMANJI_IDS = (
    "Snake-v1",
    "Game2048-v1",
    "Maze-v0",
    "PacMan-v1",
    "Tetris-v0",
    "Minesweeper-v0",
    "SlidingTilePuzzle-v0",
    "RubiksCube-v0",
    "RubiksCube-partly-scrambled-v0",
    "Sudoku-v0",
    "Sudoku-very-easy-v0",
    "Knapsack-v1",
    "TSP-v1",
    "CVRP-v1",
    "GraphColoring-v1",
    "BinPack-v2",
    "Cleaner-v0",
    "RobotWarehouse-v0",
)

MAX_JOINT_ACTIONS = 4096
_LAST = 2  # jumanji.types.StepType.LAST


class JumanjiEnv(SuiteEnv):
    """A ``jumanji.Environment`` (built-in or a user's) with flattened
    observations, its ``time_limit`` (where it has one) counted by the adapter."""

    def __init__(self, env: Any, name: str):
        from jumanji import specs

        self.env = env
        self.name = name
        self.default_params = NoParams()
        spec = env.action_spec
        if isinstance(spec, specs.DiscreteArray):
            self._nvec = None
            self.action_space: Discrete | Box = Discrete(int(spec.num_values))
        elif isinstance(spec, specs.MultiDiscreteArray):
            nvec = tuple(int(n) for n in np.asarray(spec.num_values).reshape(-1))
            joint = int(np.prod(nvec))
            if joint > MAX_JOINT_ACTIONS:
                raise ConfigError(
                    "env",
                    name,
                    f"has {' × '.join(map(str, nvec))} = {joint} joint discrete actions, more than the {MAX_JOINT_ACTIONS} "
                    "one discrete policy head takes here",
                    "pick a jumanji env with fewer actions (see jaxrl.envs.names())",
                )
            self._nvec = nvec
            self.action_space = Discrete(joint)
        elif isinstance(spec, specs.BoundedArray) and np.issubdtype(spec.dtype, np.floating):
            shape = tuple(int(s) for s in spec.shape)
            low = np.broadcast_to(np.asarray(spec.minimum, np.float32), shape).copy()
            high = np.broadcast_to(np.asarray(spec.maximum, np.float32), shape).copy()
            self._nvec = None
            self.action_space = Box(low, high, shape)
        else:
            raise ConfigError("env", name, f"has a {type(spec).__name__} action spec", "pick another jumanji env")
        _, timestep = jax.eval_shape(env.reset, jax.random.key(0))
        if timestep.reward.shape != ():
            raise ConfigError(
                "env",
                name,
                f"is multi-agent (rewards of shape {list(timestep.reward.shape)}), which jaxrl does not train",
                "pick a single-agent jumanji env (see jaxrl.envs.names())",
            )
        self.obs_shape = tuple(int(s) for s in jax.eval_shape(flatten_obs, timestep.observation).shape)
        limit = getattr(env, "time_limit", None)
        self.time_limit = int(limit) if isinstance(limit, (int, np.integer)) else None
        self.max_episode_steps = self.time_limit

    def _decode(self, action: jax.Array) -> jax.Array:
        if self._nvec is None:
            return action
        return jnp.stack(jnp.unravel_index(action, self._nvec)).astype(jnp.int32)

    def _start(self, key, params):
        state, timestep = self.env.reset(key)
        if self.time_limit is not None:
            state = Clocked(state, jnp.zeros((), jnp.int32))
        return state, flatten_obs(timestep.observation)

    def _advance(self, key, raw, action, params):
        del key  # jumanji keeps its randomness in its state
        inner = raw.state if self.time_limit is not None else raw
        state, timestep = self.env.step(inner, self._decode(action))
        last = timestep.step_type == _LAST
        terminated = jnp.logical_and(last, timestep.discount == 0)
        if self.time_limit is not None:
            t = raw.t + 1
            state = Clocked(state, t)
            terminated = jnp.logical_and(terminated, t < self.time_limit)  # the limit itself: truncated
        truncated = jnp.logical_and(last, ~terminated)
        return state, flatten_obs(timestep.observation), timestep.reward, terminated, truncated


def _make(canonical: str, **options: Any) -> JumanjiEnv:
    name = suite_id(canonical)

    def build() -> JumanjiEnv:
        import jumanji

        if name not in jumanji.registered_environments():
            raise unknown(canonical, "jumanji", sorted(jumanji.registered_environments()))
        return JumanjiEnv(jumanji.make(name), canonical)

    return load(canonical, "jumanji", "jumanji", "jumanji", "jumanji", build)


BACKEND = suite_backend(
    "jumanji",
    JUMANJI_IDS,
    _make,
    lambda canonical: "discrete" if suite_id(canonical) in JUMANJI_IDS else None,
    "jumanji",
    "jumanji",
)  # others: the built env
