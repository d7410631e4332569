"""Proximal Policy Optimization (Schulman et al., 2017, arXiv:1707.06347).

Pure pieces, importable on their own:

* :func:`loss_from_outputs` — the clipped-surrogate / value / entropy loss on
  plain arrays (hand-checkable);
* :func:`ppo_loss` — the same from network parameters and a :class:`Batch`;
* :func:`sgd_step` — one minibatch step: gradient, global-norm clipping, Adam,
  learning-rate scaling, KL-adaptive learning rate;
* :func:`sgd_epochs` — ``update_epochs × num_minibatches`` SGD steps on a batch;
* :func:`make_agent` — ``collect`` (the rollout of
  :func:`jaxrl.algos.actor_critic.rollout`, behaviour log-probs and values
  recorded at collection), ``learn`` (from a :class:`Rollout`, whoever collected
  it: GAE, then the epochs) and ``act`` for :func:`jaxrl.make_train`.

The float hyperparameters are the config's :func:`~jaxrl.core.fields.traced`
fields, passed to the program as an :class:`HParams` pytree (vmappable); shapes
and flags are the static fields of :class:`PPOConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl import perf as perf_lib
from jaxrl.algos.actor_critic import (
    ADAM_EPS,
    ActorCriticState,
    Batch,
    Rollout,
    SequenceBatch,
    Transition,
    acting,
    advantages,
    collect,
    log_prob,
    make_behaviour,
    make_parts,
    policy_and_value,
    rollout,
    validate_network,
)
from jaxrl.algos.onpolicy import StepResult, explained_variance, run_epochs, scheduled_lr
from jaxrl.algos.presets import load_presets
from jaxrl.core.checks import NON_NEGATIVE, POSITIVE, POSITIVE_INT, UNIT, check_rollout, divisor_near, require_one_of
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, LoopMetrics, own_metrics
from jaxrl.core.errors import ConfigError
from jaxrl.core.fields import HParams, setting, traced
from jaxrl.envs.core import Env
from jaxrl.nets.networks import ActorCritic, is_recurrent
from jaxrl.rl import normalize, optim

__all__ = [
    "PPOConfig",
    "HParams",
    "Transition",
    "Rollout",
    "Batch",
    "SequenceBatch",
    "LossMetrics",
    "UpdateMetrics",
    "loss_from_outputs",
    "ppo_loss",
    "sgd_step",
    "sgd_epochs",
    "sgd_epochs_sequences",
    "make_agent",
    "ALGORITHM",
]


@dataclass(frozen=True)
class PPOConfig:
    """Proximal Policy Optimization (Schulman et al., 2017, arXiv:1707.06347)."""

    name: str = "ppo"
    # --- static: shapes, counts, flags -----------------------------------
    num_steps: int = setting(128, check=POSITIVE_INT)  # rollout length T per env per update
    update_epochs: int = setting(4, check=POSITIVE_INT)
    num_minibatches: int = setting(4, check=POSITIVE_INT)
    network: str = "auto"  # torso by name: auto (mlp; cnn for image obs) | mlp | cnn | gru | lru | registered
    hidden_sizes: tuple[int, ...] = (64, 64)
    conv_channels: tuple[int, ...] = (16,)  # cnn (and the encoder of gru/lru on image obs): filters per conv layer
    conv_kernels: tuple[int, ...] = (3,)  # square kernel size per conv layer
    conv_strides: tuple[int, ...] = (1,)  # stride per conv layer
    rnn_size: int = 128  # gru / lru: recurrent units (the carry width; lru's carry holds 2 × rnn_size)
    activation: str = "tanh"  # tanh | relu | elu | gelu | silu
    shared_torso: bool = False  # one torso for actor and critic
    lr_schedule: str = "linear"  # constant | linear (anneal to 0) | adaptive (KL)
    clip_value: bool = True  # PPO2-style clipped value loss
    normalize_advantages: bool = True  # per minibatch
    normalize_obs: bool = False  # running mean/std, per seed
    normalize_reward: bool = False  # divide rewards by the running std of the discounted return
    normalize_value: bool = False  # critic learns normalized value targets (rl_games normalize_value)
    squash: str = "tanh"  # continuous actions: tanh (tanh-Gaussian, ratios on the pre-tanh sample) | clip
    log_std_init: float = 0.0  # continuous actions: initial state-independent log std
    gae_method: str = "auto"  # auto | associative | scan
    # --- traced: float hyperparameters (vmappable; pbt: the bounds PBT evolves them in) ---
    lr: float = traced(2.5e-4, check=POSITIVE, pbt=(1e-5, 1e-1, True))  # Adam step size (schedules start here)
    gamma: float = traced(0.99, check=UNIT, pbt=(0.9, 0.9999, False))  # discount γ
    gae_lambda: float = traced(0.95, check=UNIT, pbt=(0.8, 1.0, False))  # GAE λ
    clip_eps: float = traced(0.2, check=POSITIVE, pbt=(0.05, 0.5, False))  # ratio clip ε (also the value clip)
    vf_coef: float = traced(0.5, check=NON_NEGATIVE, pbt=(0.05, 2.0, True))  # value-loss weight
    ent_coef: float = traced(0.01, check=NON_NEGATIVE, pbt=(0.0, 0.1, False))  # entropy-bonus weight
    max_grad_norm: float = traced(0.5, check=POSITIVE, pbt=(0.05, 10.0, True))  # global-norm gradient clip
    target_kl: float = traced(0.01)  # KL target of lr_schedule=adaptive
    min_lr: float = traced(1e-6)  # lr bounds of lr_schedule=adaptive
    max_lr: float = traced(1e-2)
    reward_scale: float = traced(1.0, pbt=(0.01, 100.0, True))  # rewards × this before GAE (brax's reward_scaling)


class LossMetrics(NamedTuple):
    total: jax.Array
    policy: jax.Array
    value: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array  # E[(r − 1) − log r], Schulman's low-variance estimator
    clip_frac: jax.Array  # fraction of samples with |r − 1| > ε


class UpdateMetrics(NamedTuple):
    """Per-update metrics of one seed (scalars)."""

    loop: LoopMetrics  # episodes completed in the update, and whether it was finite
    loss: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array
    clip_frac: jax.Array
    explained_variance: jax.Array
    grad_norm: jax.Array
    lr: jax.Array


# ---------------------------------------------------------------------------
# Loss and optimization
# ---------------------------------------------------------------------------


def loss_from_outputs(
    log_prob: jax.Array,
    entropy: jax.Array,
    value: jax.Array,
    batch: Batch,
    hp: Any,
    *,
    clip_value: bool = True,
    normalize_advantages: bool = True,
) -> tuple[jax.Array, LossMetrics]:
    """PPO loss from the current policy's outputs on a minibatch ``[B]``.

    ::

        r = exp(log π(a|s) − log π_old(a|s)),   Â = (A − mean A) / (std A + 1e-8)
        L_π = −E[min(r Â, clip(r, 1−ε, 1+ε) Â)]
        L_V = ½ E[max((V − G)², (V_old + clip(V − V_old, ±ε) − G)²)]   (clip_value)
        L   = L_π + c_V L_V − c_H E[H(π)]
    """
    advantage = batch.advantage
    if normalize_advantages:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    log_ratio = log_prob - batch.log_prob
    ratio = jnp.exp(log_ratio)
    surrogate = ratio * advantage
    clipped = jnp.clip(ratio, 1.0 - hp.clip_eps, 1.0 + hp.clip_eps) * advantage

    value_error = jnp.square(value - batch.target)
    if clip_value:
        value_clipped = batch.value + jnp.clip(value - batch.value, -hp.clip_eps, hp.clip_eps)
        value_error = jnp.maximum(value_error, jnp.square(value_clipped - batch.target))

    # All five means in one reduction over a [5, B] stack (one fused loop
    # instead of five: on CPU each small reduction costs mostly dispatch).
    per_sample = jnp.stack(
        [
            -jnp.minimum(surrogate, clipped),
            0.5 * value_error,
            jnp.broadcast_to(entropy, value_error.shape),
            jax.lax.stop_gradient((ratio - 1.0) - log_ratio),
            jax.lax.stop_gradient((jnp.abs(ratio - 1.0) > hp.clip_eps).astype(value_error.dtype)),
        ]
    )
    policy_loss, value_loss, entropy, approx_kl, clip_frac = jnp.mean(per_sample.reshape(5, -1), axis=-1)
    total = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    metrics = LossMetrics(
        total=total,
        policy=policy_loss,
        value=value_loss,
        entropy=entropy,
        approx_kl=approx_kl,
        clip_frac=clip_frac,
    )
    return total, metrics


def ppo_loss(
    params: Any,
    network: ActorCritic,
    batch: Batch,
    hp: Any,
    *,
    clip_value: bool = True,
    normalize_advantages: bool = True,
) -> tuple[jax.Array, LossMetrics]:
    """:func:`loss_from_outputs` after a forward pass of ``network`` on ``batch.obs``
    (a :class:`SequenceBatch`: the recurrent torso's sequence pass from its carry)."""
    dist, value, batch = policy_and_value(network, params, batch)
    return loss_from_outputs(
        log_prob(dist, batch.action),
        dist.entropy(),
        value,
        batch,
        hp,
        clip_value=clip_value,
        normalize_advantages=normalize_advantages,
    )


def sgd_step(
    params: Any,
    opt_state: Any,
    lr: jax.Array,
    batch: Batch,
    hp: Any,
    network: ActorCritic,
    algo: Any,
    *,
    advantages_normalized: bool = False,
    optimizer: optim.Optimizer | None = None,
) -> StepResult:
    """One minibatch step: ∇L, then ``optimizer`` (default: global-norm clip,
    Adam, ``params −= lr · update``; :mod:`jaxrl.rl.optim`).

    ``advantages_normalized``: ``batch.advantage`` is already normalized per
    minibatch (what :func:`sgd_epochs` does for all minibatches at once), so the
    loss does not normalize it again even under ``algo.normalize_advantages``.

    With ``algo.lr_schedule == "adaptive"`` the returned ``lr`` follows the
    rl_games rule on this minibatch's approximate KL: ``÷1.5`` above
    ``2·target_kl``, ``×1.5`` below ``target_kl/2``, kept in ``[min_lr, max_lr]``.
    """
    grad_fn = jax.value_and_grad(ppo_loss, has_aux=True)
    (_, metrics), grads = grad_fn(
        params,
        network,
        batch,
        hp,
        clip_value=algo.clip_value,
        normalize_advantages=algo.normalize_advantages and not advantages_normalized,
    )
    params, opt_state, grad_norm = optim.apply(params, grads, opt_state, lr, hp.max_grad_norm, ADAM_EPS, optimizer)
    if algo.lr_schedule == "adaptive":
        kl = metrics.approx_kl
        lr = jnp.where(kl > 2.0 * hp.target_kl, lr / 1.5, lr)
        lr = jnp.where(kl < 0.5 * hp.target_kl, lr * 1.5, lr)
        lr = jnp.clip(lr, hp.min_lr, hp.max_lr)
    return StepResult(params, opt_state, lr, metrics, grad_norm)


def sgd_epochs(
    params: Any,
    opt_state: Any,
    lr: jax.Array,
    batch: Batch,
    key: jax.Array,
    hp: Any,
    network: ActorCritic,
    algo: Any,
    optimizer: optim.Optimizer | None = None,
) -> StepResult:
    """``update_epochs`` passes over ``batch`` (``[B, ...]``), each shuffled into
    ``num_minibatches`` minibatches, each one :func:`sgd_step` of ``optimizer``.
    Metrics are means over all steps. A :class:`SequenceBatch` (recurrent
    policies) is split over envs instead: :func:`sgd_epochs_sequences`."""
    if isinstance(batch, SequenceBatch):
        return sgd_epochs_sequences(params, opt_state, lr, batch, key, hp, network, algo, optimizer)
    size = batch.advantage.shape[0]
    n_mb = algo.num_minibatches

    def minibatches(key_perm):
        rows = perf_lib.permutation(network.perf, key_perm, size).reshape(n_mb, size // n_mb)  # [n_mb, mb]
        adv = jnp.take(batch.advantage, rows, axis=0)
        if algo.normalize_advantages:  # per minibatch, for all of them in one pass
            mean = adv.mean(axis=1, keepdims=True)
            std = jnp.sqrt(jnp.mean(jnp.square(adv - mean), axis=1, keepdims=True))
            adv = (adv - mean) / (std + 1e-8)
        return rows, adv

    def step(params, opt_state, lr, xs):
        mb_rows, mb_adv = xs
        # The minibatch's rows are gathered here, inside its step, rather
        # than as a shuffled copy of every batch leaf per epoch: the same
        # values, and the one-seed program ran 4–6 % faster
        # (experiments/PERFORMANCE_LOG.md, round 10).
        mb = jax.tree.map(lambda x: jnp.take(x, mb_rows, axis=0), batch._replace(advantage=None))
        mb = mb._replace(advantage=mb_adv)
        return sgd_step(params, opt_state, lr, mb, hp, network, algo, advantages_normalized=True, optimizer=optimizer)

    return run_epochs(params, opt_state, lr, key, algo, minibatches, step, LossMetrics)


def sgd_epochs_sequences(
    params: Any,
    opt_state: Any,
    lr: jax.Array,
    batch: SequenceBatch,
    key: jax.Array,
    hp: Any,
    network: Any,
    algo: Any,
    optimizer: optim.Optimizer | None = None,
) -> StepResult:
    """:func:`sgd_epochs` for a recurrent policy: each epoch shuffles the ``N`` envs
    into ``num_minibatches`` minibatches of whole sequences ``[T, N / n_mb]``
    (with their start carries and resets), so every gradient runs the torso
    over time from the carry the rollout started with (backpropagation through
    the rollout). Advantages are normalized per minibatch in the loss."""
    num_envs = batch.carry.shape[0]
    n_mb = algo.num_minibatches

    def minibatches(key_perm):
        return perf_lib.permutation(network.perf, key_perm, num_envs).reshape(n_mb, num_envs // n_mb)

    def step(params, opt_state, lr, mb_cols):
        mb = SequenceBatch(
            jax.tree.map(lambda x: jnp.take(x, mb_cols, axis=1), batch.batch),
            jnp.take(batch.carry, mb_cols, axis=0),
            jnp.take(batch.reset, mb_cols, axis=1),
        )
        return sgd_step(params, opt_state, lr, mb, hp, network, algo, optimizer=optimizer)

    return run_epochs(params, opt_state, lr, key, algo, minibatches, step, LossMetrics)


# ---------------------------------------------------------------------------
# The agent used by the training loop
# ---------------------------------------------------------------------------


def make_agent(
    algo: PPOConfig,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: nn.Module | None = None,
    optimizer: optim.Spec = None,
    perf: bool = False,
) -> Agent:
    """PPO for ``num_envs`` parallel copies of ``env`` and a known update budget
    (``num_updates`` sets the linear learning-rate annealing). ``network``: a
    flax torso ``[..., *obs] → [..., features]`` instead of ``algo.network``'s;
    ``optimizer``: see :mod:`jaxrl.rl.optim`; ``perf``: :mod:`jaxrl.perf`'s
    XLA:CPU kernels (``make_train`` resolves ``perf=auto``; off by default)."""
    network, optimizer, env_params, act, sample, init = make_parts(
        algo, env, num_envs, env_params, network, optimizer, perf
    )

    def collect_step(state: ActorCriticState, hp: HParams, update_idx: jax.Array) -> tuple[ActorCriticState, Rollout]:
        return collect(state, env, env_params, network, algo)

    def learn(
        state: ActorCriticState, batch: Rollout, hp: HParams, update_idx: jax.Array
    ) -> tuple[ActorCriticState, UpdateMetrics]:
        traj = batch.steps
        prepared = advantages(state, batch, hp, network, algo)
        lr = scheduled_lr(algo.lr_schedule, hp.lr, update_idx, num_updates, state.lr)
        key, key_learn = jax.random.split(state.key)
        out = sgd_epochs(state.params, state.opt_state, lr, prepared.batch, key_learn, hp, network, algo, optimizer)
        obs_stats = state.obs_stats
        if algo.normalize_obs:
            obs_stats = normalize.update(obs_stats, traj.obs)
        new_state = state.replace(
            params=out.params,
            opt_state=out.opt_state,
            lr=out.lr if algo.lr_schedule == "adaptive" else state.lr,
            obs_stats=obs_stats,
            return_stats=prepared.return_stats,
            discounted_return=prepared.discounted,
            value_stats=prepared.value_stats,
            key=key,
        )
        finite = jnp.isfinite(out.metrics.total) & jnp.isfinite(out.grad_norm) & optim.tree_all_finite(out.params)
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(prepared.done, traj.episode_return, traj.episode_length, finite),
            loss=out.metrics.total,
            policy_loss=out.metrics.policy,
            value_loss=out.metrics.value,
            entropy=out.metrics.entropy,
            approx_kl=out.metrics.approx_kl,
            clip_frac=out.metrics.clip_frac,
            explained_variance=explained_variance(traj.value, prepared.targets),
            grad_norm=out.grad_norm,
            lr=jnp.asarray(lr, jnp.float32),
        )
        return new_state, metrics

    phases = (
        (
            "rollout: env step + policy forward + sampling",
            lambda state, hp: rollout(state, env, env_params, network, algo),
        ),
        (
            "advantages: final-obs values, normalization, GAE, batch",
            lambda state, hp: advantages(*collect(state, env, env_params, network, algo), hp, network, algo),
        ),
    )
    init_carry = None
    if getattr(network, "recurrent", False):

        def init_carry(state: ActorCriticState, batch_shape: tuple[int, ...]) -> jax.Array:
            return network.initialize_carry(tuple(batch_shape))

    behave, complete = make_behaviour(network, env, algo)  # host envs (recurrent: with the carry)
    return Agent(
        init,
        collect_step,
        learn,
        act,
        sample,
        network,
        num_envs * algo.num_steps,
        phases=phases,
        init_carry=init_carry,
        behave=behave,
        complete=complete,
        acting=acting,
    )


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """PPO's checks beyond each field's own: the batch splits into minibatches
    (of whole env sequences for a recurrent policy), the schedule, the KL bounds."""
    algo = config.algo
    batch = check_rollout(config, 128)
    validate_network(algo, recurrent=True)
    if is_recurrent(algo.network) and config.num_envs % algo.num_minibatches:
        raise ConfigError(
            "algo.num_minibatches",
            algo.num_minibatches,
            f"must divide num_envs={config.num_envs}: a recurrent policy learns from minibatches of whole env sequences",
            f"pass a divisor of {config.num_envs}, e.g. algo.num_minibatches={divisor_near(config.num_envs, algo.num_minibatches)}",
        )
    require_one_of("algo.lr_schedule", algo.lr_schedule, ("constant", "linear", "adaptive"), "linear")
    if batch % algo.num_minibatches:
        raise ConfigError(
            "algo.num_minibatches",
            algo.num_minibatches,
            f"must divide the batch num_envs × algo.num_steps = {config.num_envs} × {algo.num_steps} = {batch}",
            f"pass a divisor of {batch}, e.g. algo.num_minibatches={divisor_near(batch, algo.num_minibatches)}",
        )
    if algo.lr_schedule == "adaptive":
        POSITIVE("algo.target_kl", algo.target_kl, PPOConfig.target_kl)
        if not 0 < float(algo.min_lr) <= float(algo.max_lr):
            raise ConfigError(
                "algo.min_lr", algo.min_lr, f"must satisfy 0 < min_lr ≤ max_lr={algo.max_lr}", "pass algo.min_lr=1e-6"
            )


ALGORITHM = Algorithm(
    name="ppo",
    config=PPOConfig,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="Proximal Policy Optimization: clipped surrogate, GAE, epochs × minibatches",
    env_fields=("env_state", "obs", "discounted_return", "carry"),
    own_fields=("env_state", "obs", "key", "carry"),
    data_parallel=True,
    presets=load_presets("ppo"),
    validate=validate,
)
