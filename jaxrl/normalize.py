"""Running mean/variance with the parallel (Chan et al.) merge, one per seed."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

__all__ = ["RunningStats", "init", "update", "normalize"]


@struct.dataclass
class RunningStats:
    mean: jax.Array  # float32 [*shape]
    var: jax.Array  # float32 [*shape] population variance
    count: jax.Array  # float32 [] samples seen (starts at a tiny epsilon)


def init(shape: tuple[int, ...]) -> RunningStats:
    return RunningStats(
        mean=jnp.zeros(shape, jnp.float32),
        var=jnp.ones(shape, jnp.float32),
        count=jnp.asarray(1e-4, jnp.float32),
    )


def update(stats: RunningStats, batch: jax.Array) -> RunningStats:
    """Merge a batch ``[B, *shape]`` (leading axes flattened) into ``stats``.

    Chan, Golub & LeVeque (1979): ``M2 = M2_a + M2_b + δ² n_a n_b / n``.
    """
    shape = stats.mean.shape
    x = batch.reshape((-1,) + shape).astype(jnp.float32)
    n_b = jnp.asarray(x.shape[0], jnp.float32)
    mean_b = jnp.mean(x, axis=0)
    var_b = jnp.var(x, axis=0)
    n = stats.count + n_b
    delta = mean_b - stats.mean
    mean = stats.mean + delta * (n_b / n)
    m2 = stats.var * stats.count + var_b * n_b + delta**2 * (stats.count * n_b / n)
    return RunningStats(mean=mean, var=m2 / n, count=n)


def normalize(stats: RunningStats, x: jax.Array, clip: float = 10.0) -> jax.Array:
    """``clip((x − mean) / sqrt(var + 1e-8), ±clip)``."""
    z = (x - stats.mean) * jax.lax.rsqrt(stats.var + 1e-8)
    return jnp.clip(z, -clip, clip)
