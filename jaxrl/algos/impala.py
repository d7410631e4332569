"""IMPALA: an actor-critic that learns from trajectories a lagging behaviour
policy collected, corrected by V-trace.

Espeholt et al. (2018), "IMPALA: Scalable Distributed Deep-RL with Importance
Weighted Actor-Learner Architectures", arXiv:1802.01561. Each update takes a
rollout of ``T`` steps (``algo.num_steps``) of ``N`` envs with the behaviour
log-probs recorded when acting, recomputes the policy and ``V`` with the
learner's parameters, forms V-trace targets (:func:`jaxrl.rl.vtrace.vtrace`,
truncations bootstrapped from ``V(final_obs)``) and takes ONE gradient step::

    L = −E[ρ̄_pg · log π(a|s) · A_vtrace] + c_V · ½ E[(v_s − V(s))²] − c_H · E[H(π(·|s))]

In the compiled loop the behaviour policy is the learner's own (ρ = 1: V-trace
is then GAE); on host envs (:mod:`jaxrl.actors`) the actors' parameters lag by
up to ``actor.max_lag`` updates and the importance weights correct for it.
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
    Transition,
    acting,
    collect,
    distribution,
    log_prob,
    make_behaviour,
    make_parts,
    prepare_obs,
    rollout,
    validate_network,
    value_of,
)
from jaxrl.algos.onpolicy import explained_variance, scheduled_lr
from jaxrl.algos.presets import load_presets
from jaxrl.core.checks import NON_NEGATIVE, POSITIVE, UNIT, check_rollout, require_one_of
from jaxrl.core.config import Config
from jaxrl.core.contract import Agent, Algorithm, LoopMetrics, own_metrics
from jaxrl.core.fields import HParams, traced
from jaxrl.envs.core import Env
from jaxrl.nets.networks import ActorCritic
from jaxrl.rl import normalize, optim
from jaxrl.rl.vtrace import vtrace

__all__ = ["ImpalaConfig", "HParams", "LossMetrics", "UpdateMetrics", "impala_loss", "make_agent", "ALGORITHM"]


@dataclass(frozen=True)
class ImpalaConfig:
    """IMPALA's learner with V-trace (Espeholt et al., 2018, arXiv:1802.01561)."""

    name: str = "impala"
    # --- static ---------------------------------------------------------------
    num_steps: int = 20  # unroll length T per env per update
    network: str = "auto"  # torso by name: auto (mlp; cnn for image obs) | mlp | cnn | registered
    hidden_sizes: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    lr_schedule: str = "constant"  # constant | linear (anneal to 0)
    normalize_obs: bool = False
    squash: str = "tanh"  # continuous actions: tanh | clip
    log_std_init: float = 0.0
    # --- traced -----------------------------------------------------------------
    lr: float = traced(5e-4, check=POSITIVE, pbt=(1e-5, 1e-1, True))
    gamma: float = traced(0.99, check=UNIT, pbt=(0.9, 0.9999, False))
    vtrace_lambda: float = traced(1.0, check=UNIT, pbt=(0.8, 1.0, False))  # λ of the traces c_t = λ min(c̄, ρ_t)
    clip_rho: float = traced(1.0, check=POSITIVE)  # ρ̄: the value targets' importance-weight clip
    clip_pg_rho: float = traced(1.0, check=POSITIVE)  # the policy gradient's importance-weight clip
    vf_coef: float = traced(0.5, check=NON_NEGATIVE, pbt=(0.05, 2.0, True))
    ent_coef: float = traced(0.01, check=NON_NEGATIVE, pbt=(0.0, 0.1, False))
    max_grad_norm: float = traced(0.5, check=POSITIVE, pbt=(0.05, 40.0, True))
    reward_scale: float = traced(1.0, pbt=(0.01, 100.0, True))


class LossMetrics(NamedTuple):
    total: jax.Array
    policy: jax.Array
    value: jax.Array
    entropy: jax.Array
    rho: jax.Array  # mean importance weight π/μ of the batch (1 on-policy)


class UpdateMetrics(NamedTuple):
    """Per-update metrics of one member (scalars)."""

    loop: LoopMetrics
    loss: jax.Array
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    mean_rho: jax.Array
    explained_variance: jax.Array
    grad_norm: jax.Array
    lr: jax.Array


def impala_loss(
    params: Any, network: Any, state: ActorCriticState, steps: Transition, hp: Any, algo: Any
) -> tuple[jax.Array, tuple[LossMetrics, jax.Array, jax.Array]]:
    """IMPALA's loss on a rollout ``[T, N, ...]`` (``steps.log_prob``: the
    behaviour's); returns ``(L, (metrics, v_s, V(s)))``. The policy and ``V``
    come from ``params``; the V-trace targets are constants."""
    obs = prepare_obs(state, steps.obs, algo)
    policy_out, raw_value = network.apply(params, obs)
    value = value_of(state, raw_value, algo)
    dist = distribution(network, params, policy_out)
    logp = log_prob(dist, steps.action)
    next_raw = network.apply(params, prepare_obs(state, steps.final_obs, algo), method=ActorCritic.value)
    next_value = jax.lax.stop_gradient(value_of(state, next_raw, algo))
    log_rhos = jax.lax.stop_gradient(logp) - steps.log_prob
    done = jnp.logical_or(steps.terminated, steps.truncated)
    targets = vtrace(
        log_rhos,
        steps.reward * hp.reward_scale,
        jax.lax.stop_gradient(value),
        next_value,
        steps.terminated,
        done,
        hp.gamma,
        hp.vtrace_lambda,
        hp.clip_rho,
        1.0,
        hp.clip_pg_rho,
    )
    policy_loss = -jnp.mean(logp * targets.pg_advantage)
    value_loss = 0.5 * jnp.mean(jnp.square(targets.vs - value))
    entropy = jnp.mean(dist.entropy())
    total = policy_loss + hp.vf_coef * value_loss - hp.ent_coef * entropy
    rho = jnp.mean(jnp.exp(log_rhos))
    return total, (LossMetrics(total, policy_loss, value_loss, entropy, rho), targets.vs, value)


def make_agent(
    algo: ImpalaConfig,
    env: Env,
    num_envs: int,
    num_updates: int,
    env_params: Any = None,
    *,
    network: Any = None,
    optimizer: optim.Spec = None,
    perf: bool = False,
) -> Agent:
    """IMPALA for ``num_envs`` parallel copies of ``env``. ``network``,
    ``optimizer`` and ``perf``: as :func:`jaxrl.algos.ppo.make_agent`'s."""
    network, optimizer, env_params, act, sample, init = make_parts(
        algo, env, num_envs, env_params, network, optimizer, perf
    )

    def collect_step(state: ActorCriticState, hp: HParams, update_idx: jax.Array) -> tuple[ActorCriticState, Rollout]:
        return collect(state, env, env_params, network, algo)

    def learn(
        state: ActorCriticState, batch: Rollout, hp: HParams, update_idx: jax.Array
    ) -> tuple[ActorCriticState, UpdateMetrics]:
        steps = batch.steps
        lr = scheduled_lr(algo.lr_schedule, hp.lr, update_idx, num_updates)
        grad_fn = jax.value_and_grad(impala_loss, has_aux=True)
        (_, (loss, vs, value)), grads = grad_fn(state.params, network, state, steps, hp, algo)
        params, opt_state, grad_norm = optim.apply(
            state.params, grads, state.opt_state, lr, hp.max_grad_norm, ADAM_EPS, optimizer
        )
        obs_stats = normalize.update(state.obs_stats, steps.obs) if algo.normalize_obs else state.obs_stats
        finite = jnp.isfinite(loss.total) & jnp.isfinite(grad_norm) & optim.tree_all_finite(params)
        done = jnp.logical_or(steps.terminated, steps.truncated)
        metrics = UpdateMetrics(
            loop=LoopMetrics.of(done, steps.episode_return, steps.episode_length, finite),
            loss=loss.total,
            policy_loss=loss.policy,
            value_loss=loss.value,
            entropy=loss.entropy,
            mean_rho=loss.rho,
            explained_variance=explained_variance(value, vs),
            grad_norm=grad_norm,
            lr=jnp.asarray(lr, jnp.float32),
        )
        return state.replace(params=params, opt_state=opt_state, obs_stats=obs_stats), metrics

    behave, _ = make_behaviour(network, env, algo)

    def complete(state: ActorCriticState, steps: Any) -> Rollout:
        """The actors' steps as a rollout; the learner values them itself."""
        steps = {k: v for k, v in steps.items() if k != "cut"}  # a column's gaps matter to n-step windows only
        return Rollout(Transition(value=None, next_value=None, **steps))

    phases = (
        (
            "rollout: env step + policy forward + sampling",
            lambda state, hp: rollout(state, env, env_params, network, algo),
        ),
    )
    return Agent(
        init, collect_step, learn, act, sample, network, num_envs * algo.num_steps, phases=phases,
        behave=behave, complete=complete, acting=acting,
    )  # fmt: skip


# ---------------------------------------------------------------------------
# Declarations for the registry (jaxrl.algos)
# ---------------------------------------------------------------------------


def validate(config: Config) -> None:
    """IMPALA's checks beyond each field's own."""
    algo = config.algo
    check_rollout(config, 20)
    validate_network(algo)
    require_one_of("algo.lr_schedule", algo.lr_schedule, ("constant", "linear"), "constant")


ALGORITHM = Algorithm(
    name="impala",
    config=ImpalaConfig,
    make_agent=make_agent,
    seams=("network", "optimizer", "perf"),
    metrics=own_metrics(UpdateMetrics),
    description="IMPALA: V-trace-corrected actor-critic, one gradient step per rollout (host envs: lagging actors)",
    presets=load_presets("impala"),
    validate=validate,
)
