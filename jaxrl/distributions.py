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
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

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
