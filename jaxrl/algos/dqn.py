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

``algo=rainbow`` (Hessel et al. 2018, arXiv:1710.02298) is C51 with 3-step
returns, a dueling head, double-DQN targets, noisy head layers that explore in
place of ε-greedy (:class:`~jaxrl.nets.networks.NoisyDense`; fresh noise for each
env at each step when acting, one sample per network and gradient step when
learning; the mean weights when evaluating) and proportional prioritized replay (Schaul et al. 2016,
arXiv:1511.05952): n-step windows are drawn in proportion to ``p^α``, where ``p``
is the window's last KL divergence of the prediction from the projected target
(new windows get the largest so far), and each item's loss is weighted by
``(size · P)^(−β) / max``, β rising linearly from ``priority_weight`` to 1 over the
run. The sum-tree lives in the compiled program, one per seed
(:mod:`jaxrl.rl.prioritized`).

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
from jaxrl.algos.replay import bootstrap_obs, bootstrap_terms
from jaxrl.core.checks import POSITIVE, POSITIVE_INT, UNIT, Range, require_one_of
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, Behaviour, LoopMetrics, own_metrics
from jaxrl.core.errors import ConfigError
from jaxrl.core.fields import HParams, setting, traced
from jaxrl.envs.core import Env
from jaxrl.nets.networks import init as init_network
from jaxrl.rl import buffers, optim, prioritized
from jaxrl.rl.qlearning import epsilon_greedy, linear_epsilon, q_target

__all__ = [
    "DQNConfig",
    "C51Config",
    "QRDQNConfig",
    "IQNConfig",
    "RainbowConfig",
    "HParams",
    "DQNState",
    "Transition",
    "UpdateMetrics",
    "C51Metrics",
    "RainbowMetrics",
    "bootstrap_terms",
    "dqn_targets",
    "gradient_step",
    "move_target",
    "make_agent",
    "ALGORITHM",
    "C51",
    "QRDQN",
    "IQN",
    "RAINBOW",
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


@dataclass(frozen=True)
class RainbowConfig(C51Config):
    """Rainbow (Hessel et al., 2018): C51 with prioritized replay, noisy head
    layers, n-step returns, a dueling head and double-DQN targets."""

    name: str = "rainbow"
    n_step: int = setting(3, check=POSITIVE_INT)
    dueling: bool = True
    replay: str = "prioritized"  # prioritized | uniform
    noisy: bool = True  # noisy head layers (exploration by parameter noise, with ε-greedy on top if eps_start > 0)
    noise_std: float = setting(0.5, check=POSITIVE)  # σ0 of the factorized noisy layers
    # --- traced ---------------------------------------------------------------
    priority_exponent: float = traced(0.5, check=UNIT, pbt=(0.0, 1.0, False))  # α: priorities p^α (0: uniform)
    priority_weight: float = traced(
        0.4, check=UNIT, pbt=(0.0, 1.0, False)
    )  # β0 of the importance weights, rising linearly to 1
    eps_start: float = traced(0.0, check=UNIT)  # ε-greedy on top of the noisy layers (0: none)
    eps_end: float = traced(0.0, check=UNIT)


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
    buffer: buffers.ReplayBuffer | replay.Prioritized  # prioritized: Rainbow's default
    env_state: Any  # [N]
    obs: jax.Array  # [N, *obs]
    key: jax.Array
    epsilon: jax.Array  # float32 [] of the last collection (``sample`` uses it)
    steps: jax.Array  # int32 [] gradient steps taken


class DQNActing(NamedTuple):
    """What the actors of a host env are handed of a member (``Agent.acting``): not its buffer."""

    params: Any
    epsilon: jax.Array  # float32 []: the exploration rate of the update they collect for
    random: jax.Array  # bool []: the buffer holds less than the warm-up, act uniformly at random


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
# C51Metrics, ``beta``: the importance weights' exponent of the update (1 with
# uniform replay) and ``sigma``: the mean |σ_W| of the noisy layers (0 without)
RainbowMetrics = NamedTuple(
    "RainbowMetrics", [*C51Metrics.__annotations__.items(), ("beta", jax.Array), ("sigma", jax.Array)]
)


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
    weights: jax.Array | None = None,
    noise: jax.Array | None = None,
    with_surprise: bool = False,
) -> tuple[DQNState, tuple[jax.Array, ...]]:
    """One step on a sampled batch: the head's loss (scalar: the TD loss
    :func:`jaxrl.rl.qlearning.td_loss`) of the taken actions' outputs to the target
    built from :func:`bootstrap_terms` and the target network's output at the greedy
    bootstrap action, the optimizer step, then the target move when the step count
    reaches a multiple of ``target_update_interval``. The implicit head draws its
    levels from ``key`` (:meth:`ValueHead.sample_levels`); the bootstrap action is
    chosen at the evenly spaced acting levels. ``weights`` ``[B]``: each item's
    loss weight (prioritized replay's importance weights); ``noise``: a key for
    a noisy network's noise, drawn independently for the loss's, the bootstrap
    choice's and the target's outputs. Returns the new state and ``(loss, mean Q,
    mean target value, grad norm, clipped share)``, and with ``with_surprise``
    each item's :meth:`ValueHead.surprise` ``[B]`` before the step (what
    prioritized replay ranks by) as a sixth."""
    head = value_head(algo) if head is None else head
    first = batch if batch.reward.ndim == 1 else jax.tree.map(lambda x: x[:, 0], batch)
    next_obs = bootstrap_obs(batch)
    taus, next_taus = head.sample_levels(key, first.reward.shape[0]) if head.kind == "implicit" else (None, None)
    noises = (None, None, None) if noise is None else tuple(jax.random.split(noise, 3))

    def apply(params: Any, obs: jax.Array, levels: jax.Array | None, noise: jax.Array | None = None) -> jax.Array:
        if noise is not None:
            return network.apply(params, obs, rngs={"noise": noise})
        return network.apply(params, obs) if levels is None else network.apply(params, obs, levels)

    next_target = apply(state.target_params, next_obs, next_taus, noises[2])  # [B, n(, atoms)]
    if algo.double:
        chooser = head.q(apply(state.params, next_obs, None, noises[1]))
    else:
        chooser = head.q(next_target if next_taus is None else apply(state.target_params, next_obs, None))
    best = jnp.argmax(chooser, axis=-1)
    next_out = _taken(next_target, best)
    ret, discount = bootstrap_terms(batch, hp.gamma, hp.reward_scale)
    target = jax.lax.stop_gradient(head.target(ret, discount, next_out))
    clipped = head.clipped(ret, discount, next_out) if head.kind == "categorical" else jnp.zeros(())

    def loss_fn(params: Any) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
        out = _taken(apply(params, first.obs, taus, noises[0]), first.action.astype(jnp.int32))
        return head.loss(out, target, algo.loss, taus, weights), (jnp.mean(head.q(out[:, None])[:, 0]), out)

    (loss, (q, out)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
    params, opt_state, grad_norm = optim.apply(
        state.params, grads, state.opt_state, hp.lr, hp.max_grad_norm, optimizer=optimizer
    )
    steps = state.steps + 1
    target_params = move_target(state.target_params, params, hp.tau, steps % algo.target_update_interval == 0)
    state = state.replace(params=params, opt_state=opt_state, target_params=target_params, steps=steps)
    value = ret + discount * head.q(next_out[:, None])[:, 0]  # the target's mean
    stats = (loss, q, jnp.mean(value), grad_norm, clipped)
    if with_surprise:
        stats = (*stats, head.surprise(jax.lax.stop_gradient(out), target, taus))
    return state, stats


def noise_scale(params: Any) -> jax.Array:
    """float32 ``[]``: the mean ``|σ_W|`` of a network's noisy layers (0 without any)."""
    sigmas = [
        jnp.mean(jnp.abs(x))
        for path, x in jax.tree_util.tree_leaves_with_path(params)
        if "sigma_kernel" in jax.tree_util.keystr(path)
    ]
    return jnp.mean(jnp.stack(sigmas)) if sigmas else jnp.zeros((), jnp.float32)


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
    rainbow = isinstance(algo, RainbowConfig)
    noisy = rainbow and algo.noisy
    ranked = rainbow and algo.replay == "prioritized"
    window = (algo.n_step - 1) * num_envs  # slots from an n-step window's first item to its last

    def q_values(params: Any, obs: jax.Array, noise: jax.Array | None = None) -> jax.Array:
        """Action values ``[..., A]``; ``noise``: a key for the noisy layers' noise
        (without: their mean weights)."""
        if noise is None:
            return head.q(q_network.apply(params, obs))
        return head.q(q_network.apply(params, obs, rngs={"noise": noise}))

    optimizer = optim.make(optimizer)
    env_params = env.default_params if env_params is None else env_params
    n_actions = env.action_space.n
    grad_steps = replay.gradient_steps(algo, num_envs)
    warmup = replay.warmup_per_env(algo.learning_starts, num_envs)
    capacity = -(-algo.buffer_size // num_envs) * num_envs  # whole steps: an env's steps lie N slots apart
    steps_per_update = num_envs * algo.num_steps
    total_steps = warmup * num_envs + num_updates * steps_per_update
    host = not env.steps_in_program  # a host env: the actors take the warm-up within the budget

    def host_epsilon(hp: HParams, update_idx: jax.Array) -> jax.Array:
        """ε of update ``update_idx`` on a host env, whose budget holds the warm-up."""
        step = update_idx.astype(jnp.float32) * steps_per_update
        return linear_epsilon(step, hp.eps_start, hp.eps_end, hp.exploration_fraction, num_updates * steps_per_update)

    def item(obs: jax.Array, action: jax.Array, out: Any) -> Transition:
        return Transition(obs, action, out.reward, out.terminated, out.done, out.final_obs)

    def env_steps(state: DQNState, steps: int, epsilon: jax.Array | None) -> tuple[DQNState, replay.Steps]:
        """``steps`` ε-greedy steps of every env (``epsilon=None``: uniform random
        actions, the warm-up)."""
        key, key_coin, key_action, key_env = jax.random.split(state.key, 4)
        coins = jax.random.uniform(key_coin, (steps, num_envs))
        randoms = jax.random.randint(key_action, (steps, num_envs), 0, n_actions)
        draws = (coins, randoms)
        if noisy and epsilon is not None:  # a key per env and step: each env acts under its own noise
            key, key_noise = jax.random.split(key)
            draws = (coins, randoms, jax.random.split(key_noise, (steps, num_envs)))

        def policy(obs: jax.Array, draw: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
            coin, random_action = draw[:2]
            if epsilon is None:
                return random_action, random_action
            if len(draw) > 2:
                q = jax.vmap(lambda o, k: q_values(state.params, o[None], k)[0])(obs, draw[2])
            else:
                q = q_values(state.params, obs)
            action = epsilon_greedy(q, epsilon, coin, random_action)
            return action, action

        env_state, obs, collected = replay.collect(
            env, env_params, state.env_state, state.obs, key_env, draws, policy, item, perf
        )
        return state.replace(env_state=env_state, obs=obs, key=key), collected

    def store(state: DQNState, steps: replay.Steps) -> DQNState:
        buffer, items = state.buffer, steps.items
        if algo.n_step > 1:  # host envs' steps may have gaps that windows must not bridge
            ring, items = replay.cut_windows(buffer.ring if ranked else buffer, items, steps.cut)
            buffer = buffer.replace(ring=ring) if ranked else ring
        if ranked:
            return state.replace(buffer=replay.prioritized_add(buffer, items, window))
        return state.replace(buffer=buffers.add(buffer, items))

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
            buffer=replay.prioritized_init(example, capacity) if ranked else buffers.init(example, capacity),
            env_state=env_state,
            obs=obs,
            key=key,
            epsilon=jnp.asarray(hp.eps_start, jnp.float32),
            steps=jnp.zeros((), jnp.int32),
        )
        if warmup and env.steps_in_program:  # host envs: the actors' first steps are the warm-up
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
        if host:  # no in-program collect set it: the actors acted at this update's rate
            state = state.replace(epsilon=host_epsilon(hp, update_idx))
        epsilon = state.epsilon
        if head.kind == "implicit":  # one key per gradient step for its levels
            key, key_index, key_levels = jax.random.split(state.key, 3)
            level_keys = jax.random.split(key_levels, grad_steps)
        else:
            key, key_index = jax.random.split(state.key)
            level_keys = None
        noise_keys = None
        if noisy:  # one key per gradient step for its networks' noise
            key, key_noise = jax.random.split(key)
            noise_keys = jax.random.split(key_noise, grad_steps)
        if ranked:  # drawn inside each gradient step, from the priorities the previous one left
            index = jax.random.split(key_index, grad_steps)
        elif algo.n_step == 1:
            index = buffers.sample_indices(state.buffer, key_index, (grad_steps, algo.batch_size))
        else:
            index = buffers.sequence_indices(
                state.buffer, key_index, (grad_steps, algo.batch_size), algo.n_step, num_envs
            )
        # β rises linearly from priority_weight (first update) to 1 (last)
        beta = 1.0
        if ranked:
            progress = update_idx.astype(jnp.float32) / max(num_updates - 1, 1)
            beta = jnp.minimum(1.0, hp.priority_weight + (1.0 - hp.priority_weight) * progress)

        def step(state: DQNState, xs: tuple[jax.Array, jax.Array | None, jax.Array | None]):
            index, level_key, noise_key = xs
            if not ranked:
                batch = buffers.take(state.buffer, index)
                return gradient_step(state, batch, hp, q_network, algo, optimizer, head, level_key, None, noise_key)
            start, weights = replay.prioritized_sample(state.buffer, index, algo.batch_size, window, beta)
            slots = start if algo.n_step == 1 else (start[:, None] + num_envs * jnp.arange(algo.n_step)) % capacity
            batch = buffers.take(state.buffer.ring, slots)
            state, out = gradient_step(
                state, batch, hp, q_network, algo, optimizer, head, level_key, weights, noise_key, with_surprise=True
            )
            ranks = prioritized.priority(out[5], hp.priority_exponent)
            return state.replace(buffer=replay.prioritized_update(state.buffer, start, ranks)), out[:5]

        xs = (index, level_keys, noise_keys)
        state, (loss, q, target, grad_norm, clipped) = jax.lax.scan(step, state.replace(key=key), xs)
        loss, q, target, grad_norm, clipped = (jnp.mean(x) for x in (loss, q, target, grad_norm, clipped))
        finite = jnp.isfinite(loss) & optim.tree_all_finite(state.params)
        loop = LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, finite)
        metrics = UpdateMetrics(loop, loss, q, target, epsilon, grad_norm, hp.lr)
        if head.kind == "categorical":
            metrics = C51Metrics(*metrics, clipped=clipped)
        if rainbow:
            metrics = RainbowMetrics(*metrics, beta=jnp.asarray(beta, jnp.float32), sigma=noise_scale(state.params))
        return state, metrics

    def act(state: DQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        del key  # greedy
        return jnp.argmax(q_values(state.params, obs), axis=-1).astype(jnp.int32)

    def sample(state: DQNState, obs: jax.Array, key: jax.Array) -> jax.Array:
        """ε-greedy at the exploration rate of the last collection (noisy layers:
        under fresh noise)."""
        noise = None
        if noisy:
            key, noise = jax.random.split(key)
        key_coin, key_action = jax.random.split(key)
        batch = obs.shape[: obs.ndim - len(env.obs_shape)]
        coin = jax.random.uniform(key_coin, batch)
        random_action = jax.random.randint(key_action, batch, 0, n_actions)
        return epsilon_greedy(q_values(state.params, obs, noise), state.epsilon, coin, random_action)

    def acting(state: DQNState, hp: HParams, update_idx: jax.Array) -> DQNActing:
        """The actors' part of ``state`` for update ``update_idx``: the network, its
        exploration rate and whether the buffer still lacks the warm-up."""
        stored = state.buffer.ring.size if ranked else state.buffer.size
        return DQNActing(state.params, host_epsilon(hp, update_idx), stored < warmup * num_envs)

    def behave(view: DQNActing, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Behaviour]:
        """An actor's step outside the program (:mod:`jaxrl.actors`): uniform actions
        during the warm-up, ε-greedy after it (noisy layers: each env under its own noise)."""
        key_coin, key_action, key_noise = jax.random.split(key, 3)
        n = obs.shape[0]
        coin = jax.random.uniform(key_coin, (n,))
        random_action = jax.random.randint(key_action, (n,), 0, n_actions)
        if noisy:
            q = jax.vmap(lambda o, k: q_values(view.params, o[None], k)[0])(obs, jax.random.split(key_noise, n))
        else:
            q = q_values(view.params, obs)
        action = jnp.where(view.random, random_action, epsilon_greedy(q, view.epsilon, coin, random_action))
        return action, Behaviour(action, jnp.zeros((n,), jnp.float32))

    def complete(state: DQNState, steps: Any) -> replay.Steps:
        """The actors' steps ``[T, N, ...]`` as ``learn``'s batch (:func:`jaxrl.algos.replay.from_actors`)."""
        fields = ("obs", "action", "reward", "terminated", "done", "final_obs")
        return replay.from_actors(steps, lambda f: Transition(*(f[name] for name in fields)))

    def warm(
        state: DQNState, batch: replay.Steps, hp: HParams, update_idx: jax.Array
    ) -> tuple[DQNState, UpdateMetrics]:
        """An update of the warm-up on host envs: ``batch`` into the buffer, no gradient
        step (losses 0, ε 1: the actors act uniformly)."""
        state = store(state, batch)
        zero, one = jnp.zeros((), jnp.float32), jnp.ones((), jnp.float32)
        loop = LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, jnp.ones((), bool))
        metrics = UpdateMetrics(loop, zero, zero, zero, one, zero, hp.lr)
        if head.kind == "categorical":
            metrics = C51Metrics(*metrics, clipped=zero)
        if rainbow:
            beta = hp.priority_weight if ranked else 1.0
            metrics = RainbowMetrics(*metrics, beta=jnp.asarray(beta, jnp.float32), sigma=noise_scale(state.params))
        return state, metrics

    phases = (
        (
            "collect: env step + Q forward + ε-greedy + buffer write",
            lambda state, hp: store(*env_steps(state, algo.num_steps, hp.eps_end)),
        ),
    )
    return Agent(
        init,
        collect,
        learn,
        act,
        sample,
        q_network,
        steps_per_update,
        warmup * num_envs,
        phases=phases,
        behave=behave,
        complete=complete,
        acting=acting,
        warm=warm,
    )


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """DQN's checks beyond each field's own."""
    algo = config.algo
    replay.validate_replay(config, 128, 50000)
    validate_q_network(algo)
    replay.validate_n_step(config)
    span = (algo.n_step - 1) * config.num_envs  # slots from a window's first item to its last
    if isinstance(algo, RainbowConfig):
        _validate_rainbow(config, span)


def _validate_rainbow(config: Config, window: int) -> None:
    """Rainbow's replay: one of its kinds, and a buffer that holds each write
    (the warm-up's, an update's) beside the newest windows still being filled."""
    algo = config.algo
    require_one_of("algo.replay", algo.replay, ("prioritized", "uniform"), "prioritized")
    if algo.replay != "prioritized":
        return
    num_envs = config.num_envs
    capacity = -(-algo.buffer_size // num_envs) * num_envs
    largest = max(replay.warmup(algo, num_envs), num_envs * algo.num_steps)
    if largest + window > capacity:
        raise ConfigError(
            "algo.buffer_size",
            algo.buffer_size,
            f"must hold the largest write ({largest} transitions: the warm-up or one update) plus "
            f"(n_step − 1) × num_envs = {window} with prioritized replay",
            f"pass algo.buffer_size={largest + window} or more, or a smaller algo.learning_starts",
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
RAINBOW = _declare(
    "rainbow",
    RainbowConfig,
    RainbowMetrics,
    "Rainbow: C51 with prioritized replay, noisy layers, n-step returns, dueling head and double-DQN targets",
)
