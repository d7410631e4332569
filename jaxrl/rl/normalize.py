"""Running mean/variance with the parallel (Chan et al.) merge, one per seed.

The sample count is kept as an unevaluated float32 sum ``count + count_err``
(Knuth's TwoSum), so it stays exact far beyond float32's 2^24 where a plain
float32 counter would stop growing.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

__all__ = ["RunningStats", "init", "update", "normalize"]


@struct.dataclass
class RunningStats:
    mean: jax.Array  # float32 [*shape]
    var: jax.Array  # float32 [*shape] population variance
    count: jax.Array  # float32 [] samples seen (high part; starts at a tiny epsilon)
    count_err: jax.Array  # float32 [] low part: the exact count is count + count_err


def init(shape: tuple[int, ...]) -> RunningStats:
    return RunningStats(
        mean=jnp.zeros(shape, jnp.float32),
        var=jnp.ones(shape, jnp.float32),
        count=jnp.asarray(1e-4, jnp.float32),
        count_err=jnp.zeros((), jnp.float32),
    )


def _two_sum(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``a + b = s + e`` exactly (Knuth)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def update(stats: RunningStats, batch: jax.Array) -> RunningStats:
    """Merge a batch ``[B, *shape]`` (leading axes flattened) into ``stats``.

    Chan, Golub & LeVeque (1979): ``M2 = M2_a + M2_b + δ² n_a n_b / n``.
    """
    shape = stats.mean.shape
    x = batch.reshape((-1,) + shape).astype(jnp.float32)
    n_b = jnp.asarray(x.shape[0], jnp.float32)
    mean_b = jnp.mean(x, axis=0)
    var_b = jnp.var(x, axis=0)
    n_a = stats.count + stats.count_err
    high, err = _two_sum(stats.count, n_b)
    high, low = _two_sum(high, stats.count_err + err)
    n = high + low
    delta = mean_b - stats.mean
    mean = stats.mean + delta * (n_b / n)
    m2 = stats.var * n_a + var_b * n_b + delta**2 * (n_a * n_b / n)
    return RunningStats(mean=mean, var=m2 / n, count=high, count_err=low)


def normalize(stats: RunningStats, x: jax.Array, clip: float = 10.0) -> jax.Array:
    """``clip((x − mean) / sqrt(var + 1e-8), ±clip)``."""
    z = (x - stats.mean) * jax.lax.rsqrt(stats.var + 1e-8)
    return jnp.clip(z, -clip, clip)
