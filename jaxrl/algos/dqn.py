"""Deep Q-Network (Mnih et al., 2015, "Human-level control through deep
reinforcement learning") with an on-device replay buffer.

Double-DQN targets by default (van Hasselt et al., 2016, arXiv:1509.06461), an
optional dueling head (Wang et al., 2016, arXiv:1511.06581) and n-step returns;
the target network is moved every ``target_update_interval`` gradient steps by
``θ̄ ← (1 − τ) θ̄ + τ θ`` (``τ = 1``: a hard copy; ``τ < 1`` with interval 1:
Polyak averaging). ε-greedy exploration decays linearly over the first
``exploration_fraction`` of the budget (the random-action warm-up counts as its
start). Targets keep termination and truncation apart::

    y = R⁽ⁿ⁾ + γᵐ (1 − terminated) Q̄(s'_m, argmax_a Q(s'_m, a))

where the n-step window stops at the first transition that ended an episode and
``s'_m`` is that transition's pre-reset next observation.

Pure pieces: :func:`dqn_targets`, :func:`gradient_step`, :func:`make_agent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.algos import replay
from jaxrl.algos.presets import load_presets
from jaxrl.algos.qvalue import make_q_network, q_loss, validate_q_network
from jaxrl.core.checks import POSITIVE, POSITIVE_INT, UNIT, Range
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, LoopMetrics, own_metrics
from jaxrl.core.errors import ConfigError
from jaxrl.core.fields import HParams, setting, traced
from jaxrl.envs.core import Env
from jaxrl.nets.networks import QNetwork
from jaxrl.nets.networks import init as init_network
from jaxrl.rl import buffers, optim
from jaxrl.rl.qlearning import epsilon_greedy, linear_epsilon, n_step_return, q_target

__all__ = [
    "DQNConfig",
    "HParams",
    "DQNState",
    "Transition",
    "UpdateMetrics",
    "dqn_targets",
    "gradient_step",
    "move_target",
    "make_agent",
    "ALGORITHM",
]


@dataclass(frozen=True)
class DQNConfig:
    """DQN (Mnih et al., 2015) with double-DQN targets, optional dueling head and
    n-step returns, a target network and an on-device replay buffer."""

    name: str = "dqn"
    # --- static ---------------------------------------------------------------
    num_steps: int = 1  # env steps per env per update
    utd: float = 0.5  # gradient steps per env step (all envs of a member)
    batch_size: int = 128
    buffer_size: int = 50_000  # per member, rounded up to whole steps of all envs
    learning_starts: int = 5000  # random-action env steps per member before learning
    target_update_interval: int = setting(1, check=POSITIVE_INT)  # gradient steps between target-network moves
    double: bool = True  # double-DQN targets
    dueling: bool = False
    n_step: int = setting(1, check=POSITIVE_INT)
    network: str = "auto"  # torso by name: auto (mlp; cnn for image obs) | mlp | cnn | registered
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "relu"
    norm: str = "none"  # layer_norm | none
    conv_channels: tuple[int, ...] = (16,)
    conv_kernels: tuple[int, ...] = (3,)
    conv_strides: tuple[int, ...] = (1,)
    loss: str = "huber"  # huber | mse
    # --- traced ---------------------------------------------------------------
    lr: float = traced(1e-3, check=POSITIVE, pbt=(1e-5, 1e-1, True))
    gamma: float = traced(0.99, check=UNIT, pbt=(0.9, 0.9999, False))
    # target move: θ̄ ← (1 − τ) θ̄ + τ θ; 1: hard copy
    tau: float = traced(0.02, check=Range(0.0, 1.0, lo_open=True, note="1: a hard copy"), pbt=(1e-3, 0.1, True))
    eps_start: float = traced(1.0, check=UNIT)
    eps_end: float = traced(0.05, check=UNIT)
    exploration_fraction: float = traced(0.5, check=UNIT)
    max_grad_norm: float = traced(10.0, check=POSITIVE, pbt=(0.05, 10.0, True))
    reward_scale: float = traced(1.0, pbt=(0.01, 100.0, True))


class Transition(NamedTuple):
    """One stored transition (leaves ``[...]`` per item)."""

    obs: jax.Array
    action: jax.Array  # int32 []
    reward: jax.Array
    terminated: jax.Array
    done: jax.Array  # terminated or truncated (ends an n-step window)
    next_obs: jax.Array  # pre-reset


@struct.dataclass
class DQNState:
    params: Any
    target_params: Any
    opt_state: Any
    buffer: buffers.ReplayBuffer
    env_state: Any  # [N]
    obs: jax.Array  # [N, *obs]
    key: jax.Array
    epsilon: jax.Array  # float32 [] of the last collection (``sample`` uses it)
    steps: jax.Array  # int32 [] gradient steps taken


class UpdateMetrics(NamedTuple):
    loop: LoopMetrics  # episodes completed in the update, and whether it was finite
    loss: jax.Array
    q: jax.Array
    target: jax.Array
    epsilon: jax.Array
    grad_norm: jax.Array
    lr: jax.Array


def dqn_targets(
    batch: Transition,
    next_q_target: jax.Array,
    next_q_online: jax.Array | None,
    gamma: jax.Array,
    reward_scale: jax.Array = 1.0,
) -> jax.Array:
    """Targets ``[B]`` from a batch of transitions (leaves ``[B]``, or ``[B, n]``
    for n-step windows) and the action values ``[B, A]`` of the bootstrap
    observations (``next_obs`` at each window's stopping step, :func:`bootstrap_obs`)
    under the target network and, for double DQN, the online one."""
    value = q_target(next_q_target, next_q_online)
    if batch.reward.ndim == 1:
        not_terminal = 1.0 - batch.terminated.astype(jnp.float32)
        return reward_scale * batch.reward + gamma * not_terminal * value
    ret, discount, _ = n_step_return(reward_scale * batch.reward, batch.terminated, batch.done, gamma)
    return ret + discount * value


def bootstrap_obs(batch: Transition) -> jax.Array:
    """The observation each target bootstraps from ``[B, *obs]``: ``next_obs``, or
    for n-step windows that of the window's stopping step."""
    if batch.reward.ndim == 1:
        return batch.next_obs
    _, _, last = n_step_return(batch.reward, batch.terminated, batch.done, 1.0)
    index = last.reshape(last.shape + (1,) * (batch.next_obs.ndim - 1))
    return jnp.take_along_axis(batch.next_obs, index, axis=1)[:, 0]


def move_target(target_params: Any, params: Any, tau: jax.Array, move: jax.Array) -> Any:
    """``(1 − τ) θ̄ + τ θ`` where ``move`` (bool []), else ``θ̄`` unchanged."""
    return jax.tree.map(lambda t, p: jnp.where(move, (1.0 - tau) * t + tau * p, t), target_params, params)


def gradient_step(
    state: DQNState,
    batch: Transition,
    hp: Any,
    network: QNetwork,
    algo: Any,
    optimizer: optim.Optimizer | None = None,
) -> tuple[DQNState, tuple[jax.Array, ...]]:
    """One step on a sampled batch: the TD loss (:func:`jaxrl.rl.qlearning.td_loss`) of
    ``Q(s, a)`` to :func:`dqn_targets`, the optimizer step, then the target move when
    the step count reaches a multiple of ``target_update_interval``. Returns the new
    state and ``(loss, mean Q, mean target, grad norm)``."""
    first = batch if batch.reward.ndim == 1 else jax.tree.map(lambda x: x[:, 0], batch)
    next_obs = bootstrap_obs(batch)
    next_q_target = network.apply(state.target_params, next_obs)
    next_q_online = network.apply(state.params, next_obs) if algo.double else None
    target = jax.lax.stop_gradient(dqn_targets(batch, next_q_target, next_q_online, hp.gamma, hp.reward_scale))
    (loss, metrics), grads = jax.value_and_grad(q_loss, has_aux=True)(
        state.params, network, first.obs, first.action, target, algo.loss
    )
    params, opt_state, grad_norm = optim.apply(
        state.params, grads, state.opt_state, hp.lr, hp.max_grad_norm, optimizer=optimizer
    )
    steps = state.steps + 1
    target_params = move_target(state.target_params, params, hp.tau, steps % algo.target_update_interval == 0)
    state = state.replace(params=params, opt_state=opt_state, target_params=target_params, steps=steps)
    return state, (loss, metrics.q, jnp.mean(target), grad_norm)


def make_agent(
    algo: DQNConfig,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: nn.Module | None = None,
    optimizer: optim.Spec = None,
    perf: bool = False,
) -> Agent:
    """DQN for ``num_envs`` copies of a discrete-action ``env``. ``network``: a flax
    torso under the Q head; ``optimizer``: :mod:`jaxrl.rl.optim`; ``perf``: resolved."""
    q_network = make_q_network(algo, env, network, perf)
    optimizer = optim.make(optimizer)
    env_params = env.default_params if env_params is None else env_params
    n_actions = env.action_space.n
    grad_steps = replay.gradient_steps(algo, num_envs)
    warmup = replay.warmup_per_env(algo.learning_starts, num_envs)
    capacity = -(-algo.buffer_size // num_envs) * num_envs  # whole steps: an env's steps lie N slots apart
    steps_per_update = num_envs * algo.num_steps
    total_steps = warmup * num_envs + num_updates * steps_per_update

    def item(obs: jax.Array, action: jax.Array, out: Any) -> Transition:
        return Transition(obs, action, out.reward, out.terminated, out.done, out.final_obs)

    def env_steps(state: DQNState, steps: int, epsilon: jax.Array | None) -> tuple[DQNState, replay.Steps]:
        """``steps`` ε-greedy steps of every env (``epsilon=None``: uniform random
        actions, the warm-up)."""
        key, key_coin, key_action, key_env = jax.random.split(state.key, 4)
        coins = jax.random.uniform(key_coin, (steps, num_envs))
        randoms = jax.random.randint(key_action, (steps, num_envs), 0, n_actions)

        def policy(obs: jax.Array, draw: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
            coin, random_action = draw
            if epsilon is None:
                return random_action, random_action
            action = epsilon_greedy(q_network.apply(state.params, obs), epsilon, coin, random_action)
            return action, action

        env_state, obs, collected = replay.collect(
            env, env_params, state.env_state, state.obs, key_env, (coins, randoms), policy, item, perf
        )
        return state.replace(env_state=env_state, obs=obs, key=key), collected

    def store(state: DQNState, steps: replay.Steps) -> DQNState:
        return state.replace(buffer=buffers.add(state.buffer, steps.items))

    def init(key: jax.Array, hp: HParams) -> DQNState:
        key_params, key_env, key = jax.random.split(key, 3)
        dummy = jnp.zeros((1,) + env.obs_shape, jnp.float32)
        params = init_network(q_network, key_params, dummy, perf=perf)
        env_state, obs = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_env, num_envs), env_params)
        example = Transition(
            obs[0], jnp.zeros((), jnp.int32), jnp.zeros(()), jnp.zeros((), bool), jnp.zeros((), bool), obs[0]
        )
        state = DQNState(
            params=params,
            target_params=params,
            opt_state=optimizer.init(params),
            buffer=buffers.init(example, capacity),
            env_state=env_state,
            obs=obs,
            key=key,
            epsilon=jnp.asarray(hp.eps_start, jnp.float32),
            steps=jnp.zeros((), jnp.int32),
        )
        if warmup:
            state = store(*env_steps(state, warmup, None))
        return state

    def collect(state: DQNState, hp: HParams, update_idx: jax.Array) -> tuple[DQNState, replay.Steps]:
        """``num_steps`` ε-greedy steps of every env at the exploration rate of this update."""
        step = warmup * num_envs + update_idx.astype(jnp.float32) * steps_per_update
        epsilon = linear_epsilon(step, hp.eps_start, hp.eps_end, hp.exploration_fraction, total_steps)
        state, steps = env_steps(state, algo.num_steps, epsilon)
        return state.replace(epsilon=epsilon), steps

    def learn(
        state: DQNState, batch: replay.Steps, hp: HParams, update_idx: jax.Array
    ) -> tuple[DQNState, UpdateMetrics]:
        """``batch`` into the buffer, then the update's gradient steps on sampled batches."""
        state = store(state, batch)
        epsilon = state.epsilon
        key, key_index = jax.random.split(state.key)
        if algo.n_step == 1:
            index = buffers.sample_indices(state.buffer, key_index, (grad_steps, algo.batch_size))
        else:
            index = buffers.sequence_indices(
                state.buffer, key_index, (grad_steps, algo.batch_size), algo.n_step, num_envs
            )

        def step(state: DQNState, index: jax.Array):
            return gradient_step(state, buffers.take(state.buffer, index), hp, q_network, algo, optimizer)

        state, (loss, q, target, grad_norm) = jax.lax.scan(step, state.replace(key=key), index)
        loss, q, target, grad_norm = (jnp.mean(x) for x in (loss, q, target, grad_norm))
        finite = jnp.isfinite(loss) & optim.tree_all_finite(state.params)
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, finite),
            loss=loss,
            q=q,
            target=target,
            epsilon=epsilon,
            grad_norm=grad_norm,
            lr=hp.lr,
        )
        return state, metrics

    def act(state: DQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        del key  # greedy
        return jnp.argmax(q_network.apply(state.params, obs), axis=-1).astype(jnp.int32)

    def sample(state: DQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        """ε-greedy at the exploration rate of the last collection."""
        key_coin, key_action = jax.random.split(key)
        batch = obs.shape[: obs.ndim - len(env.obs_shape)]
        coin = jax.random.uniform(key_coin, batch)
        random_action = jax.random.randint(key_action, batch, 0, n_actions)
        return epsilon_greedy(q_network.apply(state.params, obs), state.epsilon, coin, random_action)

    phases = (
        (
            "collect: env step + Q forward + ε-greedy + buffer write",
            lambda state, hp: store(*env_steps(state, algo.num_steps, hp.eps_end)),
        ),
    )
    return Agent(init, collect, learn, act, sample, q_network, steps_per_update, warmup * num_envs, phases=phases)


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """DQN's checks beyond each field's own."""
    algo = config.algo
    replay.validate_replay(config, 128, 50000)
    validate_q_network(algo)
    window = algo.n_step * config.num_envs
    if algo.n_step > 1 and algo.buffer_size < window:
        raise ConfigError(
            "algo.n_step",
            algo.n_step,
            f"needs a buffer of at least n_step × num_envs = {window} transitions (algo.buffer_size={algo.buffer_size})",
            "pass a smaller algo.n_step or a larger algo.buffer_size",
        )


ALGORITHM = Algorithm(
    name="dqn",
    config=DQNConfig,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="DQN: double-DQN targets, optional dueling head and n-step returns, target network, on-device replay",
    actions=("discrete",),
    warmup=replay.warmup,
    presets=load_presets("dqn"),
    validate=validate,
)
