"""Synchronous advantage actor-critic (A2C).

Mnih et al. (2016), "Asynchronous Methods for Deep Reinforcement Learning",
arXiv:1602.01783, in the synchronous form of OpenAI Baselines' ``a2c``: ``N``
envs step ``T`` times (``algo.num_steps``, 5 by default), advantages are GAE
(Schulman et al., 2015, arXiv:1506.02438; ``gae_lambda=1`` gives A3C's
n-step returns) with the truncation bootstrap from ``V(final_obs)``, and ONE
gradient step on the whole ``[T·N]`` batch follows each rollout::

    L = −E[log π(a|s) · Â] + c_V · ½ E[(V(s) − G)²] − c_H · E[H(π(·|s))]

It shares PPO's actor-critic pieces (:mod:`jaxrl.algos.actor_critic`): the
network, the rollout with behaviour values recorded at collection time, the
reward / observation / value normalizers and GAE. The difference is the learner: no
ratio, no clipping, no epochs or minibatches. (PPO's clipped loss at ratio 1
has the same gradient as :func:`a2c_loss`; ``tests/test_lineage.py`` checks it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.algos.actor_critic import (
    ADAM_EPS,
    ActorCriticState,
    Batch,
    Rollout,
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
from jaxrl.algos.onpolicy import explained_variance, scheduled_lr
from jaxrl.algos.presets import load_presets
from jaxrl.core.checks import NON_NEGATIVE, POSITIVE, UNIT, check_rollout, require_one_of
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, LoopMetrics, own_metrics
from jaxrl.core.fields import HParams, traced
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
    lr: float = traced(7e-4, check=POSITIVE, pbt=(1e-5, 1e-1, True))
    gamma: float = traced(0.99, check=UNIT, pbt=(0.9, 0.9999, False))
    gae_lambda: float = traced(1.0, check=UNIT, pbt=(0.8, 1.0, False))  # 1: n-step returns (A3C); < 1: GAE
    vf_coef: float = traced(0.5, check=NON_NEGATIVE, pbt=(0.05, 2.0, True))
    ent_coef: float = traced(0.01, check=NON_NEGATIVE, pbt=(0.0, 0.1, False))
    max_grad_norm: float = traced(0.5, check=POSITIVE, pbt=(0.05, 10.0, True))
    reward_scale: float = traced(1.0, pbt=(0.01, 100.0, True))


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
    explained_variance: jax.Array
    grad_norm: jax.Array
    lr: jax.Array


def a2c_loss(
    log_prob: jax.Array,
    entropy: jax.Array,
    value: jax.Array,
    batch: Batch,
    hp: Any,
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


def _loss(params: Any, network: Any, batch: Batch, hp: Any, normalize_advantages: bool):
    dist, value, batch = policy_and_value(network, params, batch)
    return a2c_loss(
        log_prob(dist, batch.action), dist.entropy(), value, batch, hp, normalize_advantages=normalize_advantages
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
    perf: bool = False,
) -> Agent:
    """A2C for ``num_envs`` parallel copies of ``env`` (``num_updates`` sets the
    linear learning-rate annealing). ``network``, ``optimizer`` and ``perf``: as :func:`jaxrl.algos.ppo.make_agent`'s."""
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
        lr = scheduled_lr(algo.lr_schedule, hp.lr, update_idx, num_updates)
        grad_fn = jax.value_and_grad(_loss, has_aux=True)
        (_, loss), grads = grad_fn(state.params, network, prepared.batch, hp, algo.normalize_advantages)
        params, opt_state, grad_norm = optim.apply(
            state.params, grads, state.opt_state, lr, hp.max_grad_norm, ADAM_EPS, optimizer
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
        finite = jnp.isfinite(loss.total) & jnp.isfinite(grad_norm) & optim.tree_all_finite(params)
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(prepared.done, traj.episode_return, traj.episode_length, finite),
            loss=loss.total,
            policy_loss=loss.policy,
            value_loss=loss.value,
            entropy=loss.entropy,
            explained_variance=explained_variance(traj.value, prepared.targets),
            grad_norm=grad_norm,
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
    behave, complete = make_behaviour(network, env, algo)  # host envs: the learner values the actors' steps
    return Agent(
        init,
        collect_step,
        learn,
        act,
        sample,
        network,
        num_envs * algo.num_steps,
        phases=phases,
        behave=behave,
        complete=complete,
        acting=acting,
    )


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """A2C's checks beyond each field's own."""
    algo = config.algo
    check_rollout(config, 5)
    validate_network(algo)
    require_one_of("algo.lr_schedule", algo.lr_schedule, ("constant", "linear"), "linear")


ALGORITHM = Algorithm(
    name="a2c",
    config=A2CConfig,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="Synchronous advantage actor-critic: n-step / GAE advantages, one gradient step per rollout",
    env_fields=("env_state", "obs", "discounted_return"),
    data_parallel=True,
    presets=load_presets("a2c"),
    validate=validate,
)
