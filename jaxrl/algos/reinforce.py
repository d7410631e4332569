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
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from jaxrl.algos import ppo
from jaxrl.core.checks import check_non_negative, check_positive, check_rollout, require_one_of, require_unit_interval
from jaxrl.core.config import PBT_BOUNDS, Config
from jaxrl.core.contract import Agent, Algorithm, own_metrics
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
    lr: float = 1e-3
    gamma: float = 0.99
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    max_grad_norm: float = 1.0
    reward_scale: float = 1.0

    TRACED: ClassVar[tuple[str, ...]] = ("lr", "gamma", "vf_coef", "ent_coef", "max_grad_norm", "reward_scale")


@struct.dataclass
class HParams:
    """Traced REINFORCE hyperparameters (float32 scalars; add a leading axis to vmap)."""

    lr: jax.Array
    gamma: jax.Array
    vf_coef: jax.Array
    ent_coef: jax.Array
    max_grad_norm: jax.Array
    reward_scale: jax.Array

    @classmethod
    def from_config(cls, algo: ReinforceConfig) -> HParams:
        return cls(**{k: jnp.asarray(getattr(algo, k), jnp.float32) for k in ReinforceConfig.TRACED})


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

    episode_return_sum: jax.Array
    episode_length_sum: jax.Array
    episodes: jax.Array
    finite: jax.Array
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
    log_prob: jax.Array, entropy: jax.Array, value: jax.Array, batch: Batch, hp: HParams, *, baseline: bool = True
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


def _loss(params: Any, network: Any, batch: Batch, hp: HParams, baseline: bool):
    policy_out, value = network.apply(params, batch.obs)
    dist = ppo.distribution(network, params, policy_out)
    return reinforce_loss(ppo.log_prob(dist, batch.action), dist.entropy(), value, batch, hp, baseline=baseline)


def make_agent(
    algo: ReinforceConfig,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: Any = None,
    optimizer: optim.Spec = None,
    perf: bool = True,
) -> Agent:
    """REINFORCE for ``num_envs`` parallel copies of ``env``. ``network``, ``optimizer`` and ``perf``: as :func:`jaxrl.algos.ppo.make_agent`'s."""
    network = ppo.make_network(algo, env, network, perf)
    optimizer = optim.make(optimizer, ppo.ADAM_EPS)
    env_params = env.default_params if env_params is None else env_params
    act, sample = ppo.make_policy(network, env, algo)
    reset = jax.vmap(env.reset, in_axes=(0, None))

    def init(key: jax.Array, hp: HParams) -> ppo.PPOState:
        return ppo.init_state(key, hp, env, env_params, network, num_envs, optimizer)

    def update(state: ppo.PPOState, hp: HParams, update_idx: jax.Array) -> tuple[ppo.PPOState, UpdateMetrics]:
        key, key_reset = jax.random.split(state.key)
        env_state, obs = reset(jax.random.split(key_reset, num_envs), env_params)  # fresh episodes
        state, traj = ppo.rollout(state.replace(env_state=env_state, obs=obs, key=key), env, env_params, network, algo)
        done = jnp.logical_or(traj.terminated, traj.truncated)
        counted = first_episode(done)
        zeros = jnp.zeros_like(traj.value)
        value, next_value = (traj.value, traj.next_value) if algo.baseline else (zeros, zeros)
        rewards = traj.reward * hp.reward_scale
        method = ppo.gae_method(algo)
        advantage = gae(rewards, value, next_value, traj.terminated, done, hp.gamma, jnp.float32(1.0), method=method)
        target = advantage + value
        weight = counted.astype(jnp.float32)
        if algo.normalize_advantages:
            count = jnp.maximum(jnp.sum(weight), 1.0)
            mean = jnp.sum(weight * advantage) / count
            std = jnp.sqrt(jnp.sum(weight * jnp.square(advantage - mean)) / count)
            advantage = (advantage - mean) / (std + 1e-8)
        batch = Batch(ppo.prepare_obs(state, traj.obs, algo), traj.action, advantage, target, weight)
        batch = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), batch)
        if algo.lr_schedule == "linear":
            lr = hp.lr * (1.0 - update_idx.astype(jnp.float32) / num_updates)
        else:
            lr = hp.lr
        grad_fn = jax.value_and_grad(_loss, has_aux=True)
        (_, loss), grads = grad_fn(state.params, network, batch, hp, algo.baseline)
        params, opt_state, grad_norm = optim.apply(
            state.params, grads, state.opt_state, lr, hp.max_grad_norm, ppo.ADAM_EPS, optimizer
        )
        obs_stats = state.obs_stats
        if algo.normalize_obs:
            obs_stats = normalize.update(obs_stats, traj.obs)
        done_f = done.astype(jnp.float32)
        metrics = UpdateMetrics(
            episode_return_sum=jnp.sum(traj.episode_return * done_f),
            episode_length_sum=jnp.sum(traj.episode_length * done_f),
            episodes=jnp.sum(done.astype(jnp.int32)),
            finite=jnp.isfinite(loss.total) & jnp.isfinite(grad_norm) & optim.tree_all_finite(params),
            loss=loss.total,
            policy_loss=loss.policy,
            value_loss=loss.value,
            entropy=loss.entropy,
            grad_norm=grad_norm,
            lr=jnp.asarray(lr, jnp.float32),
            counted_fraction=jnp.mean(weight),
        )
        return state.replace(params=params, opt_state=opt_state, obs_stats=obs_stats), metrics

    return Agent(init, update, act, sample, network, num_envs * algo.num_steps)


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------

PRESETS: dict[str, dict[str, Any]] = {
    # CartPole: see the lineage table (docs/algorithms.md) (python experiments/lineage.py).
    "CartPole-v1": {
        "num_envs": 16,
        "total_timesteps": 1_000_000,
        "num_evals": 10,
        "algo.num_steps": 500,
        "algo.lr": 3e-3,
    },
}


def validate(config: Config) -> None:
    """REINFORCE's checks beyond the common ones."""
    algo = config.algo
    check_rollout(config, 500)
    ppo.validate_network(algo)
    require_one_of("algo.lr_schedule", algo.lr_schedule, ("constant", "linear"), "constant")
    require_unit_interval("algo.gamma", algo.gamma, 0.99)
    check_positive(algo, "lr", "max_grad_norm")
    check_non_negative(algo, "vf_coef", "ent_coef")


ALGORITHM = Algorithm(
    name="reinforce",
    config=ReinforceConfig,
    hparams=HParams,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="REINFORCE: Monte-Carlo policy gradient over complete episodes, optional value baseline",
    presets=PRESETS,
    validate=validate,
    pbt_bounds={k: PBT_BOUNDS[k] for k in ("lr", "ent_coef", "gamma", "vf_coef", "max_grad_norm", "reward_scale")},
)
