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


@struct.dataclass
class PoisonState(environment.EnvState):
    time: int
    poisoned: bool


@struct.dataclass
class PoisonParams(environment.EnvParams):
    max_steps_in_episode: int = 1000
    nan_at: int = 50  # the episode step whose reward is NaN
    poison_prob: float = 1.0  # chance, drawn at reset, that this episode is poisoned


class PoisonedReward(ConstantReward):
    """Reward 1 per step, except NaN at episode step ``nan_at`` in episodes
    poisoned at reset (with probability ``poison_prob``)."""

    @property
    def default_params(self) -> PoisonParams:
        return PoisonParams()

    def step_env(self, key, state, action, params):
        time = state.time + 1
        reward = jnp.where(jnp.logical_and(state.poisoned, time == params.nan_at), jnp.nan, 1.0)
        new_state = PoisonState(time=time, poisoned=state.poisoned)
        return self.get_obs(new_state), new_state, reward.astype(jnp.float32), jnp.asarray(False), {}

    def reset_env(self, key, params):
        import jax

        state = PoisonState(time=0, poisoned=jax.random.bernoulli(key, params.poison_prob))
        return self.get_obs(state), state

    def is_terminated(self, state, params):
        return jnp.asarray(False)

    @property
    def name(self) -> str:
        return "PoisonedReward"


class HalfPoisoned(PoisonedReward):
    """Each episode is poisoned with probability ½ (decided by its reset key)."""

    @property
    def default_params(self) -> PoisonParams:
        return PoisonParams(poison_prob=0.5)


@struct.dataclass
class ControlParams(environment.EnvParams):
    max_steps_in_episode: int = 50
    cost: float = 0.0  # reward = −cost · a²


class QuadraticCost(ConstantReward):
    """One continuous action in [−1, 1], reward −cost·a² (cost 0: zero reward)."""

    @property
    def default_params(self) -> ControlParams:
        return ControlParams()

    def step_env(self, key, state, action, params):
        state = State(time=state.time + 1)
        reward = -params.cost * jnp.sum(jnp.square(action))
        return self.get_obs(state), state, reward.astype(jnp.float32), jnp.asarray(False), {}

    def is_terminated(self, state, params):
        return jnp.asarray(False)

    def action_space(self, params: Any = None):
        return spaces.Box(-1.0, 1.0, (1,), jnp.float32)

    @property
    def name(self) -> str:
        return "QuadraticCost"
