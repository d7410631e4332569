"""Soft Actor-Critic (Haarnoja et al., 2018, "Soft Actor-Critic Algorithms and
Applications", arXiv:1812.05905) with an on-device replay buffer.

Pure pieces, importable on their own:

* :func:`critic_loss`, :func:`actor_loss`, :func:`alpha_loss` — the three
  losses on plain arrays and parameters, each ``-> (loss, metrics)``;
* :func:`gradient_step` — one update of critics, actor, temperature and the
  Polyak-averaged target critics from one sampled batch;
* :func:`make_agent` — ``init`` (with the random-action warm-up that fills the
  buffer), ``collect`` (``num_steps`` env steps of ``N`` envs), ``learn``
  (those transitions into the buffer, then ``round(utd · N · num_steps)``
  gradient steps on sampled batches) and ``act`` for :func:`jaxrl.make_train`.

Time limits: the critic target bootstraps from the *pre-reset* next
observation unless the transition truly terminated,
``y = r + γ (1 − terminated) (min_i Q̄_i(s', a') − α log π(a'|s'))``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from jaxrl.algos import replay
from jaxrl.algos.presets import load_presets
from jaxrl.algos.qvalue import ValueHead, smaller_twin, twin_critic, validate_critic
from jaxrl.algos.replay import Transition, scale_action
from jaxrl.core.checks import NON_NEGATIVE, OPEN_UNIT, POSITIVE, POSITIVE_INT, UNIT, Range, check_mlp
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, Behaviour, LoopMetrics, own_metrics
from jaxrl.core.errors import ConfigError
from jaxrl.core.fields import HParams, setting, traced
from jaxrl.envs.core import Box, Env
from jaxrl.nets.networks import MLP, TwinCritic, check_network, dense, init_many, make_torso, with_perf
from jaxrl.rl import buffers, normalize, optim
from jaxrl.rl.distributions import TanhGaussian

__all__ = [
    "SACConfig",
    "HParams",
    "SACState",
    "Transition",
    "Actor",
    "critic_loss",
    "actor_loss",
    "alpha_loss",
    "gradient_step",
    "make_agent",
    "ALGORITHM",
]


@dataclass(frozen=True)
class SACConfig:
    """Soft Actor-Critic (Haarnoja et al., 2018, arXiv:1812.05905): twin
    critics, Polyak-averaged targets, automatic entropy temperature."""

    name: str = "sac"
    # --- static -------------------------------------------------------------
    num_steps: int = 1  # env steps per env per update
    utd: float = 1.0  # gradient steps per env step (all envs of a seed)
    batch_size: int = 256  # transitions per gradient step
    buffer_size: int = 100_000  # replay capacity per seed
    learning_starts: int = 1000  # random-action env steps per seed before learning
    # n-step returns: each critic target sums n consecutive rewards of one env (stopping
    # where its episode ends) before the soft bootstrap at the n-th next observation
    n_step: int = setting(1, check=POSITIVE_INT)
    network: str = "mlp"  # torso by name (jaxrl.nets.register_torso adds one)
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    normalize_obs: bool = False
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    # scalar | categorical: each critic's return distribution on ``atoms`` points from
    # v_min to v_max, learned by cross-entropy to the projected soft target
    critic: str = "scalar"
    atoms: int = setting(101, check=Range(2, integer=True))
    v_min: float = -250.0
    v_max: float = 250.0
    critic_hidden_sizes: tuple[int, ...] = ()  # the critics' MLP widths (empty: algo.hidden_sizes)
    norm: str = "none"  # layer_norm | none: a LayerNorm before each activation of the critics' MLPs
    weight_decay: float = setting(0.0, check=NON_NEGATIVE)  # > 0: AdamW (decoupled decay) for actor and critics
    policy_delay: int = setting(1, check=POSITIVE_INT)  # critic steps per actor and temperature step (FastSAC: 4)
    # --- traced -------------------------------------------------------------
    lr: float = traced(3e-4, check=POSITIVE, pbt=(1e-5, 1e-1, True))  # actor and critic
    alpha_lr: float = traced(3e-4, check=POSITIVE, pbt=(1e-5, 1e-2, True))  # temperature
    gamma: float = traced(0.99, check=UNIT, pbt=(0.9, 0.9999, False))
    tau: float = traced(0.005, check=OPEN_UNIT, pbt=(1e-3, 0.1, True))  # Polyak rate of the target critics
    init_alpha: float = traced(1.0, check=POSITIVE)
    target_entropy_scale: float = traced(1.0, pbt=(0.1, 2.0, False))  # target entropy = −scale · |A|
    reward_scale: float = traced(1.0, pbt=(0.01, 100.0, True))
    max_grad_norm: float = traced(1e10, check=POSITIVE, pbt=(0.05, 10.0, True))  # effectively off


class Actor(nn.Module):
    """``obs → (mean, log_std)`` of the pre-tanh Gaussian; log std bounded to
    ``[log_std_min, log_std_max]`` by a scaled tanh."""

    action_dim: int
    hidden_sizes: Sequence[int] = (256, 256)
    activation: str = "relu"
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    torso: nn.Module | None = None  # [..., obs] → [..., features]; default an MLP of hidden_sizes
    perf: bool = False  # jaxrl.perf: the XLA:CPU product in its layers

    @nn.compact
    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        if self.torso is None:
            x = MLP(self.hidden_sizes, self.activation, perf=self.perf)(obs)
        else:
            x = with_perf(self.torso, self.perf).clone(parent=self, name="actor_torso")(obs)
        mean = dense(self.action_dim, 0.01, perf=self.perf)(x)
        raw = dense(self.action_dim, 0.01, perf=self.perf)(x)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (jnp.tanh(raw) + 1.0)
        return mean, log_std


@struct.dataclass
class SACState:
    """Everything one seed carries between updates."""

    actor_params: Any
    critic_params: Any
    target_params: Any  # Polyak average of critic_params
    log_alpha: jax.Array  # float32 []
    actor_opt: Any
    critic_opt: Any
    alpha_opt: Any
    buffer: buffers.ReplayBuffer
    obs_stats: normalize.RunningStats
    env_state: Any  # [N]
    obs: jax.Array  # [N, *obs]
    key: jax.Array


class StepMetrics(NamedTuple):
    critic_loss: jax.Array
    actor_loss: jax.Array
    alpha_loss: jax.Array
    alpha: jax.Array
    entropy: jax.Array  # −E[log π(a|s)]
    q: jax.Array  # mean Q(s, a) of the batch
    grad_norm: jax.Array  # critic gradient norm
    clipped: jax.Array  # categorical critics: target mass outside [v_min, v_max] (0 with scalar ones)


class UpdateMetrics(NamedTuple):
    loop: LoopMetrics  # episodes completed in the update, and whether it was finite
    loss: jax.Array  # critic loss
    actor_loss: jax.Array
    alpha_loss: jax.Array
    alpha: jax.Array
    entropy: jax.Array
    q: jax.Array
    grad_norm: jax.Array
    lr: jax.Array
    clipped: jax.Array  # categorical critics: target mass outside [v_min, v_max] (0 with scalar ones)


SCALAR = ValueHead()  # one value per critic


def _policy(actor: Actor, params: Any, obs: jax.Array, space: Box) -> TanhGaussian:
    mean, log_std = actor.apply(params, obs)
    # the stored/critic action lives in [-1, 1]; the env's bounds are applied when stepping
    return TanhGaussian(mean, log_std, -jnp.ones(space.shape), jnp.ones(space.shape))


def _sample(dist: TanhGaussian, key: jax.Array | None, noise: jax.Array | None) -> tuple[jax.Array, ...]:
    return dist.sample_and_log_prob(key) if noise is None else dist.from_noise(noise)


def critic_loss(
    critic_params: Any,
    target_params: Any,
    actor_params: Any,
    log_alpha: jax.Array,
    batch: Transition,
    key: jax.Array | None,
    hp: Any,
    actor: Actor,
    critic: TwinCritic,
    space: Box,
    *,
    noise: jax.Array | None = None,
    head: ValueHead = SCALAR,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """``½ Σ_i E[(Q_i(s, a) − y)²]`` with the soft, time-limit-aware target
    ``y = r·scale + γ (1 − terminated) (min_i Q̄_i(s', a') − α log π(a'|s'))``;
    ``a' ~ π(·|s')`` from ``key``, or from its standard-normal ``noise`` ``[B, d]``.
    With a categorical ``head``: ``Σ_i E[CE(target, p_i(s, a))]``, the target the
    projection of ``r·scale + γ' (z − α log π(a'|s'))`` under the twin target
    distribution with the smaller mean. Returns ``(loss, (mean Q, clipped share))``.
    For n-step windows (leaves ``[B, n]``) ``r`` is the discounted sum up to the
    window's first episode end ``m``, ``γ`` is ``γᵐ⁺¹`` and ``s'`` that step's next
    observation (:func:`jaxrl.algos.replay.bootstrap_terms`)."""
    next_obs = replay.bootstrap_obs(batch)
    obs, action = replay.acted(batch)
    next_policy = _policy(actor, actor_params, next_obs, space)
    next_action, next_logp, _ = _sample(next_policy, key, noise)
    alpha = jnp.exp(log_alpha)
    next_out = critic.apply(target_params, next_obs, next_action)
    if head.kind == "categorical":
        picked = smaller_twin(head, next_out)
        ret, discount = replay.bootstrap_terms(batch, hp.gamma, hp.reward_scale)
        ret = ret - discount * alpha * next_logp
        target = jax.lax.stop_gradient(head.target(ret, discount, picked))
        logits = critic.apply(critic_params, obs, action)
        loss = head.loss(logits[0], target) + head.loss(logits[1], target)
        return loss, (jnp.mean(head.q(logits)), jax.lax.stop_gradient(head.clipped(ret, discount, picked)))
    next_q = jnp.min(next_out, axis=0)
    ret, discount = replay.bootstrap_terms(batch, hp.gamma, hp.reward_scale)
    target = jax.lax.stop_gradient(ret + discount * (next_q - alpha * next_logp))
    q = critic.apply(critic_params, obs, action)
    loss = 0.5 * jnp.sum(jnp.mean(jnp.square(q - target), axis=-1))
    return loss, (jnp.mean(q), jnp.zeros(()))


def actor_loss(
    actor_params: Any,
    critic_params: Any,
    log_alpha: jax.Array,
    obs: jax.Array,
    key: jax.Array | None,
    actor: Actor,
    critic: TwinCritic,
    space: Box,
    *,
    noise: jax.Array | None = None,
    head: ValueHead = SCALAR,
) -> tuple[jax.Array, jax.Array]:
    """``E[α log π(ã|s) − min_i Q_i(s, ã)]`` (categorical critics: their means),
    ``ã`` reparameterized (from ``key``, or from its standard-normal ``noise``
    ``[B, d]``); returns ``(loss, log π)``."""
    action, logp, _ = _sample(_policy(actor, actor_params, obs, space), key, noise)
    q = jnp.min(head.q(critic.apply(critic_params, obs, action)), axis=0)
    alpha = jax.lax.stop_gradient(jnp.exp(log_alpha))
    return jnp.mean(alpha * logp - q), logp


def alpha_loss(log_alpha: jax.Array, logp: jax.Array, target_entropy: jax.Array) -> jax.Array:
    """``−E[log α · (log π + H̄)]``: raises α when the entropy is below the target ``H̄``."""
    return -jnp.mean(log_alpha * jax.lax.stop_gradient(logp + target_entropy))


def gradient_step(
    state: SACState,
    batch: Transition,
    key: jax.Array | None,
    hp: Any,
    actor: Actor,
    critic: TwinCritic,
    space: Box,
    *,
    noise: jax.Array | None = None,
    optimizer: optim.Optimizer | None = None,
    head: ValueHead = SCALAR,
    actor_step: Any = True,
) -> tuple[SACState, StepMetrics]:
    """Critics, then actor and temperature, then the target critics (``τ``).
    The actor and the critics take a step of ``optimizer`` (default: clip +
    Adam, :mod:`jaxrl.rl.optim`); the temperature always takes Adam's.

    The two policy samples (the critic target's ``a'`` and the actor loss's
    ``ã``) come from ``key``, or from their standard-normal ``noise``
    ``[2, B, d]`` when given (``key`` is then unused and may be ``None``).
    ``actor_step``: a traced bool, false for a critic-only step (``policy_delay``;
    the actor's and temperature's losses and the entropy are then 0).
    """
    if noise is None:
        key_critic, key_actor = jax.random.split(key)
        noise_critic = noise_actor = None
    else:
        key_critic = key_actor = None
        noise_critic, noise_actor = noise[0], noise[1]
    (c_loss, (q_mean, clipped)), c_grads = jax.value_and_grad(critic_loss, has_aux=True)(
        state.critic_params,
        state.target_params,
        state.actor_params,
        state.log_alpha,
        batch,
        key_critic,
        hp,
        actor,
        critic,
        space,
        noise=noise_critic,
        head=head,
    )
    critic_params, critic_opt, grad_norm = optim.apply(
        state.critic_params, c_grads, state.critic_opt, hp.lr, hp.max_grad_norm, optimizer=optimizer
    )

    def actor_and_temperature(held: tuple) -> tuple:
        actor_params, actor_opt, log_alpha, alpha_opt = held
        (a_loss, logp), a_grads = jax.value_and_grad(actor_loss, has_aux=True)(
            actor_params,
            critic_params,
            log_alpha,
            replay.acted(batch)[0],
            key_actor,
            actor,
            critic,
            space,
            noise=noise_actor,
            head=head,
        )
        actor_params, actor_opt, _ = optim.apply(
            actor_params, a_grads, actor_opt, hp.lr, hp.max_grad_norm, optimizer=optimizer
        )
        target_entropy = -hp.target_entropy_scale * float(np.prod(space.shape))
        al_loss, al_grad = jax.value_and_grad(alpha_loss)(log_alpha, logp, target_entropy)
        log_alpha, alpha_opt, _ = optim.apply(log_alpha, al_grad, alpha_opt, hp.alpha_lr, jnp.float32(1e10))
        return (actor_params, actor_opt, log_alpha, alpha_opt), (a_loss, al_loss, logp)

    def critic_only(held: tuple) -> tuple:
        zero = jnp.zeros((), jnp.float32)
        return held, (zero, zero, jnp.zeros(batch.reward.shape[:1], jnp.float32))

    held = (state.actor_params, state.actor_opt, state.log_alpha, state.alpha_opt)
    if actor_step is True:
        done, (a_loss, al_loss, logp) = actor_and_temperature(held)
    else:
        done, (a_loss, al_loss, logp) = jax.lax.cond(actor_step, actor_and_temperature, critic_only, held)
    actor_params, actor_opt, log_alpha, alpha_opt = done
    target_params = jax.tree.map(lambda t, c: (1.0 - hp.tau) * t + hp.tau * c, state.target_params, critic_params)
    new_state = state.replace(
        actor_params=actor_params,
        critic_params=critic_params,
        target_params=target_params,
        log_alpha=log_alpha,
        actor_opt=actor_opt,
        critic_opt=critic_opt,
        alpha_opt=alpha_opt,
    )
    metrics = StepMetrics(c_loss, a_loss, al_loss, jnp.exp(log_alpha), -jnp.mean(logp), q_mean, grad_norm, clipped)
    return new_state, metrics


# ---------------------------------------------------------------------------
# The agent
# ---------------------------------------------------------------------------


def make_agent(
    algo: SACConfig,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: nn.Module | None = None,
    optimizer: optim.Spec = None,
    perf: bool = False,
) -> Agent:
    """SAC for ``num_envs`` copies of a continuous-action ``env``. ``network``: a
    flax torso used by the actor (on the observation) and each critic (on
    ``[obs, action]``), instead of ``algo.network``'s; ``optimizer``: the
    actor's and critics' (:mod:`jaxrl.rl.optim`); ``perf``: :mod:`jaxrl.perf`'s switch, resolved."""
    space = env.action_space
    if not isinstance(space, Box):
        raise TypeError(f"SAC needs continuous actions; {env.name} has {space}")
    env_params = env.default_params if env_params is None else env_params
    dim = int(np.prod(space.shape))
    actor_torso = critic_torso = network
    if network is None and algo.network != "mlp":
        flat_obs = int(np.prod(env.obs_shape))
        actor_torso = make_torso(algo.network, algo, env.obs_shape)
        critic_torso = make_torso(algo.network, algo, (flat_obs + dim,))
    actor = Actor(dim, tuple(algo.hidden_sizes), algo.activation, algo.log_std_min, algo.log_std_max, actor_torso, perf)
    critic, head = twin_critic(algo, critic_torso, perf)
    optimizer = optim.make(optimizer, weight_decay=algo.weight_decay)
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    grad_steps = replay.gradient_steps(algo, num_envs)
    warmup = replay.warmup_per_env(algo.learning_starts, num_envs)  # env steps per env
    windows = algo.n_step > 1  # items record episode ends; updates sample n-step windows

    def to_env(action: jax.Array) -> jax.Array:
        return scale_action(action, low, high)

    def prep(state: SACState, obs: jax.Array) -> jax.Array:
        return normalize.normalize(state.obs_stats, obs) if algo.normalize_obs else obs

    def env_steps(state: SACState, steps: int, random: bool) -> tuple[SACState, replay.Steps]:
        """``steps`` steps of every env and their ``steps · N`` transitions in step
        order (:func:`jaxrl.algos.replay.collect`); the action noise of all steps
        is drawn up front in one call."""
        key, key_act, key_env = jax.random.split(state.key, 3)
        if random:
            draws = jax.random.uniform(key_act, (steps, num_envs, dim), minval=-1.0, maxval=1.0)
        else:
            draws = jax.random.normal(key_act, (steps, num_envs, dim))

        def policy(obs: jax.Array, draw: jax.Array) -> tuple[jax.Array, jax.Array]:
            if random:
                return draw, to_env(draw)
            action, _, _ = _policy(actor, state.actor_params, prep(state, obs), space).from_noise(draw)
            return action, to_env(action)

        def item(obs: jax.Array, action: jax.Array, out: Any) -> Transition | replay.WindowTransition:
            if windows:
                done = jnp.logical_or(out.terminated, out.truncated)
                return replay.WindowTransition(obs, action, out.reward, out.terminated, out.final_obs, done)
            return Transition(obs, action, out.reward, out.terminated, out.final_obs)

        env_state, obs, collected = replay.collect(
            env, env_params, state.env_state, state.obs, key_env, draws, policy, item, perf
        )
        return state.replace(env_state=env_state, obs=obs, key=key), collected

    def store(state: SACState, steps: replay.Steps) -> SACState:
        """The transitions into the buffer, their observations into the normalizer."""
        buffer, items = replay.cut_windows(state.buffer, steps.items, steps.cut if windows else None)
        state = state.replace(buffer=buffers.add(buffer, items))
        if algo.normalize_obs:
            state = state.replace(obs_stats=normalize.update(state.obs_stats, steps.seen_obs))
        return state

    def init(key: jax.Array, hp: HParams) -> SACState:
        key_params, key_env, key = jax.random.split(key, 3)
        dummy_obs = jnp.zeros((1,) + env.obs_shape, jnp.float32)
        if perf:
            actor_params, critic_params = init_many(
                key_params, (actor, dummy_obs), (critic, dummy_obs, jnp.zeros((1, dim)))
            )
        else:  # each module's own init
            key_actor, key_critic = jax.random.split(key_params)
            actor_params = actor.init(key_actor, dummy_obs)
            critic_params = critic.init(key_critic, dummy_obs, jnp.zeros((1, dim)))
        env_state, obs = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_env, num_envs), env_params)
        example = Transition(obs[0], jnp.zeros((dim,)), jnp.zeros(()), jnp.zeros((), bool), obs[0])
        if windows:
            example = replay.WindowTransition(*example, jnp.zeros((), bool))
        log_alpha = jnp.log(hp.init_alpha).astype(jnp.float32)
        state = SACState(
            actor_params=actor_params,
            critic_params=critic_params,
            target_params=critic_params,
            log_alpha=log_alpha,
            actor_opt=optimizer.init(actor_params),
            critic_opt=optimizer.init(critic_params),
            alpha_opt=optim.init(log_alpha),
            buffer=buffers.init(example, replay.capacity(algo, num_envs)),
            obs_stats=normalize.init(env.obs_shape),
            env_state=env_state,
            obs=obs,
            key=key,
        )
        if warmup and env.steps_in_program:  # host envs: the actors' first steps are the warm-up
            state = store(*env_steps(state, warmup, random=True))
        return state

    def collect(state: SACState, hp: HParams, update_idx: jax.Array) -> tuple[SACState, replay.Steps]:
        """``num_steps`` steps of every env with actions sampled from the policy."""
        return env_steps(state, algo.num_steps, random=False)

    def learn(
        state: SACState, batch: replay.Steps, hp: HParams, update_idx: jax.Array
    ) -> tuple[SACState, UpdateMetrics]:
        """``batch`` into the buffer, then the update's gradient steps on sampled batches."""
        state = store(state, batch)

        # every gradient step's batch indices and policy noise in one draw each
        # (the buffer does not change while they run)
        key, key_index, key_noise = jax.random.split(state.key, 3)
        index = replay.sample(state.buffer, key_index, (grad_steps, algo.batch_size), algo.n_step, num_envs)
        noise = jax.random.normal(key_noise, (grad_steps, 2, algo.batch_size, dim))

        # policy_delay > 1: the actor and temperature step on every policy_delay-th
        # gradient step of the run (counted across updates), the critics on each
        delay = algo.policy_delay
        actor_steps = (update_idx * grad_steps + jnp.arange(grad_steps)) % delay == 0 if delay > 1 else None

        def step(state, inputs):
            index, noise, *acting = inputs
            sampled = buffers.take(state.buffer, index)
            if algo.normalize_obs:
                sampled = sampled._replace(obs=prep(state, sampled.obs), next_obs=prep(state, sampled.next_obs))
            return gradient_step(
                state,
                sampled,
                None,
                hp,
                actor,
                critic,
                space,
                noise=noise,
                optimizer=optimizer,
                head=head,
                actor_step=acting[0] if acting else True,
            )

        scanned = (index, noise) if actor_steps is None else (index, noise, actor_steps)
        state, m = jax.lax.scan(step, state.replace(key=key), scanned)
        if actor_steps is None:
            m = jax.tree.map(jnp.mean, m)
        else:  # the actor's figures over its own steps (0 in an update without one)
            weight = actor_steps.astype(jnp.float32) / jnp.maximum(jnp.sum(actor_steps), 1)
            over_actor = {"actor_loss", "alpha_loss", "entropy"}
            m = StepMetrics(*(jnp.sum(v * weight) if k in over_actor else jnp.mean(v) for k, v in m._asdict().items()))
        finite = (
            jnp.isfinite(m.critic_loss)
            & jnp.isfinite(m.actor_loss)
            & optim.tree_all_finite((state.actor_params, state.critic_params, state.log_alpha))
        )
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, finite),
            loss=m.critic_loss,
            actor_loss=m.actor_loss,
            alpha_loss=m.alpha_loss,
            alpha=m.alpha,
            entropy=m.entropy,
            q=m.q,
            grad_norm=m.grad_norm,
            lr=hp.lr,
            clipped=m.clipped,
        )
        return state, metrics

    def act(state: SACState, obs: jax.Array, key: jax.Array) -> jax.Array:
        del key
        return to_env(_policy(actor, state.actor_params, prep(state, obs), space).mode())

    def sample(state: SACState, obs: jax.Array, key: jax.Array) -> jax.Array:
        action, _, _ = _policy(actor, state.actor_params, prep(state, obs), space).sample_and_log_prob(key)
        return to_env(action)

    def acting(state: SACState, hp: HParams, update_idx: jax.Array) -> replay.Acting:
        """The actors' part of ``state``: the policy, the normalizer and whether the
        buffer still lacks the warm-up (``algo.learning_starts``)."""
        zero = jnp.zeros((), jnp.float32)
        return replay.Acting(state.actor_params, state.obs_stats, state.buffer.size < warmup * num_envs, zero, zero)

    def behave(view: replay.Acting, obs: jax.Array, key: jax.Array) -> tuple[jax.Array, Behaviour]:
        """An actor's step outside the program (:mod:`jaxrl.actors`): uniform actions in
        ``[-1, 1]`` during the warm-up, the policy's sample after it; the stored action
        is the one in ``[-1, 1]``, the env gets it scaled to its bounds."""
        key_uniform, key_policy = jax.random.split(key)
        uniform = jax.random.uniform(key_uniform, obs.shape[:1] + (dim,), minval=-1.0, maxval=1.0)
        x = normalize.normalize(view.obs_stats, obs) if algo.normalize_obs else obs
        sampled, _, _ = _policy(actor, view.actor_params, x, space).sample_and_log_prob(key_policy)
        action = jnp.where(view.random, uniform, sampled)
        return to_env(action), Behaviour(action, jnp.zeros(obs.shape[:1], jnp.float32))

    def warm(
        state: SACState, batch: replay.Steps, hp: HParams, update_idx: jax.Array
    ) -> tuple[SACState, UpdateMetrics]:
        """An update of the warm-up on host envs: ``batch`` into the buffer, no gradient step
        (losses 0, the temperature as it stands)."""
        del update_idx
        state = store(state, batch)
        zero = jnp.zeros((), jnp.float32)
        finite = jnp.ones((), bool)
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, finite),
            loss=zero,
            actor_loss=zero,
            alpha_loss=zero,
            alpha=jnp.exp(state.log_alpha),
            entropy=zero,
            q=zero,
            grad_norm=zero,
            lr=hp.lr,
            clipped=zero,
        )
        return state, metrics

    phases = (
        (
            "collect: env step + policy sampling + buffer write",
            lambda s, hp: store(*env_steps(s, algo.num_steps, False)),
        ),
    )
    return Agent(
        init,
        collect,
        learn,
        act,
        sample,
        (actor, critic),
        num_envs * algo.num_steps,
        warmup * num_envs,
        phases=phases,
        behave=behave,
        complete=lambda state, steps: replay.from_actors(steps, windows=windows),
        acting=acting,
        warm=warm,
    )


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """SAC's checks beyond each field's own (buffer, warm-up, log-std bounds)."""
    algo = config.algo
    replay.validate_replay(config, 256, 100000)
    replay.validate_n_step(config)
    check_network(algo)
    check_mlp(algo, "[256,256]")
    validate_critic(algo)
    if not algo.log_std_min < algo.log_std_max:
        raise ConfigError(
            "algo.log_std_min",
            algo.log_std_min,
            f"must be < algo.log_std_max={algo.log_std_max}",
            "pass algo.log_std_min=-5",
        )


ALGORITHM = Algorithm(
    name="sac",
    config=SACConfig,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="Soft Actor-Critic: twin critics, Polyak targets, automatic temperature, on-device replay",
    actions=("continuous",),
    warmup=replay.warmup,
    presets=load_presets("sac"),
    validate=validate,
)
