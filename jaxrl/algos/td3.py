"""Twin Delayed DDPG (TD3; Fujimoto et al., 2018, "Addressing Function
Approximation Error in Actor-Critic Methods", arXiv:1802.09477) with the
replay learners' on-device buffer and random-action warm-up
(:mod:`jaxrl.algos.replay`).

Twin critics regress ``y = r + γ (1 − terminated) min_i Q̄_i(s', ã')`` with the
smoothed target action ``ã' = clip(μ̄(s') + clip(σ̃ ε, −c, c), −1, 1)``; the
deterministic actor ascends ``Q_1(s, μ(s))`` and the targets (actor and critics)
move by Polyak ``τ`` once every ``policy_delay`` critic steps. Exploration adds
``N(0, σ²)`` to ``μ(s)``. Actions live in ``[−1, 1]`` and are scaled to the env's
bounds when stepping; a truncated transition bootstraps from its pre-reset next
observation.

Pure pieces: :func:`td3_targets`, :func:`critic_step`, :func:`actor_step`,
:func:`make_agent`.
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
from jaxrl.algos.qvalue import ValueHead, critic_head, smaller_twin, twin_critic, validate_critic
from jaxrl.algos.replay import Transition, scale_action
from jaxrl.core.checks import NON_NEGATIVE, OPEN_UNIT, POSITIVE, POSITIVE_INT, UNIT, Range, check_mlp, require_one_of
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, Behaviour, LoopMetrics, own_metrics
from jaxrl.core.errors import ConfigError
from jaxrl.core.fields import HParams, setting, traced
from jaxrl.envs.core import Box, Env
from jaxrl.nets.networks import MLP, TwinCritic, check_network, dense, init_many, make_torso, with_perf
from jaxrl.rl import buffers, normalize, optim

__all__ = [
    "TD3Config",
    "HParams",
    "TD3State",
    "Actor",
    "correlated_noise",
    "td3_targets",
    "categorical_td3_targets",
    "critic_head",
    "critic_step",
    "actor_step",
    "make_agent",
    "ALGORITHM",
]


@dataclass(frozen=True)
class TD3Config:
    """TD3 (Fujimoto et al., 2018, arXiv:1802.09477): twin critics, delayed actor
    and target updates, target-policy smoothing, Gaussian exploration noise."""

    name: str = "td3"
    # --- static ---------------------------------------------------------------
    num_steps: int = 1  # env steps per env per update
    utd: float = 1.0  # critic steps per env step (all envs of a member)
    batch_size: int = 256
    buffer_size: int = 100_000
    learning_starts: int = 1000  # random-action env steps per member before learning
    # n-step returns: each critic target sums n consecutive rewards of one env (stopping
    # where its episode ends) before bootstrapping, γⁿ Q̄ at the n-th next observation
    n_step: int = setting(1, check=POSITIVE_INT)
    policy_delay: int = setting(2, check=POSITIVE_INT)  # critic steps per actor (and target) step
    network: str = "mlp"  # torso by name (jaxrl.nets.register_torso adds one)
    hidden_sizes: tuple[int, ...] = (256, 256)
    activation: str = "relu"
    normalize_obs: bool = False
    # scalar | categorical: each critic's return distribution on ``atoms`` points from
    # v_min to v_max, learned by cross-entropy to the projected target (C51's; FastTD3's critic)
    critic: str = "scalar"
    atoms: int = setting(101, check=Range(2, integer=True))
    v_min: float = -250.0
    v_max: float = 250.0
    critic_hidden_sizes: tuple[int, ...] = ()  # the critics' MLP widths (empty: algo.hidden_sizes)
    norm: str = "none"  # layer_norm | none: a LayerNorm before each activation of the critics' MLPs
    weight_decay: float = setting(0.0, check=NON_NEGATIVE)  # > 0: AdamW (decoupled decay) for actor and critics
    # fixed: every env explores with σ = exploration_noise | per_env: each env draws its own σ
    # uniformly from [noise_min, exploration_noise] at each of its episode starts (FastTD3's)
    noise_scales: str = "fixed"
    noise_min: float = setting(0.001, check=NON_NEGATIVE)  # per_env: the smallest σ an env draws
    # --- traced ---------------------------------------------------------------
    lr: float = traced(3e-4, check=POSITIVE, pbt=(1e-5, 1e-1, True))  # actor and critics
    gamma: float = traced(0.99, check=UNIT, pbt=(0.9, 0.9999, False))
    tau: float = traced(0.005, check=OPEN_UNIT, pbt=(1e-3, 0.1, True))
    # σ of the behaviour noise, in [−1, 1] action units
    exploration_noise: float = traced(0.1, check=NON_NEGATIVE, pbt=(0.01, 1.0, True))
    # ρ of each env's AR(1) behaviour noise n_t = ρ n_{t−1} + √(1 − ρ²) ε_t (stationary
    # std 1, scaled by σ); 0: white Gaussian noise; near 1: sustained pushes
    noise_correlation: float = traced(
        0.0, check=Range(0.0, 1.0, hi_open=True, note="0: white noise"), pbt=(0.0, 0.99, False)
    )
    target_noise: float = traced(0.2, check=NON_NEGATIVE, pbt=(0.01, 1.0, True))  # σ̃ of the target-policy smoothing
    noise_clip: float = traced(0.5, check=NON_NEGATIVE)  # c
    max_grad_norm: float = traced(1e10, check=POSITIVE, pbt=(0.05, 10.0, True))  # effectively off
    reward_scale: float = traced(1.0, pbt=(0.01, 100.0, True))


class Actor(nn.Module):
    """Deterministic policy ``obs → tanh(head(torso(obs)))`` in ``[−1, 1]^d``."""

    action_dim: int
    hidden_sizes: Sequence[int] = (256, 256)
    activation: str = "relu"
    torso: nn.Module | None = None
    perf: bool = False

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        if self.torso is None:
            x = MLP(self.hidden_sizes, self.activation, perf=self.perf)(obs)
        else:
            x = with_perf(self.torso, self.perf).clone(parent=self, name="actor_torso")(obs)
        return jnp.tanh(dense(self.action_dim, 0.01, perf=self.perf)(x))


@struct.dataclass
class TD3State:
    actor_params: Any
    critic_params: Any
    target_actor_params: Any
    target_critic_params: Any
    actor_opt: Any
    critic_opt: Any
    buffer: buffers.ReplayBuffer
    obs_stats: normalize.RunningStats
    env_state: Any  # [N]
    obs: jax.Array  # [N, *obs]
    key: jax.Array
    critic_steps: jax.Array  # int32 []
    exploration_noise: jax.Array  # float32 [] σ of the last collection (``sample`` uses it); per_env: [N]
    noise: jax.Array  # [N, d] each env's last behaviour-noise value n_t (AR(1), unit variance)


class UpdateMetrics(NamedTuple):
    loop: LoopMetrics  # episodes completed in the update, and whether it was finite
    loss: jax.Array  # critic loss
    actor_loss: jax.Array  # of the update's actor steps
    q: jax.Array
    grad_norm: jax.Array  # critic gradient norm
    lr: jax.Array
    clipped: jax.Array  # categorical critic: target mass outside [v_min, v_max] (0 with the scalar one)


SCALAR = ValueHead()  # one value per critic


def correlated_noise(last: jax.Array, white: jax.Array, rho: jax.Array) -> jax.Array:
    """AR(1) noise ``n_t = ρ n_{t−1} + √(1 − ρ²) ε_t`` over ``T`` steps.

    ``last`` ``[N, d]`` is ``n_0`` (each env's value from the previous collection,
    zeros at the start), ``white`` ``[T, N, d]`` the standard-normal ``ε``. Returns
    ``n_1..n_T`` ``[T, N, d]``: unit variance once stationary, correlation ``ρ^k``
    at lag ``k`` (``ρ = 0``: ``white`` itself, bit for bit). Each env's process runs
    on across its episode boundaries.
    """
    scale = jnp.sqrt(1.0 - rho * rho)

    def step(n, eps):
        n = rho * n + scale * eps
        return n, n

    return jax.lax.scan(step, last, white, unroll=white.shape[0] <= 8)[1]


def td3_targets(
    batch: Transition,
    next_action_mean: jax.Array,
    noise: jax.Array,
    target_critic: Any,
    hp: Any,
) -> jax.Array:
    """Critic targets ``[B]``: the target actor's ``next_action_mean`` ``[B, d]``
    smoothed by ``clip(σ̃ · noise, −c, c)`` (``noise`` standard normal ``[B, d]``),
    clipped to ``[−1, 1]``; ``target_critic(next_obs, action) -> [2, B]`` the twin
    target critics; ``y = r·scale + γ (1 − terminated) min_i Q̄_i``. For n-step
    windows (leaves ``[B, n]``, :func:`jaxrl.algos.replay.bootstrap_terms`) ``r`` is
    the discounted sum up to the window's first episode end ``m``, ``γ`` is ``γᵐ⁺¹``
    and the bootstrap is at that step's next observation."""
    smoothing = jnp.clip(hp.target_noise * noise, -hp.noise_clip, hp.noise_clip)
    next_action = jnp.clip(next_action_mean + smoothing, -1.0, 1.0)
    next_q = jnp.min(target_critic(replay.bootstrap_obs(batch), next_action), axis=0)
    ret, discount = replay.bootstrap_terms(batch, hp.gamma, hp.reward_scale)
    return ret + discount * next_q


def categorical_td3_targets(
    batch: Transition,
    next_action_mean: jax.Array,
    noise: jax.Array,
    target_critic: Any,
    hp: Any,
    head: ValueHead,
) -> tuple[jax.Array, jax.Array]:
    """The categorical critics' target ``[B, atoms]`` (FastTD3's clipped double Q in
    distribution form): of the twin target critics' distributions at the smoothed
    target action (as :func:`td3_targets`), the one whose mean is the smaller,
    projected as C51's onto the support after ``r·scale + γ (1 − terminated) z``
    (:func:`jaxrl.rl.distributional.categorical_target`). Also the share of that
    distribution's mass the projection clipped ``[]``."""
    smoothing = jnp.clip(hp.target_noise * noise, -hp.noise_clip, hp.noise_clip)
    next_action = jnp.clip(next_action_mean + smoothing, -1.0, 1.0)
    picked = smaller_twin(head, target_critic(replay.bootstrap_obs(batch), next_action))  # [B, atoms]
    ret, discount = replay.bootstrap_terms(batch, hp.gamma, hp.reward_scale)
    return head.target(ret, discount, picked), head.clipped(ret, discount, picked)


def critic_step(
    state: TD3State,
    batch: Transition,
    noise: jax.Array,
    hp: Any,
    actor: Actor,
    critic: TwinCritic,
    optimizer: optim.Optimizer | None = None,
    head: ValueHead = SCALAR,
) -> tuple[TD3State, tuple[jax.Array, jax.Array, jax.Array, jax.Array]]:
    """One critic step: ``½ Σ_i E[(Q_i(s, a) − y)²]`` to :func:`td3_targets`, or
    with a categorical ``head`` ``Σ_i E[CE(target, p_i(s, a))]`` to
    :func:`categorical_td3_targets`. Returns ``(state, (loss, mean Q, grad norm,
    clipped share))``. ``batch``: transitions ``[B]`` or n-step windows ``[B, n]``."""
    next_mean = actor.apply(state.target_actor_params, replay.bootstrap_obs(batch))
    obs, action = replay.acted(batch)

    def target_critic(o, a):
        return critic.apply(state.target_critic_params, o, a)

    if head.kind == "categorical":
        target, clipped = categorical_td3_targets(batch, next_mean, noise, target_critic, hp, head)
        target = jax.lax.stop_gradient(target)

        def loss_fn(params):
            logits = critic.apply(params, obs, action)  # [2, B, atoms]
            return head.loss(logits[0], target) + head.loss(logits[1], target), jnp.mean(head.q(logits))

    else:
        target = jax.lax.stop_gradient(td3_targets(batch, next_mean, noise, target_critic, hp))
        clipped = jnp.zeros(())

        def loss_fn(params):
            q = critic.apply(params, obs, action)
            return 0.5 * jnp.sum(jnp.mean(jnp.square(q - target), axis=-1)), jnp.mean(q)

    (loss, q), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.critic_params)
    params, opt, grad_norm = optim.apply(
        state.critic_params, grads, state.critic_opt, hp.lr, hp.max_grad_norm, optimizer=optimizer
    )
    state = state.replace(critic_params=params, critic_opt=opt, critic_steps=state.critic_steps + 1)
    return state, (loss, q, grad_norm, clipped)


def actor_step(
    state: TD3State,
    obs: jax.Array,
    hp: Any,
    actor: Actor,
    critic: TwinCritic,
    optimizer: optim.Optimizer | None = None,
    head: ValueHead = SCALAR,
) -> tuple[TD3State, jax.Array]:
    """The delayed step: the actor ascends ``E[Q_1(s, μ(s))]`` (a categorical
    critic's: its distribution's mean), then the target actor and critics move
    by ``τ``. Returns ``(state, actor loss)``."""

    def loss_fn(params):
        return -jnp.mean(head.q(critic.apply(state.critic_params, obs, actor.apply(params, obs))[0]))

    loss, grads = jax.value_and_grad(loss_fn)(state.actor_params)
    params, opt, _ = optim.apply(
        state.actor_params, grads, state.actor_opt, hp.lr, hp.max_grad_norm, optimizer=optimizer
    )

    def polyak(target, online):
        return jax.tree.map(lambda t, p: (1.0 - hp.tau) * t + hp.tau * p, target, online)

    state = state.replace(
        actor_params=params,
        actor_opt=opt,
        target_actor_params=polyak(state.target_actor_params, params),
        target_critic_params=polyak(state.target_critic_params, state.critic_params),
    )
    return state, loss


def make_agent(
    algo: TD3Config,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: nn.Module | None = None,
    optimizer: optim.Spec = None,
    perf: bool = False,
    grouped: bool | None = None,
) -> Agent:
    """TD3 for ``num_envs`` copies of a continuous-action ``env``. ``network``: a
    flax torso for the actor (on the observation) and each critic (on ``[obs,
    action]``); ``optimizer``: :mod:`jaxrl.rl.optim`; ``perf``: resolved.

    ``grouped`` (default: when an update's critic steps are a multiple of
    ``policy_delay``): run each update's steps as groups of ``policy_delay`` critic
    steps and one actor step; otherwise every critic step computes the actor step
    too and keeps it only at multiples of ``policy_delay`` (the same numbers)."""
    space = env.action_space
    if not isinstance(space, Box):
        raise TypeError(f"TD3 needs continuous actions; {env.name} has {space}")
    env_params = env.default_params if env_params is None else env_params
    dim = int(np.prod(space.shape))
    actor_torso = critic_torso = network
    if network is None and algo.network != "mlp":
        actor_torso = make_torso(algo.network, algo, env.obs_shape)
        critic_torso = make_torso(algo.network, algo, (int(np.prod(env.obs_shape)) + dim,))
    actor = Actor(dim, tuple(algo.hidden_sizes), algo.activation, actor_torso, perf)
    critic, head = twin_critic(algo, critic_torso, perf)
    optimizer = optim.make(optimizer, weight_decay=algo.weight_decay)
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    grad_steps = replay.gradient_steps(algo, num_envs)
    delay = algo.policy_delay
    per_env = algo.noise_scales == "per_env"
    grouped = grad_steps % delay == 0 if grouped is None else grouped
    if grouped and grad_steps % delay:
        raise ValueError(f"grouped TD3 steps need critic steps per update ({grad_steps}) divisible by {delay}")
    warmup = replay.warmup_per_env(algo.learning_starts, num_envs)
    windows = algo.n_step > 1  # items record episode ends; updates sample n-step windows

    def to_env(action: jax.Array) -> jax.Array:
        return scale_action(action, low, high)

    def prep(state: TD3State, obs: jax.Array) -> jax.Array:
        return normalize.normalize(state.obs_stats, obs) if algo.normalize_obs else obs

    def item(obs: jax.Array, action: jax.Array, out: Any) -> Transition | replay.WindowTransition:
        if windows:
            done = jnp.logical_or(out.terminated, out.truncated)
            return replay.WindowTransition(obs, action, out.reward, out.terminated, out.final_obs, done)
        return Transition(obs, action, out.reward, out.terminated, out.final_obs)

    def env_steps(
        state: TD3State, steps: int, sigma: jax.Array | None, rho: jax.Array | None = None
    ) -> tuple[TD3State, replay.Steps]:
        """``steps`` steps of every env: ``μ(s) + σ n_t`` clipped to
        ``[−1, 1]``, ``n_t`` each env's AR(1) noise of correlation ``rho``
        (:func:`correlated_noise`; ``sigma=None``: uniform random actions, the warm-up)."""
        key, key_act, key_env = jax.random.split(state.key, 3)
        if sigma is None:
            draws = jax.random.uniform(key_act, (steps, num_envs, dim), minval=-1.0, maxval=1.0)
        else:
            draws = correlated_noise(state.noise, jax.random.normal(key_act, (steps, num_envs, dim)), rho)
            state = state.replace(noise=draws[-1])

        def policy(obs: jax.Array, draw: jax.Array) -> tuple[jax.Array, jax.Array]:
            if sigma is None:
                return draw, to_env(draw)
            scale = sigma[:, None] if per_env else sigma  # per_env: each env's own σ [N]
            action = jnp.clip(actor.apply(state.actor_params, prep(state, obs)) + scale * draw, -1.0, 1.0)
            return action, to_env(action)

        env_state, obs, collected = replay.collect(
            env, env_params, state.env_state, state.obs, key_env, draws, policy, item, perf
        )
        return state.replace(env_state=env_state, obs=obs, key=key), collected

    def draw_scales(key: jax.Array, sigma_max: jax.Array) -> jax.Array:
        """Each env's σ, uniform in ``[algo.noise_min, σ_max]`` ``[N]``."""
        return jax.random.uniform(
            key, (num_envs,), minval=algo.noise_min, maxval=jnp.maximum(sigma_max, algo.noise_min)
        )

    def store(state: TD3State, steps: replay.Steps) -> TD3State:
        """The transitions into the buffer, their observations into the normalizer."""
        buffer, items = replay.cut_windows(state.buffer, steps.items, steps.cut if windows else None)
        state = state.replace(buffer=buffers.add(buffer, items))
        if algo.normalize_obs:
            state = state.replace(obs_stats=normalize.update(state.obs_stats, steps.seen_obs))
        return state

    def init(key: jax.Array, hp: HParams) -> TD3State:
        key_params, key_env, key = jax.random.split(key, 3)
        dummy_obs = jnp.zeros((1,) + env.obs_shape, jnp.float32)
        dummy_action = jnp.zeros((1, dim))
        if perf:
            actor_params, critic_params = init_many(key_params, (actor, dummy_obs), (critic, dummy_obs, dummy_action))
        else:
            key_actor, key_critic = jax.random.split(key_params)
            actor_params = actor.init(key_actor, dummy_obs)
            critic_params = critic.init(key_critic, dummy_obs, dummy_action)
        env_state, obs = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_env, num_envs), env_params)
        example = Transition(obs[0], jnp.zeros((dim,)), jnp.zeros(()), jnp.zeros((), bool), obs[0])
        if windows:
            example = replay.WindowTransition(*example, jnp.zeros((), bool))
        state = TD3State(
            actor_params=actor_params,
            critic_params=critic_params,
            target_actor_params=actor_params,
            target_critic_params=critic_params,
            actor_opt=optimizer.init(actor_params),
            critic_opt=optimizer.init(critic_params),
            buffer=buffers.init(example, replay.capacity(algo, num_envs)),
            obs_stats=normalize.init(env.obs_shape),
            env_state=env_state,
            obs=obs,
            key=key,
            critic_steps=jnp.zeros((), jnp.int32),
            exploration_noise=jnp.asarray(hp.exploration_noise, jnp.float32),
            noise=jnp.zeros((num_envs, dim), jnp.float32),
        )
        if per_env:
            key, key_scales = jax.random.split(key)
            state = state.replace(key=key, exploration_noise=draw_scales(key_scales, hp.exploration_noise))
        if warmup and env.steps_in_program:  # host envs: the actors' first steps are the warm-up
            state = store(*env_steps(state, warmup, None))
        return state

    def batch_at(state: TD3State, index: jax.Array) -> Transition:
        batch = buffers.take(state.buffer, index)
        if algo.normalize_obs:
            batch = batch._replace(obs=prep(state, batch.obs), next_obs=prep(state, batch.next_obs))
        return batch

    def collect(state: TD3State, hp: HParams, update_idx: jax.Array) -> tuple[TD3State, replay.Steps]:
        """``num_steps`` steps of every env with the exploration noise of ``hp``
        (per_env: each env's own σ; an env whose episode ended in these steps
        draws a new one for its next)."""
        if per_env:
            state, steps = env_steps(state, algo.num_steps, state.exploration_noise, hp.noise_correlation)
            key, key_scales = jax.random.split(state.key)
            ended = jnp.any(steps.done, axis=0)
            scales = jnp.where(ended, draw_scales(key_scales, hp.exploration_noise), state.exploration_noise)
            return state.replace(key=key, exploration_noise=scales), steps
        return env_steps(
            state.replace(exploration_noise=hp.exploration_noise),
            algo.num_steps,
            hp.exploration_noise,
            hp.noise_correlation,
        )

    def learn(
        state: TD3State, batch: replay.Steps, hp: HParams, update_idx: jax.Array
    ) -> tuple[TD3State, UpdateMetrics]:
        """``batch`` into the buffer, then the update's critic steps and delayed actor steps."""
        state = store(state, batch)
        key, key_index, key_noise = jax.random.split(state.key, 3)
        state = state.replace(key=key)
        index = replay.sample(state.buffer, key_index, (grad_steps, algo.batch_size), algo.n_step, num_envs)
        noise = jax.random.normal(key_noise, (grad_steps, algo.batch_size, dim))

        if grouped:

            def group(state, inputs):
                index, noise = inputs  # [delay, B], [delay, B, d]
                critic_out = []
                for i in range(delay):
                    sampled = batch_at(state, index[i])
                    state, out = critic_step(state, sampled, noise[i], hp, actor, critic, optimizer, head)
                    critic_out.append(out)
                state, actor_loss = actor_step(state, replay.acted(sampled)[0], hp, actor, critic, optimizer, head)
                stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *critic_out)
                return state, (stacked, actor_loss)

            shape = (grad_steps // delay, delay)
            inputs = (index.reshape(shape + index.shape[1:]), noise.reshape(shape + noise.shape[1:]))
            state, ((loss, q, grad_norm, clipped), actor_losses) = jax.lax.scan(group, state, inputs)
            actor_loss = jnp.mean(actor_losses)
        else:

            def one(state, inputs):
                index, noise = inputs
                sampled = batch_at(state, index)
                state, out = critic_step(state, sampled, noise, hp, actor, critic, optimizer, head)
                stepped, actor_loss = actor_step(state, replay.acted(sampled)[0], hp, actor, critic, optimizer, head)
                due = state.critic_steps % delay == 0
                moved = ("actor_params", "actor_opt", "target_actor_params", "target_critic_params")
                state = state.replace(
                    **{
                        f: jax.tree.map(lambda n, o: jnp.where(due, n, o), getattr(stepped, f), getattr(state, f))
                        for f in moved
                    }
                )
                return state, (out, actor_loss, due)

            state, ((loss, q, grad_norm, clipped), actor_losses, due) = jax.lax.scan(one, state, (index, noise))
            count = jnp.sum(due.astype(jnp.float32))
            actor_loss = jnp.where(count > 0, jnp.sum(jnp.where(due, actor_losses, 0.0)) / jnp.maximum(count, 1.0), 0.0)
        loss, q, grad_norm, clipped = jnp.mean(loss), jnp.mean(q), jnp.mean(grad_norm), jnp.mean(clipped)
        finite = (
            jnp.isfinite(loss)
            & jnp.isfinite(actor_loss)
            & optim.tree_all_finite((state.actor_params, state.critic_params))
        )
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, finite),
            loss=loss,
            actor_loss=actor_loss,
            q=q,
            grad_norm=grad_norm,
            lr=hp.lr,
            clipped=clipped,
        )
        return state, metrics

    def act(state: TD3State, obs: jax.Array, key: jax.Array) -> jax.Array:
        del key  # deterministic: no exploration noise
        return to_env(actor.apply(state.actor_params, prep(state, obs)))

    def sample(state: TD3State, obs: jax.Array, key: jax.Array) -> jax.Array:
        """``μ(s)`` plus the exploration noise of the last collection (per_env: the envs' mean σ)."""
        mean = actor.apply(state.actor_params, prep(state, obs))
        noise = jax.random.normal(key, mean.shape)
        return to_env(jnp.clip(mean + jnp.mean(state.exploration_noise) * noise, -1.0, 1.0))

    def acting(state: TD3State, hp: HParams, update_idx: jax.Array) -> replay.Acting:
        """The actors' part of ``state``: the actor, the normalizer, whether the buffer
        still lacks the warm-up (``algo.learning_starts``), and the noise's σ (per_env:
        the largest an env draws) and ρ of ``hp``."""
        warming = state.buffer.size < warmup * num_envs
        sigma = jnp.asarray(hp.exploration_noise, jnp.float32)
        return replay.Acting(state.actor_params, state.obs_stats, warming, sigma, hp.noise_correlation)

    def explore_carry(state: TD3State, batch_shape: tuple[int, ...]) -> jax.Array:
        """Each env's exploration memory at an episode's start ``[*batch_shape, d + 2]``:
        the AR(1) noise value (0, as an in-program run's first step starts from), σ, and
        a flag (1) that makes the first step draw the episode's σ."""
        return jnp.zeros((*batch_shape, dim + 2), jnp.float32).at[..., -1].set(1.0)

    def behave(
        view: replay.Acting, carry: jax.Array, obs: jax.Array, key: jax.Array
    ) -> tuple[jax.Array, jax.Array, Behaviour]:
        """An actor's step outside the program (:mod:`jaxrl.actors`) for ``n`` envs:
        uniform actions in ``[-1, 1]`` during the warm-up (the memory kept for the
        first step after it), ``clip(μ(s) + σ n_t, −1, 1)`` after it, ``n_t`` each env's
        AR(1) noise of correlation ρ (:func:`correlated_noise`) and ``σ`` the run's, or
        with ``noise_scales=per_env`` each env's own, drawn at its episode's first step
        uniformly from ``[noise_min, σ]``. ``carry`` ``[n, d + 2]``
        (:func:`explore_carry`); the stored action is the one in ``[-1, 1]``."""
        key_uniform, key_noise, key_scale = jax.random.split(key, 3)
        n = obs.shape[0]
        uniform = jax.random.uniform(key_uniform, (n, dim), minval=-1.0, maxval=1.0)
        noise = correlated_noise(carry[:, :dim], jax.random.normal(key_noise, (n, dim))[None], view.rho)[0]
        fresh = carry[:, -1] > 0.5
        if per_env:
            drawn = jax.random.uniform(
                key_scale, (n,), minval=algo.noise_min, maxval=jnp.maximum(view.sigma, algo.noise_min)
            )
            sigma = jnp.where(fresh, drawn, carry[:, dim])
        else:
            sigma = jnp.broadcast_to(view.sigma, (n,))
        x = normalize.normalize(view.obs_stats, obs) if algo.normalize_obs else obs
        mean = actor.apply(view.actor_params, x)
        noisy = jnp.clip(mean + sigma[:, None] * noise, -1.0, 1.0)
        action = jnp.where(view.random, uniform, noisy)
        after = jnp.concatenate([noise, sigma[:, None], jnp.zeros((n, 1), jnp.float32)], axis=-1)
        after = jnp.where(view.random, carry, after)
        return after, to_env(action), Behaviour(action, jnp.zeros((n,), jnp.float32))

    def warm(
        state: TD3State, batch: replay.Steps, hp: HParams, update_idx: jax.Array
    ) -> tuple[TD3State, UpdateMetrics]:
        """An update of the warm-up on host envs: ``batch`` into the buffer, no gradient step (losses 0)."""
        del update_idx
        state = store(state, batch)
        zero = jnp.zeros((), jnp.float32)
        loop = LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, jnp.ones((), bool))
        return state, UpdateMetrics(
            loop=loop, loss=zero, actor_loss=zero, q=zero, grad_norm=zero, lr=hp.lr, clipped=zero
        )

    phases = (
        (
            "collect: env step + actor + exploration noise + buffer write",
            lambda state, hp: store(*collect(state, hp, jnp.zeros((), jnp.int32))),
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
        explore_carry=explore_carry,
    )


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """TD3's checks beyond each field's own."""
    algo = config.algo
    replay.validate_replay(config, 256, 100000)
    check_network(algo)
    check_mlp(algo, "[256,256]")
    validate_critic(algo)
    replay.validate_n_step(config)
    require_one_of("algo.noise_scales", algo.noise_scales, ("fixed", "per_env"), "fixed")
    if algo.noise_scales == "per_env" and algo.noise_min > algo.exploration_noise:
        raise ConfigError(
            "algo.noise_min",
            algo.noise_min,
            f"must be at most algo.exploration_noise={algo.exploration_noise} (each env's σ is drawn between them)",
            f"pass algo.noise_min={algo.exploration_noise} or a larger algo.exploration_noise",
        )


ALGORITHM = Algorithm(
    name="td3",
    config=TD3Config,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="TD3: twin critics, delayed actor and target updates, target-policy smoothing, on-device replay",
    actions=("continuous",),
    warmup=replay.warmup,
    env_fields=("env_state", "obs", "noise", "exploration_noise"),  # σ per env with algo.noise_scales=per_env
    own_fields=("env_state", "obs", "key", "noise"),
    presets=load_presets("td3"),
    validate=validate,
)
