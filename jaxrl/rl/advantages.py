"""Generalized Advantage Estimation with separate termination and truncation.

Schulman et al. (2016), "High-Dimensional Continuous Control Using Generalized
Advantage Estimation", arXiv:1506.02438; time-limit handling after Pardo et al.
(2018), "Time Limits in Reinforcement Learning", arXiv:1712.00378.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["gae", "gae_reference"]


def _deltas_and_coeffs(rewards, values, next_values, terminated, done, gamma, lam):
    dtype = jnp.result_type(rewards, values, next_values, jnp.float32)
    rewards, values, next_values = (jnp.asarray(x, dtype) for x in (rewards, values, next_values))
    not_terminated = 1.0 - jnp.asarray(terminated, dtype)
    not_done = 1.0 - jnp.asarray(done, dtype)
    gamma = jnp.asarray(gamma, dtype)
    lam = jnp.asarray(lam, dtype)
    delta = rewards + gamma * not_terminated * next_values - values
    coeff = gamma * lam * not_done
    return delta, coeff


def gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float | jax.Array,
    lam: float | jax.Array,
    *,
    method: str = "associative",
) -> jax.Array:
    """Generalized advantage estimates, time-major.

    For every step ``t`` of a ``[T, ...]`` batch (any trailing batch shape)::

        δ_t = r_t + γ (1 − terminated_t) V(s'_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},      A_T = 0

    ``next_values[t] = V(s'_{t+1})`` is the value of the *pre-reset* next
    observation, so a time-limit truncation (``done`` but not ``terminated``)
    bootstraps from ``V(final observation)``, a true termination bootstraps
    nothing, and no advantage flows across an episode boundary (``done``).
    The returns (value targets) are ``advantages + values``.

    The recursion is a composition of affine maps ``A ↦ δ_t + c_t·A`` with
    ``c_t = γλ(1 − done_t)``, evaluated by ``jax.lax.associative_scan`` in
    reverse (``O(log T)`` depth; the fast form on accelerators). On a CPU the
    sequential ``method="scan"`` is usually faster; both give the same numbers
    up to float rounding.

    Args:
      rewards: ``r_t`` ``[T, ...]``.
      values: ``V(s_t)`` ``[T, ...]``, recorded at collection time.
      next_values: ``V(s'_{t+1})`` ``[T, ...]`` of the pre-reset next observation.
      terminated: ``[T, ...]`` bool/0-1, true terminal transitions.
      done: ``[T, ...]`` bool/0-1, ``terminated or truncated``.
      gamma: discount ``γ`` (scalar, may be traced).
      lam: GAE ``λ`` (scalar, may be traced).
      method: ``"associative"`` or ``"scan"`` (sequential reverse scan).

    Returns:
      advantages ``[T, ...]`` (float32 unless inputs are float64).
    """
    delta, coeff = _deltas_and_coeffs(rewards, values, next_values, terminated, done, gamma, lam)
    if method == "scan":
        return _reverse_scan(delta, coeff)
    if method != "associative":
        raise ValueError(f"method must be 'associative' or 'scan', got {method!r}")

    # Element t is the map f_t(A) = δ_t + c_t·A; A_t = f_t ∘ f_{t+1} ∘ … ∘ f_{T-1}(0).
    # With reverse=True the scan combines (later, earlier) pairs.
    def compose(later, earlier):
        c_later, d_later = later
        c_earlier, d_earlier = earlier
        return c_earlier * c_later, d_earlier + c_earlier * d_later

    _, advantages = jax.lax.associative_scan(compose, (coeff, delta), reverse=True, axis=0)
    return advantages


def _reverse_scan(delta: jax.Array, coeff: jax.Array) -> jax.Array:
    def step(next_advantage, inputs):
        d_t, c_t = inputs
        advantage = d_t + c_t * next_advantage
        return advantage, advantage

    _, advantages = jax.lax.scan(step, jnp.zeros_like(delta[0]), (delta, coeff), reverse=True)
    return advantages


def gae_reference(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float | jax.Array,
    lam: float | jax.Array,
) -> jax.Array:
    """The plain sequential reverse ``lax.scan`` form of :func:`gae` (test oracle)."""
    return gae(rewards, values, next_values, terminated, done, gamma, lam, method="scan")
