"""Distributional value learning: the return's distribution, not its mean.

Two parameterizations, each a target and a loss, pure and batched over any
leading axes (vmap outside for seeds):

* **categorical** (C51; Bellemare, Dabney & Munos 2017, "A Distributional
  Perspective on Reinforcement Learning", arXiv:1707.06887): probabilities on
  a fixed support of ``A`` atoms ``z_1 < … < z_A``; the Bellman target's atoms
  ``r + γ z_j`` fall between the support's and are projected back onto it
  (:func:`categorical_projection`), the loss is the cross-entropy to that
  projection (:func:`categorical_loss`);
* **quantile** (QR-DQN; Dabney, Rowland, Bellemare & Munos 2018,
  "Distributional Reinforcement Learning with Quantile Regression",
  arXiv:1710.10044): ``N`` locations at fixed quantile levels
  ``τ̂_i = (2i − 1) / 2N`` learn by the quantile Huber loss against the target
  samples ``r + γ θ_j(s', a*)`` (:func:`quantile_huber_loss`); implicit
  quantiles (IQN) use the same loss at sampled levels.

Episode semantics as everywhere in jaxrl: the caller passes the discount of
each transition — ``γ (1 − terminated)`` for one step, ``γⁿ`` products for
n-step returns — so a termination bootstraps nothing and a truncation
bootstraps from the distribution at the pre-reset final observation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "support",
    "categorical_projection",
    "categorical_target",
    "categorical_loss",
    "categorical_mean",
    "quantile_levels",
    "quantile_target",
    "quantile_huber_loss",
]


def support(v_min: float, v_max: float, atoms: int) -> jax.Array:
    """The categorical support: ``atoms`` evenly spaced values from ``v_min`` to ``v_max`` ``[A]``."""
    if atoms < 2 or not v_min < v_max:
        raise ValueError(f"a support needs atoms >= 2 and v_min < v_max (got {atoms}, {v_min}, {v_max})")
    return jnp.linspace(v_min, v_max, atoms, dtype=jnp.float32)


def categorical_projection(atoms: jax.Array, probs: jax.Array, z: jax.Array) -> jax.Array:
    """Project the distribution with mass ``probs`` on ``atoms`` (``[..., K]``
    each, atoms in any order) onto the evenly spaced support ``z`` ``[A]``:
    ``[..., A]``.

    Each atom, first clipped into ``[z_1, z_A]``, splits its mass between the
    two support points around it in proportion to its distance from each
    (the C51 projection Φ, which is the Cramér / L2 projection onto ``z``)::

        (Φ p)_i = Σ_j p_j · max(0, 1 − |clip(x_j, z_1, z_A) − z_i| / Δz)

    computed as two scatter-adds per distribution (``O(K)``, not the ``O(K·A)``
    of the formula). Mass is conserved: the output sums to ``probs``' sum."""
    size = z.shape[-1]
    dz = z[1] - z[0]
    clipped = jnp.clip(atoms, z[0], z[-1])
    lo = jnp.clip(jnp.floor((clipped - z[0]) / dz), 0, size - 1).astype(jnp.int32)  # [..., K]
    hi = jnp.minimum(lo + 1, size - 1)
    # the share of the upper point, from the distance to the lower one (small numbers:
    # precise in float32); 0 where an atom lands on a support point
    upper_share = jnp.clip((clipped - z[lo]) / dz, 0.0, 1.0)

    def one(lo: jax.Array, hi: jax.Array, p: jax.Array, share: jax.Array) -> jax.Array:
        return jnp.zeros((size,), p.dtype).at[lo].add(p * (1.0 - share)).at[hi].add(p * share)

    for _ in range(atoms.ndim - 1):
        one = jax.vmap(one)
    return one(lo, hi, probs.astype(jnp.result_type(probs, atoms)), upper_share)


def categorical_target(reward: jax.Array, discount: jax.Array, next_probs: jax.Array, z: jax.Array) -> jax.Array:
    """The projected distributional Bellman target ``Φ(r + γ' z) [..., A]`` of
    the next state's distribution ``next_probs`` ``[..., A]`` (already the
    greedy or selected action's), with ``reward`` and ``discount`` ``[...]``
    (``γ' = γ (1 − terminated)`` or an n-step product). Gradients stopped."""
    atoms = reward[..., None] + discount[..., None] * z
    return jax.lax.stop_gradient(categorical_projection(atoms, next_probs, z))


def categorical_loss(logits: jax.Array, target: jax.Array) -> jax.Array:
    """Cross-entropy ``−Σ_i target_i log softmax(logits)_i`` ``[...]`` of the
    predicted logits ``[..., A]`` to a target distribution ``[..., A]``: the
    C51 loss (its gradient is the KL divergence's)."""
    return -jnp.sum(target * jax.nn.log_softmax(logits, axis=-1), axis=-1)


def categorical_mean(logits: jax.Array, z: jax.Array) -> jax.Array:
    """The mean ``Σ_i softmax(logits)_i z_i`` ``[...]`` of a categorical value: its Q-value."""
    return jnp.sum(jax.nn.softmax(logits, axis=-1) * z, axis=-1)


def quantile_levels(n: int) -> jax.Array:
    """QR-DQN's fixed quantile midpoints ``τ̂_i = (2i − 1) / 2n``, ``i = 1 … n`` ``[n]``."""
    return (2.0 * jnp.arange(1, n + 1, dtype=jnp.float32) - 1.0) / (2.0 * n)


def quantile_target(reward: jax.Array, discount: jax.Array, next_quantiles: jax.Array) -> jax.Array:
    """The target samples ``r + γ' θ_j(s', a*)`` ``[..., M]`` of the next state's
    quantiles ``[..., M]`` (``reward``, ``discount`` ``[...]`` as in
    :func:`categorical_target`). Gradients stopped."""
    return jax.lax.stop_gradient(reward[..., None] + discount[..., None] * next_quantiles)


def quantile_huber_loss(quantiles: jax.Array, levels: jax.Array, target: jax.Array, kappa: float = 1.0) -> jax.Array:
    """The quantile Huber loss ``[...]`` of predicted quantiles ``θ_i`` ``[..., N]``
    at levels ``τ_i`` (``[N]`` or ``[..., N]``) against target samples ``[..., M]``::

        u_ij = target_j − θ_i
        ρ^κ_τ(u) = |τ − 1{u < 0}| · L_κ(u) / κ,   L_κ(u) = u²/2 if |u| ≤ κ else κ (|u| − κ/2)
        loss = Σ_i (1/M) Σ_j ρ^κ_{τ_i}(u_ij)

    (Dabney et al. 2018, eq. 10; ``kappa=0`` is the plain quantile loss
    ``|τ − 1{u < 0}| |u|``). Minimized when each ``θ_i`` is the ``τ_i``-quantile
    of the target samples."""
    u = target[..., None, :] - quantiles[..., :, None]  # [..., N, M]
    if kappa > 0:
        absu = jnp.abs(u)
        huber = jnp.where(absu <= kappa, 0.5 * u * u, kappa * (absu - 0.5 * kappa)) / kappa
    else:
        huber = jnp.abs(u)
    weight = jnp.abs(levels[..., :, None] - (u < 0).astype(u.dtype))
    return jnp.sum(jnp.mean(weight * huber, axis=-1), axis=-1)
