"""Action distributions with log-probs written for numerical safety.

Small, dependency-free counterparts of ``distrax.Categorical`` and
``distrax.MultivariateNormalDiag`` (checked against distrax in the tests).
Leading dimensions are batch dimensions.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Categorical", "DiagGaussian"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


class Categorical(NamedTuple):
    """Categorical over the last axis of ``logits`` ``[..., n]``."""

    logits: jax.Array

    def _log_probs(self) -> jax.Array:
        return jax.nn.log_softmax(self.logits, axis=-1)

    def sample(self, key: jax.Array) -> jax.Array:
        """int32 ``[...]``."""
        return jax.random.categorical(key, self.logits, axis=-1).astype(jnp.int32)

    def log_prob(self, action: jax.Array) -> jax.Array:
        """``log π(a)`` ``[...]``."""
        logp = self._log_probs()
        # a one-hot dot rather than a gather: its gradient is a product, not a scatter
        one_hot = jax.nn.one_hot(action, logp.shape[-1], dtype=logp.dtype)
        return jnp.sum(one_hot * logp, axis=-1)

    def entropy(self) -> jax.Array:
        logp = self._log_probs()
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)


class DiagGaussian(NamedTuple):
    """Diagonal Gaussian over the last axis: ``mean``, ``log_std`` ``[..., d]``."""

    mean: jax.Array
    log_std: jax.Array

    def sample(self, key: jax.Array) -> jax.Array:
        noise = jax.random.normal(key, jnp.shape(self.mean), self.mean.dtype)
        return self.mean + jnp.exp(self.log_std) * noise

    def log_prob(self, action: jax.Array) -> jax.Array:
        """Sum over the action dimensions ``[...]``."""
        z = (action - self.mean) * jnp.exp(-self.log_std)
        return jnp.sum(-0.5 * z * z - self.log_std - _HALF_LOG_2PI, axis=-1)

    def entropy(self) -> jax.Array:
        log_std = jnp.broadcast_to(self.log_std, jnp.shape(self.mean))
        return jnp.sum(log_std + 0.5 + _HALF_LOG_2PI, axis=-1)

    def mode(self) -> jax.Array:
        return self.mean


_LOG2 = math.log(2.0)


def tanh_log_det(u: jax.Array) -> jax.Array:
    """``log |d tanh(u)/du| = log(1 − tanh²u) = 2(log 2 − u − softplus(−2u))``,
    summed over the last axis; exact and finite for any ``u`` (no 1 − tanh² underflow)."""
    return jnp.sum(2.0 * (_LOG2 - u - jax.nn.softplus(-2.0 * u)), axis=-1)


class TanhGaussian(NamedTuple):
    """``a = low + (tanh(u) + 1)/2 · (high − low)``, ``u ~ N(mean, exp(log_std)²)``.

    Log-probabilities are computed from the pre-tanh sample ``u`` (change of
    variables: ``log p(a) = log N(u) − Σ log(1 − tanh²u) − Σ log((high − low)/2)``),
    which stays finite where ``a`` saturates; PPO stores ``u`` for its ratios.
    """

    mean: jax.Array  # [..., d]
    log_std: jax.Array  # [..., d]
    low: jax.Array  # [d]
    high: jax.Array  # [d]

    @property
    def _base(self) -> DiagGaussian:
        return DiagGaussian(self.mean, self.log_std)

    def squash(self, u: jax.Array) -> jax.Array:
        """Pre-tanh sample → action in ``[low, high]``."""
        return self.low + (jnp.tanh(u) + 1.0) * 0.5 * (self.high - self.low)

    def sample_pre_tanh(self, key: jax.Array) -> jax.Array:
        return self._base.sample(key)

    def log_prob_pre_tanh(self, u: jax.Array) -> jax.Array:
        """``log p(a)`` of ``a = squash(u)`` ``[...]``."""
        scale = jnp.sum(jnp.log(0.5 * (self.high - self.low)) * jnp.ones_like(u), axis=-1)
        return self._base.log_prob(u) - tanh_log_det(u) - scale

    def sample_and_log_prob(self, key: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(action, log p(action), u)`` — reparameterized (differentiable in mean/log_std)."""
        return self.from_noise(jax.random.normal(key, jnp.shape(self.mean), self.mean.dtype))

    def from_noise(self, noise: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """:meth:`sample_and_log_prob` with its standard-normal draw ``noise``
        ``[..., d]`` given, so a caller can draw many samples' noise in one call."""
        u = self.mean + jnp.exp(self.log_std) * noise
        return self.squash(u), self.log_prob_pre_tanh(u), u

    def entropy(self) -> jax.Array:
        """Entropy of the pre-tanh Gaussian (the squashed one has no closed form)."""
        return self._base.entropy()

    def mode(self) -> jax.Array:
        return self.squash(self.mean)
