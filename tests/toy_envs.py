"""Tiny gymnax environments with known answers (user-style Environment subclasses)."""

from typing import Any

import jax.numpy as jnp
from flax import struct
from gymnax.environments import environment, spaces


@struct.dataclass
class State(environment.EnvState):
    time: int


@struct.dataclass
class Params(environment.EnvParams):
    max_steps_in_episode: int = 8
    terminate_after: int = 1_000_000


class ConstantReward(environment.Environment):
    """Reward 1 every step, constant observation, one action; never terminates.
    Only the time limit (``max_steps_in_episode``) ends an episode, by truncation,
    so the infinite-horizon value of every state is 1/(1−γ)."""

    @property
    def default_params(self) -> Params:
        return Params()

    def step_env(self, key, state, action, params):
        state = State(time=state.time + 1)
        terminated = state.time >= params.terminate_after
        return self.get_obs(state), state, jnp.float32(1.0), terminated, {}

    def reset_env(self, key, params):
        state = State(time=0)
        return self.get_obs(state), state

    def get_obs(self, state, params=None, key=None):
        return jnp.ones((1,), jnp.float32)

    def is_terminated(self, state, params):
        return state.time >= params.terminate_after

    @property
    def name(self) -> str:
        return "ConstantReward"

    @property
    def num_actions(self) -> int:
        return 1

    def action_space(self, params: Any = None):
        return spaces.Discrete(1)

    def observation_space(self, params):
        return spaces.Box(0.0, 1.0, (1,), jnp.float32)


class CountingEnv(ConstantReward):
    """Like ConstantReward, but the observation is the time step and episodes
    terminate after ``terminate_after`` steps (reward 1 each step)."""

    def get_obs(self, state, params=None, key=None):
        return jnp.asarray([state.time], jnp.float32)

    @property
    def name(self) -> str:
        return "Counting"
