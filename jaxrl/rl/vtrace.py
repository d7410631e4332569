"""V-trace: off-policy value targets and policy-gradient advantages from
trajectories a lagging behaviour policy collected (Espeholt et al. 2018,
"IMPALA", arXiv:1802.01561), with jaxrl's episode semantics."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["VTrace", "vtrace"]


class VTrace(NamedTuple):
    """V-trace's outputs, each ``[T, ...]`` like the inputs (gradients stopped)."""

    vs: jax.Array  # value targets v_s
    pg_advantage: jax.Array  # ρ̄_pg,t (r_t + γ(1 − terminated_t) q_{t+1} − V(s_t))


def vtrace(
    log_rhos: jax.Array,
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float | jax.Array,
    lam: float | jax.Array = 1.0,
    clip_rho: float = 1.0,
    clip_c: float = 1.0,
    clip_pg_rho: float = 1.0,
) -> VTrace:
    """V-trace targets, time-major ``[T, ...]`` (any trailing batch shape).

    With ``ρ_t = π(a_t|s_t) / μ(a_t|s_t)`` (``log_rhos``: target minus
    behaviour log-probs), ``ρ̄_t = min(clip_rho, ρ_t)`` and
    ``c_t = λ min(clip_c, ρ_t)``::

        δ_t   = ρ̄_t (r_t + γ (1 − terminated_t) V(s'_{t+1}) − V(s_t))
        v_s,t = V(s_t) + δ_t + γ (1 − done_t) c_t (v_s,t+1 − V(s_{t+1}))
        q_t   = r_t + γ (1 − terminated_t) b_t,
                b_t = V(s'_{t+1}) where the episode ended, else λ v_s,t+1 + (1 − λ) V(s_{t+1})
        A_t   = min(clip_pg_rho, ρ_t) (q_t − V(s_t))

    ``next_values[t] = V(s'_{t+1})`` is the value of the pre-reset next
    observation, as in :func:`jaxrl.rl.advantages.gae`: a truncation
    bootstraps from it, a termination bootstraps nothing, and no correction
    crosses an episode end (``done``). After the last step, ``v_s,T`` is
    ``V(s'_T)``. On-policy (``log_rhos = 0``) ``v_s − V`` is GAE(λ) and
    ``pg_advantage`` is GAE(λ) at ``λ = 1``; with ``done == terminated`` the
    numbers are rlax's ``vtrace_td_error_and_advantage`` (tested).
    """
    rho = jnp.exp(log_rhos)
    rho_bar = jnp.minimum(clip_rho, rho)
    c = lam * jnp.minimum(clip_c, rho)
    not_term = 1.0 - terminated.astype(values.dtype)
    not_done = 1.0 - done.astype(values.dtype)
    delta = rho_bar * (rewards + gamma * not_term * next_values - values)

    def back(err, xs):
        d, cont = xs
        err = d + cont * err
        return err, err

    _, err = jax.lax.scan(back, jnp.zeros_like(values[0]), (delta, gamma * not_done * c), reverse=True)
    vs = values + err
    vs_next = jnp.concatenate([vs[1:], next_values[-1:]])
    boot = jnp.where(done, next_values, lam * vs_next + (1.0 - lam) * next_values)
    q = rewards + gamma * not_term * boot
    pg_advantage = jnp.minimum(clip_pg_rho, rho) * (q - values)
    return VTrace(jax.lax.stop_gradient(vs), jax.lax.stop_gradient(pg_advantage))
