"""REINFORCE: Monte-Carlo policy gradient, with an optional learned baseline.

Williams (1992), "Simple statistical gradient-following algorithms for
connectionist reinforcement learning", Machine Learning 8; the state-value
baseline as in Sutton & Barto (2018), §13.4. Each update starts a fresh
episode in each of the ``N`` envs and runs ``T = algo.num_steps`` steps; only
every env's first episode counts, so each gradient is an average over
complete episodes (the returns of later, unfinished ones would bias it
toward short episodes). With ``G_t`` the discounted return from ``t`` to the
end of that episode::

    ∇J ≈ E[∇ log π(a_t|s_t) · (G_t − b(s_t))],   b = V (baseline=true) or 0

trained by one gradient step per update on ``−E[log π · (G − b)] + c_V · ½ E[(V − G)²]
− c_H E[H]`` over the counted steps. A time-limit truncation bootstraps
``G`` from ``V(final_obs)`` and an episode still running at step ``T`` from
``V(s_T)`` — with a baseline only; without one both count as ends (choose
``T`` ≥ the env's time limit so that every first episode ends inside the
rollout). Returns are GAE with ``λ = 1`` (:func:`jaxrl.gae`), i.e. ``G − b``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.algos.actor_critic import (
    ADAM_EPS,
    ActorCriticState,
    Rollout,
    acting,
    log_prob,
    make_behaviour,
    make_parts,
    policy_and_value,
    prepare_obs,
    rollout,
    validate_network,
)
from jaxrl.algos.onpolicy import scan_method, scheduled_lr
from jaxrl.algos.presets import load_presets
from jaxrl.core.checks import NON_NEGATIVE, POSITIVE, UNIT, check_rollout, require_one_of
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, LoopMetrics, own_metrics
from jaxrl.core.fields import HParams, traced
from jaxrl.envs.core import Env
from jaxrl.rl import normalize, optim
from jaxrl.rl.advantages import gae

__all__ = ["ReinforceConfig", "HParams", "UpdateMetrics", "first_episode", "reinforce_loss", "make_agent", "ALGORITHM"]


@dataclass(frozen=True)
class ReinforceConfig:
    """REINFORCE (Williams, 1992) with an optional state-value baseline."""

    name: str = "reinforce"
    # --- static ---------------------------------------------------------------
    num_steps: int = 500  # T: steps per env and update; every env's first episode counts
    baseline: bool = True  # learn V and subtract it (also bootstraps truncations)
    network: str = "auto"  # torso by name: auto (mlp; cnn for image obs) | mlp | cnn | registered
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    lr_schedule: str = "constant"  # constant | linear (anneal to 0)
    normalize_advantages: bool = True  # over the counted steps of the update
    normalize_obs: bool = False
    squash: str = "tanh"  # continuous actions: tanh | clip
    log_std_init: float = 0.0
    gae_method: str = "auto"  # auto | associative | scan (the λ = 1 return computation)
    # --- traced -----------------------------------------------------------------
    lr: float = traced(1e-3, check=POSITIVE, pbt=(1e-5, 1e-1, True))
    gamma: float = traced(0.99, check=UNIT, pbt=(0.9, 0.9999, False))
    vf_coef: float = traced(0.5, check=NON_NEGATIVE, pbt=(0.05, 2.0, True))
    ent_coef: float = traced(0.0, check=NON_NEGATIVE, pbt=(0.0, 0.1, False))
    max_grad_norm: float = traced(1.0, check=POSITIVE, pbt=(0.05, 10.0, True))
    reward_scale: float = traced(1.0, pbt=(0.01, 100.0, True))


class Batch(NamedTuple):
    """Learner input, flattened to ``[B]`` with ``B = T · N``."""

    obs: jax.Array  # [B, *obs] (normalized if normalize_obs)
    action: jax.Array  # [B] or [B, d]: the stored action
    advantage: jax.Array  # [B] G − b (normalized over the counted steps if asked)
    target: jax.Array  # [B] the return G
    weight: jax.Array  # [B] 1 on the counted steps (each env's first episode), else 0


class LossMetrics(NamedTuple):
    total: jax.Array
    policy: jax.Array
    value: jax.Array
    entropy: jax.Array


class UpdateMetrics(NamedTuple):
    """Per-update metrics of one member (scalars)."""

    loop: LoopMetrics  # episodes completed in the update, and whether it was finite
    loss: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    grad_norm: jax.Array
    lr: jax.Array
    counted_fraction: jax.Array  # share of the rollout's steps in the first episodes


def first_episode(done: jax.Array) -> jax.Array:
    """bool ``[T, N]``: the steps of each env's first episode in a rollout that
    starts at an episode start (up to and including its last step)."""
    done_i = done.astype(jnp.int32)
    return (jnp.cumsum(done_i, axis=0) - done_i) == 0


def reinforce_loss(
    log_prob: jax.Array, entropy: jax.Array, value: jax.Array, batch: Batch, hp: Any, *, baseline: bool = True
) -> tuple[jax.Array, LossMetrics]:
    """``−E_w[log π · Â] + c_V · ½ E_w[(V − G)²] − c_H E_w[H]``, means over the
    counted steps (weights ``batch.weight``)."""
    w = batch.weight
    count = jnp.maximum(jnp.sum(w), 1.0)
    policy_loss = -jnp.sum(w * log_prob * jax.lax.stop_gradient(batch.advantage)) / count
    value_loss = 0.5 * jnp.sum(w * jnp.square(value - batch.target)) / count if baseline else jnp.zeros(())
    entropy = jnp.sum(w * entropy) / count
    total = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    return total, LossMetrics(total, policy_loss, value_loss, entropy)


def _loss(params: Any, network: Any, batch: Batch, hp: Any, baseline: bool):
    dist, value, batch = policy_and_value(network, params, batch)
    return reinforce_loss(log_prob(dist, batch.action), dist.entropy(), value, batch, hp, baseline=baseline)


def make_agent(
    algo: ReinforceConfig,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: Any = None,
    optimizer: optim.Spec = None,
    perf: bool = False,
) -> Agent:
    """REINFORCE for ``num_envs`` parallel copies of ``env``. ``network``, ``optimizer`` and ``perf``: as :func:`jaxrl.algos.ppo.make_agent`'s."""
    network, optimizer, env_params, act, sample, init = make_parts(
        algo, env, num_envs, env_params, network, optimizer, perf
    )
    reset = jax.vmap(env.reset, in_axes=(0, None))

    def collect(state: ActorCriticState, hp: HParams, update_idx: jax.Array) -> tuple[ActorCriticState, Rollout]:
        """A fresh episode in every env, then ``num_steps`` steps."""
        key, key_reset = jax.random.split(state.key)
        env_state, obs = reset(jax.random.split(key_reset, num_envs), env_params)  # fresh episodes
        state, traj = rollout(state.replace(env_state=env_state, obs=obs, key=key), env, env_params, network, algo)
        return state, Rollout(traj)

    def learn(
        state: ActorCriticState, batch: Rollout, hp: HParams, update_idx: jax.Array
    ) -> tuple[ActorCriticState, UpdateMetrics]:
        """One gradient step over each env's first episode of the rollout."""
        traj = batch.steps
        done = jnp.logical_or(traj.terminated, traj.truncated)
        counted = first_episode(done)
        zeros = jnp.zeros_like(traj.value)
        value, next_value = (traj.value, traj.next_value) if algo.baseline else (zeros, zeros)
        rewards = traj.reward * hp.reward_scale
        method = scan_method(algo.gae_method)
        advantage = gae(rewards, value, next_value, traj.terminated, done, hp.gamma, jnp.float32(1.0), method=method)
        target = advantage + value
        weight = counted.astype(jnp.float32)
        if algo.normalize_advantages:
            count = jnp.maximum(jnp.sum(weight), 1.0)
            mean = jnp.sum(weight * advantage) / count
            std = jnp.sqrt(jnp.sum(weight * jnp.square(advantage - mean)) / count)
            advantage = (advantage - mean) / (std + 1e-8)
        flat = Batch(prepare_obs(state, traj.obs, algo), traj.action, advantage, target, weight)
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), flat)
        lr = scheduled_lr(algo.lr_schedule, hp.lr, update_idx, num_updates)
        grad_fn = jax.value_and_grad(_loss, has_aux=True)
        (_, loss), grads = grad_fn(state.params, network, flat, hp, algo.baseline)
        params, opt_state, grad_norm = optim.apply(
            state.params, grads, state.opt_state, lr, hp.max_grad_norm, ADAM_EPS, optimizer
        )
        obs_stats = state.obs_stats
        if algo.normalize_obs:
            obs_stats = normalize.update(obs_stats, traj.obs)
        finite = jnp.isfinite(loss.total) & jnp.isfinite(grad_norm) & optim.tree_all_finite(params)
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(done, traj.episode_return, traj.episode_length, finite),
            loss=loss.total,
            policy_loss=loss.policy,
            value_loss=loss.value,
            entropy=loss.entropy,
            grad_norm=grad_norm,
            lr=jnp.asarray(lr, jnp.float32),
            counted_fraction=jnp.mean(weight),
        )
        return state.replace(params=params, opt_state=opt_state, obs_stats=obs_stats), metrics

    behave, complete = make_behaviour(network, env, algo)  # host envs: the learner values the baseline itself
    return Agent(
        init,
        collect,
        learn,
        act,
        sample,
        network,
        num_envs * algo.num_steps,
        behave=behave,
        complete=complete,
        acting=acting,
        fresh_episodes=True,  # the actors start every trajectory with fresh episodes, as collect does
    )


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """REINFORCE's checks beyond each field's own."""
    algo = config.algo
    check_rollout(config, 500)
    validate_network(algo)
    require_one_of("algo.lr_schedule", algo.lr_schedule, ("constant", "linear"), "constant")


ALGORITHM = Algorithm(
    name="reinforce",
    config=ReinforceConfig,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="REINFORCE: Monte-Carlo policy gradient over complete episodes, optional value baseline",
    presets=load_presets("reinforce"),
    validate=validate,
)
