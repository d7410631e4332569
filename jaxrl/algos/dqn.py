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

The same learner with a distributional value head (:class:`~jaxrl.algos.qvalue.ValueHead`)
is ``algo=c51`` (categorical, Bellemare et al. 2017, arXiv:1707.06887) and
``algo=qrdqn`` (quantile regression, Dabney et al. 2018, arXiv:1710.10044): the
bootstrap action is the greedy one under the distribution's mean (the online
network's with ``double``), and the target ``R⁽ⁿ⁾ + γᵐ (1 − terminated) Z̄(s'_m, a*)``
is projected onto the support (C51) or kept as samples (QR-DQN); ``algo=iqn``
(implicit quantiles, Dabney, Ostrovski, Silver & Munos 2018, arXiv:1806.06923)
draws the levels of both networks' quantiles afresh for every item and step.

Pure pieces: :func:`bootstrap_terms`, :func:`dqn_targets`, :func:`gradient_step`, :func:`make_agent`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.algos import replay
from jaxrl.algos.presets import load_presets
from jaxrl.algos.qvalue import ValueHead, make_q_network, validate_q_network, value_head
from jaxrl.core.checks import POSITIVE, POSITIVE_INT, UNIT, Range
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, LoopMetrics, own_metrics
from jaxrl.core.errors import ConfigError
from jaxrl.core.fields import HParams, setting, traced
from jaxrl.envs.core import Env
from jaxrl.nets.networks import init as init_network
from jaxrl.rl import buffers, optim
from jaxrl.rl.qlearning import epsilon_greedy, linear_epsilon, n_step_return, q_target

__all__ = [
    "DQNConfig",
    "C51Config",
    "QRDQNConfig",
    "IQNConfig",
    "HParams",
    "DQNState",
    "Transition",
    "UpdateMetrics",
    "C51Metrics",
    "bootstrap_terms",
    "dqn_targets",
    "gradient_step",
    "move_target",
    "make_agent",
    "ALGORITHM",
    "C51",
    "QRDQN",
    "IQN",
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


@dataclass(frozen=True)
class C51Config(DQNConfig):
    """C51 (Bellemare, Dabney & Munos, 2017): DQN learning a categorical
    distribution of the return on a fixed support per action."""

    value: ClassVar[str] = "categorical"
    name: str = "c51"
    atoms: int = setting(101, check=Range(2, integer=True))  # support points from v_min to v_max
    v_min: float = -100.0  # the support's lowest return
    v_max: float = 100.0  # the support's highest return (must bracket the discounted returns)
    loss: str = "cross_entropy"  # the categorical head's (not settable)


@dataclass(frozen=True)
class QRDQNConfig(DQNConfig):
    """QR-DQN (Dabney, Rowland, Bellemare & Munos, 2018): DQN learning the
    return's quantiles at fixed levels by quantile regression."""

    value: ClassVar[str] = "quantile"
    name: str = "qrdqn"
    quantiles: int = setting(50, check=Range(1, integer=True))  # quantile locations per action
    kappa: float = setting(1.0, check=Range(0.0))  # quantile Huber threshold (0: the plain quantile loss)
    loss: str = "quantile_huber"  # the quantile head's (not settable)


@dataclass(frozen=True)
class IQNConfig(DQNConfig):
    """IQN (Dabney, Ostrovski, Silver & Munos, 2018): DQN learning the return's
    quantile function, at levels drawn afresh for every item and step."""

    value: ClassVar[str] = "implicit"
    name: str = "iqn"
    quantiles: int = setting(32, check=Range(1, integer=True))  # levels drawn per item for each network (N = N')
    act_quantiles: int = setting(32, check=Range(1, integer=True))  # evenly spaced levels whose mean Q acts (K)
    embedding_dim: int = setting(64, check=Range(1, integer=True))  # cosine features of a level
    kappa: float = setting(1.0, check=Range(0.0))  # quantile Huber threshold (0: the plain quantile loss)
    loss: str = "quantile_huber"  # the implicit head's (not settable)


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


# UpdateMetrics and ``clipped``: the fraction of the target's probability mass
# outside [v_min, v_max] before projection (moved to the support's edges)
C51Metrics = NamedTuple("C51Metrics", [*UpdateMetrics.__annotations__.items(), ("clipped", jax.Array)])


def bootstrap_terms(batch: Transition, gamma: jax.Array, reward_scale: jax.Array = 1.0) -> tuple[jax.Array, jax.Array]:
    """``(R, discount)`` ``[B]`` of a batch (leaves ``[B]``, or ``[B, n]`` for n-step
    windows): the (scaled) return up to the bootstrap and what multiplies the
    bootstrap value, ``γ (1 − terminated)`` or ``γᵐ⁺¹ (1 − terminated_m)``."""
    if batch.reward.ndim == 1:
        not_terminal = 1.0 - batch.terminated.astype(jnp.float32)
        return reward_scale * batch.reward, gamma * not_terminal
    ret, discount, _ = n_step_return(reward_scale * batch.reward, batch.terminated, batch.done, gamma)
    return ret, discount


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
    ret, discount = bootstrap_terms(batch, gamma, reward_scale)
    return ret + discount * q_target(next_q_target, next_q_online)


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
    network: nn.Module,
    algo: Any,
    optimizer: optim.Optimizer | None = None,
    head: ValueHead | None = None,
    key: jax.Array | None = None,
) -> tuple[DQNState, tuple[jax.Array, ...]]:
    """One step on a sampled batch: the head's loss (scalar: the TD loss
    :func:`jaxrl.rl.qlearning.td_loss`) of the taken actions' outputs to the target
    built from :func:`bootstrap_terms` and the target network's output at the greedy
    bootstrap action, the optimizer step, then the target move when the step count
    reaches a multiple of ``target_update_interval``. The implicit head draws its
    levels from ``key`` (:meth:`ValueHead.sample_levels`); the bootstrap action is
    chosen at the evenly spaced acting levels. Returns the new state and
    ``(loss, mean Q, mean target value, grad norm, clipped share)``."""
    head = value_head(algo) if head is None else head
    first = batch if batch.reward.ndim == 1 else jax.tree.map(lambda x: x[:, 0], batch)
    next_obs = bootstrap_obs(batch)
    taus, next_taus = head.sample_levels(key, first.reward.shape[0]) if head.kind == "implicit" else (None, None)

    def apply(params: Any, obs: jax.Array, levels: jax.Array | None) -> jax.Array:
        return network.apply(params, obs) if levels is None else network.apply(params, obs, levels)

    next_target = apply(state.target_params, next_obs, next_taus)  # [B, n(, atoms)]
    if algo.double:
        chooser = head.q(apply(state.params, next_obs, None))
    else:
        chooser = head.q(next_target if next_taus is None else apply(state.target_params, next_obs, None))
    best = jnp.argmax(chooser, axis=-1)
    next_out = _taken(next_target, best)
    ret, discount = bootstrap_terms(batch, hp.gamma, hp.reward_scale)
    target = jax.lax.stop_gradient(head.target(ret, discount, next_out))
    clipped = head.clipped(ret, discount, next_out) if head.kind == "categorical" else jnp.zeros(())

    def loss_fn(params: Any) -> tuple[jax.Array, jax.Array]:
        out = _taken(apply(params, first.obs, taus), first.action.astype(jnp.int32))
        return head.loss(out, target, algo.loss, taus), jnp.mean(head.q(out[:, None])[:, 0])

    (loss, q), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    params, opt_state, grad_norm = optim.apply(
        state.params, grads, state.opt_state, hp.lr, hp.max_grad_norm, optimizer=optimizer
    )
    steps = state.steps + 1
    target_params = move_target(state.target_params, params, hp.tau, steps % algo.target_update_interval == 0)
    state = state.replace(params=params, opt_state=opt_state, target_params=target_params, steps=steps)
    value = ret + discount * head.q(next_out[:, None])[:, 0]  # the target's mean
    return state, (loss, q, jnp.mean(value), grad_norm, clipped)


def _taken(out: jax.Array, action: jax.Array) -> jax.Array:
    """The outputs ``[B]`` / ``[B, atoms]`` of the actions ``[B]`` from ``[B, n(, atoms)]``."""
    index = action.reshape(action.shape + (1,) * (out.ndim - action.ndim))
    return jnp.take_along_axis(out, index, axis=1)[:, 0]


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
    head = value_head(algo)

    def q_values(params: Any, obs: jax.Array) -> jax.Array:
        return head.q(q_network.apply(params, obs))

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
            action = epsilon_greedy(q_values(state.params, obs), epsilon, coin, random_action)
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
        if head.kind == "implicit":  # one key per gradient step for its levels
            key, key_index, key_levels = jax.random.split(state.key, 3)
            level_keys = jax.random.split(key_levels, grad_steps)
        else:
            key, key_index = jax.random.split(state.key)
            level_keys = None
        if algo.n_step == 1:
            index = buffers.sample_indices(state.buffer, key_index, (grad_steps, algo.batch_size))
        else:
            index = buffers.sequence_indices(
                state.buffer, key_index, (grad_steps, algo.batch_size), algo.n_step, num_envs
            )

        def step(state: DQNState, xs: tuple[jax.Array, jax.Array | None]):
            index, level_key = xs
            batch = buffers.take(state.buffer, index)
            return gradient_step(state, batch, hp, q_network, algo, optimizer, head, level_key)

        state, (loss, q, target, grad_norm, clipped) = jax.lax.scan(step, state.replace(key=key), (index, level_keys))
        loss, q, target, grad_norm, clipped = (jnp.mean(x) for x in (loss, q, target, grad_norm, clipped))
        finite = jnp.isfinite(loss) & optim.tree_all_finite(state.params)
        loop = LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, finite)
        metrics = UpdateMetrics(loop, loss, q, target, epsilon, grad_norm, hp.lr)
        if head.kind == "categorical":
            metrics = C51Metrics(*metrics, clipped=clipped)
        return state, metrics

    def act(state: DQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        del key  # greedy
        return jnp.argmax(q_values(state.params, obs), axis=-1).astype(jnp.int32)

    def sample(state: DQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        """ε-greedy at the exploration rate of the last collection."""
        key_coin, key_action = jax.random.split(key)
        batch = obs.shape[: obs.ndim - len(env.obs_shape)]
        coin = jax.random.uniform(key_coin, batch)
        random_action = jax.random.randint(key_action, batch, 0, n_actions)
        return epsilon_greedy(q_values(state.params, obs), state.epsilon, coin, random_action)

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


def _declare(name: str, config: type, metrics: type, description: str) -> Algorithm:
    """One member of the DQN family: the same learner, its own config, metrics and presets."""
    return Algorithm(
        name=name,
        config=config,
        make_agent=make_agent,
        seams=("network", "optimizer", "perf"),
        metrics=own_metrics(metrics),
        description=description,
        actions=("discrete",),
        warmup=replay.warmup,
        presets=load_presets(name),
        validate=validate,
    )


ALGORITHM = _declare(
    "dqn",
    DQNConfig,
    UpdateMetrics,
    "DQN: double-DQN targets, optional dueling head and n-step returns, target network, on-device replay",
)
C51 = _declare(
    "c51",
    C51Config,
    C51Metrics,
    "C51: DQN with a categorical return distribution per action (projected Bellman target)",
)
QRDQN = _declare(
    "qrdqn",
    QRDQNConfig,
    UpdateMetrics,
    "QR-DQN: DQN learning the return's quantiles by quantile-Huber regression",
)
IQN = _declare(
    "iqn",
    IQNConfig,
    UpdateMetrics,
    "IQN: DQN learning the return's quantile function at sampled levels (cosine level embedding)",
)
