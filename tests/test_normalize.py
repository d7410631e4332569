"""Running statistics: the parallel merge equals a float64 computation over all data."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.rl import normalize


def test_merge_equals_float64_batch():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 3)).astype(np.float32) for n in (1, 7, 64, 500, 3)]
    stats = normalize.init((3,))
    update = jax.jit(normalize.update)
    for b in batches:
        stats = update(stats, jnp.asarray(b))
    data = np.concatenate(batches).astype(np.float64)
    # the initial pseudo-count (1e-4 samples of mean 0, var 1) is negligible
    np.testing.assert_allclose(np.asarray(stats.mean), data.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(stats.var), data.var(0), rtol=1e-4)
    assert float(stats.count) == np.float32(len(data) + 1e-4)


def test_leading_axes_are_flattened_and_normalize_clips():
    stats = normalize.update(normalize.init((2,)), jnp.ones((4, 5, 2)) * jnp.array([1.0, -1.0]))
    assert float(stats.count) > 19.9
    z = normalize.normalize(stats, jnp.array([1e6, -1e6]))
    np.testing.assert_array_equal(np.asarray(z), [10.0, -10.0])
