"""Synchronous advantage actor-critic (A2C).

Mnih et al. (2016), "Asynchronous Methods for Deep Reinforcement Learning",
arXiv:1602.01783, in the synchronous form of OpenAI Baselines' ``a2c``: ``N``
envs step ``T`` times (``algo.num_steps``, 5 by default), advantages are GAE
(Schulman et al., 2015, arXiv:1506.02438; ``gae_lambda=1`` gives A3C's
n-step returns) with the truncation bootstrap from ``V(final_obs)``, and ONE
gradient step on the whole ``[T·N]`` batch follows each rollout::

    L = −E[log π(a|s) · Â] + c_V · ½ E[(V(s) − G)²] − c_H · E[H(π(·|s))]

It shares PPO's pieces (:mod:`jaxrl.algos.ppo`): the actor-critic network, the
rollout with behaviour values recorded at collection time, the reward /
observation / value normalizers and GAE. The difference is the learner: no
ratio, no clipping, no epochs or minibatches. (PPO's clipped loss at ratio 1
has the same gradient as :func:`a2c_loss`; ``tests/test_lineage.py`` checks it.)
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

__all__ = ["A2CConfig", "HParams", "LossMetrics", "UpdateMetrics", "a2c_loss", "make_agent", "ALGORITHM"]


@dataclass(frozen=True)
class A2CConfig:
    """Synchronous advantage actor-critic (Mnih et al., 2016, arXiv:1602.01783)."""

    name: str = "a2c"
    # --- static ---------------------------------------------------------------
    num_steps: int = 5  # rollout length T per env per update (n of the n-step return)
    network: str = "auto"  # torso by name: auto (mlp; cnn for image obs) | mlp | cnn | registered
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    lr_schedule: str = "linear"  # constant | linear (anneal to 0)
    normalize_advantages: bool = False  # over the whole batch
    normalize_obs: bool = False
    normalize_reward: bool = False
    normalize_value: bool = False
    squash: str = "tanh"  # continuous actions: tanh | clip
    log_std_init: float = 0.0
    gae_method: str = "auto"  # auto | associative | scan
    # --- traced -----------------------------------------------------------------
    lr: float = 7e-4
    gamma: float = 0.99
    gae_lambda: float = 1.0  # 1: n-step returns (A3C); < 1: GAE
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5
    reward_scale: float = 1.0

    TRACED: ClassVar[tuple[str, ...]] = (
        "lr",
        "gamma",
        "gae_lambda",
        "vf_coef",
        "ent_coef",
        "max_grad_norm",
        "reward_scale",
    )


@struct.dataclass
class HParams:
    """Traced A2C hyperparameters (float32 scalars; add a leading axis to vmap)."""

    lr: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    vf_coef: jax.Array
    ent_coef: jax.Array
    max_grad_norm: jax.Array
    reward_scale: jax.Array

    @classmethod
    def from_config(cls, algo: A2CConfig) -> HParams:
        return cls(**{k: jnp.asarray(getattr(algo, k), jnp.float32) for k in A2CConfig.TRACED})


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
    explained_variance: jax.Array
    grad_norm: jax.Array
    lr: jax.Array


def a2c_loss(
    log_prob: jax.Array,
    entropy: jax.Array,
    value: jax.Array,
    batch: ppo.Batch,
    hp: HParams,
    *,
    normalize_advantages: bool = False,
) -> tuple[jax.Array, LossMetrics]:
    """The A2C loss on a batch ``[B]`` from the current policy's outputs.

    ::

        Â = A (or (A − mean A) / (std A + 1e-8))
        L = −E[log π(a|s) · Â] + c_V · ½ E[(V − G)²] − c_H · E[H]
    """
    advantage = batch.advantage
    if normalize_advantages:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    policy_loss = -jnp.mean(log_prob * jax.lax.stop_gradient(advantage))
    value_loss = 0.5 * jnp.mean(jnp.square(value - batch.target))
    entropy = jnp.mean(entropy)
    total = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    return total, LossMetrics(total, policy_loss, value_loss, entropy)


def _loss(params: Any, network: Any, batch: ppo.Batch, hp: HParams, normalize_advantages: bool):
    policy_out, value = network.apply(params, batch.obs)
    dist = ppo.distribution(network, params, policy_out)
    return a2c_loss(
        ppo.log_prob(dist, batch.action), dist.entropy(), value, batch, hp, normalize_advantages=normalize_advantages
    )


def make_agent(
    algo: A2CConfig,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: Any = None,
    optimizer: optim.Spec = None,
    perf: bool = True,
) -> Agent:
    """A2C for ``num_envs`` parallel copies of ``env`` (``num_updates`` sets the
    linear learning-rate annealing). ``network``, ``optimizer`` and ``perf``: as :func:`jaxrl.algos.ppo.make_agent`'s."""
    network = ppo.make_network(algo, env, network, perf)
    optimizer = optim.make(optimizer, ppo.ADAM_EPS)
    env_params = env.default_params if env_params is None else env_params
    act, sample = ppo.make_policy(network, env, algo)

    def init(key: jax.Array, hp: HParams) -> ppo.PPOState:
        return ppo.init_state(key, hp, env, env_params, network, num_envs, optimizer)

    def update(state: ppo.PPOState, hp: HParams, update_idx: jax.Array) -> tuple[ppo.PPOState, UpdateMetrics]:
        state, traj, prepared = ppo.collect(state, hp, env, env_params, network, algo)
        if algo.lr_schedule == "linear":
            lr = hp.lr * (1.0 - update_idx.astype(jnp.float32) / num_updates)
        else:
            lr = hp.lr
        grad_fn = jax.value_and_grad(_loss, has_aux=True)
        (_, loss), grads = grad_fn(state.params, network, prepared.batch, hp, algo.normalize_advantages)
        params, opt_state, grad_norm = optim.apply(
            state.params, grads, state.opt_state, lr, hp.max_grad_norm, ppo.ADAM_EPS, optimizer
        )
        obs_stats = normalize.update(state.obs_stats, traj.obs) if algo.normalize_obs else state.obs_stats
        new_state = state.replace(
            params=params,
            opt_state=opt_state,
            obs_stats=obs_stats,
            return_stats=prepared.return_stats,
            discounted_return=prepared.discounted,
            value_stats=prepared.value_stats,
        )
        done = prepared.done
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
            explained_variance=ppo.explained_variance(traj.value, prepared.targets),
            grad_norm=grad_norm,
            lr=jnp.asarray(lr, jnp.float32),
        )
        return new_state, metrics

    phases = (
        (
            "rollout: env step + policy forward + sampling",
            lambda state, hp: ppo.rollout(state, env, env_params, network, algo),
        ),
        (
            "advantages: final-obs values, normalization, GAE, batch",
            lambda state, hp: ppo.collect(state, hp, env, env_params, network, algo),
        ),
    )
    return Agent(init, update, act, sample, network, num_envs * algo.num_steps, phases=phases)


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------

PRESETS: dict[str, dict[str, Any]] = {
    # CartPole: see the lineage table (docs/algorithms.md) (python experiments/lineage.py).
    "CartPole-v1": {
        "num_envs": 16,
        "total_timesteps": 500_000,
        "num_evals": 10,
        "algo.num_steps": 8,
        "algo.lr": 4e-3,
        "algo.gae_lambda": 0.95,
        "algo.ent_coef": 0.0,
    },
}


def validate(config: Config) -> None:
    """A2C's checks beyond the common ones."""
    algo = config.algo
    check_rollout(config, 5)
    ppo.validate_network(algo)
    require_one_of("algo.lr_schedule", algo.lr_schedule, ("constant", "linear"), "linear")
    require_unit_interval("algo.gamma", algo.gamma, 0.99)
    require_unit_interval("algo.gae_lambda", algo.gae_lambda, 1.0)
    check_positive(algo, "lr", "max_grad_norm")
    check_non_negative(algo, "vf_coef", "ent_coef")


ALGORITHM = Algorithm(
    name="a2c",
    config=A2CConfig,
    hparams=HParams,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="Synchronous advantage actor-critic: n-step / GAE advantages, one gradient step per rollout",
    env_fields=("env_state", "obs", "discounted_return"),
    data_parallel=True,
    presets=PRESETS,
    validate=validate,
    pbt_bounds={
        k: PBT_BOUNDS[k] for k in ("lr", "ent_coef", "gae_lambda", "gamma", "vf_coef", "max_grad_norm", "reward_scale")
    },
)
