"""Value-learning pieces shared by PQN and DQN: Q(λ) targets over a rollout,
n-step returns from stored sequences, (double) Q-learning targets, ε-greedy
action selection and its linear schedule.

All of them keep termination and truncation apart (Pardo et al., 2018,
arXiv:1712.00378): a truncated transition bootstraps from the value of its
*pre-reset* final observation, a terminated one bootstraps nothing.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.rl.advantages import gae

__all__ = ["q_lambda", "n_step_return", "q_target", "td_loss", "td_item_loss", "epsilon_greedy", "linear_epsilon"]


def q_lambda(
    rewards: jax.Array,
    q_max: jax.Array,
    next_q_max: jax.Array,
    terminated: jax.Array,
    done: jax.Array,
    gamma: float | jax.Array,
    lam: float | jax.Array,
    *,
    method: str = "associative",
) -> jax.Array:
    """Peng's Q(λ) returns of a time-major ``[T, ...]`` rollout (PQN's targets)::

        G_t = r_t + γ (1 − terminated_t) max_a Q(s'_{t+1}, a)                 if done_t
        G_t = r_t + γ [(1 − λ) max_a Q(s_{t+1}, a) + λ G_{t+1}]               otherwise
        G_{T-1} bootstraps fully: r + γ max_a Q(s_T, a) (unless it ended an episode)

    This is the TD(λ) return with ``V(s) = max_a Q(s, a)``, so it is computed by
    :func:`jaxrl.rl.gae` (the same affine recurrence, associative scan or
    sequential ``method="scan"``) plus ``V``: ``G = GAE(V) + V``.

    Args:
      rewards: ``[T, ...]``.
      q_max: ``max_a Q(s_t, a)`` ``[T, ...]``.
      next_q_max: ``max_a Q(s'_{t+1}, a)`` ``[T, ...]`` of the pre-reset next observation.
      terminated, done: ``[T, ...]`` bool/0-1 (``done = terminated or truncated``).
      gamma, lam: scalars (may be traced).

    Returns:
      the targets ``[T, ...]`` (float32 unless inputs are float64).
    """
    advantages = gae(rewards, q_max, next_q_max, terminated, done, gamma, lam, method=method)
    return advantages + jnp.asarray(q_max, advantages.dtype)


def n_step_return(
    rewards: jax.Array, terminated: jax.Array, done: jax.Array, gamma: float | jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The n-step return of sequences ``[B, n]`` of consecutive transitions of one env,
    stopping at the first one that ended an episode.

    Returns ``(R, discount, last)``, each ``[B]``: ``R = Σ_{k≤m} γ^k r_k`` up to the
    stopping step ``m`` (the first ``done``, else ``n − 1``), ``discount =
    γ^{m+1} (1 − terminated_m)`` (what multiplies the bootstrap value) and ``last = m``
    (whose stored pre-reset next observation the bootstrap is taken at), so that the
    target is ``R + discount · V(next_obs[last])``.
    """
    n = rewards.shape[-1]
    gamma = jnp.asarray(gamma, jnp.result_type(rewards, jnp.float32))
    ret = jnp.zeros(rewards.shape[:-1], gamma.dtype)
    scale = jnp.ones_like(ret)  # γ^k while the sequence is alive
    alive = jnp.ones(rewards.shape[:-1], bool)
    last = jnp.zeros(rewards.shape[:-1], jnp.int32)
    discount = jnp.zeros_like(ret)
    for k in range(n):
        ret = ret + jnp.where(alive, scale * rewards[..., k], 0.0)
        stops = alive & (done[..., k].astype(bool) | (k == n - 1))
        not_terminal = 1.0 - terminated[..., k].astype(gamma.dtype)
        discount = jnp.where(stops, scale * gamma * not_terminal, discount)
        last = jnp.where(stops, k, last)
        alive = alive & ~done[..., k].astype(bool)
        scale = scale * gamma
    return ret, discount, last


def q_target(next_q_target: jax.Array, next_q_online: jax.Array | None = None) -> jax.Array:
    """The bootstrap value ``[...]`` from next-state action values ``[..., n]``:
    ``max_a Q̄(s', a)`` (DQN), or with ``next_q_online`` the double-DQN value
    ``Q̄(s', argmax_a Q(s', a))`` (van Hasselt et al., 2016, arXiv:1509.06461)."""
    if next_q_online is None:
        return jnp.max(next_q_target, axis=-1)
    best = jnp.argmax(next_q_online, axis=-1)
    return jnp.take_along_axis(next_q_target, best[..., None], axis=-1)[..., 0]


def epsilon_greedy(q: jax.Array, epsilon: jax.Array, coin: jax.Array, random_action: jax.Array) -> jax.Array:
    """int32 actions ``[...]`` from action values ``[..., n]``: ``random_action``
    (int ``[...]``, uniform over the ``n`` actions) where the uniform ``coin``
    ``[...]`` falls below ``epsilon``, else ``argmax_a q``. The randomness is
    passed in so a rollout can draw all of it up front."""
    greedy = jnp.argmax(q, axis=-1).astype(jnp.int32)
    return jnp.where(coin < epsilon, random_action.astype(jnp.int32), greedy)


def linear_epsilon(
    step: jax.Array, start: jax.Array, end: jax.Array, fraction: jax.Array, total: int | jax.Array
) -> jax.Array:
    """ε at env step ``step``: linear from ``start`` to ``end`` over the first
    ``fraction · total`` steps, then ``end`` (``fraction = 0``: ``end`` throughout)."""
    span = jnp.asarray(fraction, jnp.float32) * jnp.asarray(total, jnp.float32)
    progress = jnp.where(span > 0, jnp.asarray(step, jnp.float32) / jnp.maximum(span, 1.0), 1.0)
    return end + (start - end) * jnp.clip(1.0 - progress, 0.0, 1.0)


def td_loss(q: jax.Array, target: jax.Array, kind: str = "mse") -> jax.Array:
    """Mean regression loss of ``q`` ``[B]`` to ``target`` ``[B]`` (no gradient into
    the target): ``½ (q − y)²`` (``"mse"``) or Huber with δ = 1 (``"huber"``)."""
    return jnp.mean(td_item_loss(q, target, kind))


def td_item_loss(q: jax.Array, target: jax.Array, kind: str = "mse") -> jax.Array:
    """:func:`td_loss` of each item ``[B]``."""
    error = q - jax.lax.stop_gradient(target)
    if kind == "huber":
        absolute = jnp.abs(error)
        return jnp.where(absolute <= 1.0, 0.5 * jnp.square(error), absolute - 0.5)
    return 0.5 * jnp.square(error)
