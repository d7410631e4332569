"""jaxrl.perf.shuffle.permutation: a permutation for every size, and as well
spread as jax.random.permutation by χ² tests of positions and of pairs."""

import jax
import numpy as np
import pytest
from scipy import stats

from jaxrl.perf.shuffle import permutation

KEYS = jax.random.split(jax.random.key(11), 4000)


def _many(n, rounds=None, fn=None):
    fn = fn or (lambda k: permutation(k, n, rounds))
    return np.asarray(jax.jit(jax.vmap(fn))(KEYS))


def _groups(n, bins):
    bins = min(bins, n)
    group = np.minimum(np.arange(n) * bins // n, bins - 1)
    return group, np.bincount(group)


def position_p(perms, n, bins=12):
    """χ² p-value of (element group, position group) counts vs independence."""
    group, sizes = _groups(n, bins)
    counts = np.zeros((sizes.size, sizes.size))
    np.add.at(counts, (group[perms], np.broadcast_to(group, perms.shape)), 1)
    return stats.chisquare(counts.ravel(), (len(perms) * np.outer(sizes, sizes) / n).ravel()).pvalue


def pair_p(perms, n, bins=6):
    """χ² p-value of the groups of the first two entries vs drawing without replacement."""
    group, sizes = _groups(n, bins)
    counts = np.zeros((sizes.size, sizes.size))
    np.add.at(counts, (group[perms[:, 0]], group[perms[:, 1]]), 1)
    expected = np.outer(sizes, sizes).astype(float) - np.diag(sizes)
    keep = expected > 0
    return stats.chisquare(counts[keep], len(perms) * expected[keep] / expected.sum()).pvalue


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 31, 64, 100, 511, 512, 513, 1000, 4096, 5000])
def test_is_a_permutation(n):
    p = np.asarray(jax.jit(permutation, static_argnums=1)(jax.random.key(3), n))
    assert p.dtype == np.int32 and p.shape == (n,)
    np.testing.assert_array_equal(np.sort(p), np.arange(n))


def test_deterministic_per_key_and_differs_across_keys():
    a, b = permutation(jax.random.key(0), 512), permutation(jax.random.key(0), 512)
    np.testing.assert_array_equal(a, b)
    perms = _many(512)[:50]
    assert len({p.tobytes() for p in perms}) == 50
    # consecutive keys (one per epoch) give unrelated orders
    assert abs(np.corrcoef(perms[:-1].ravel(), perms[1:].ravel())[0, 1]) < 0.02


@pytest.mark.parametrize("n", [3, 5, 12, 100, 512, 1000])
def test_spread_like_jax_random_permutation(n):
    ours = _many(n)
    oracle = _many(n, fn=lambda k: jax.random.permutation(k, n))
    # the oracle passes the same tests (so they are fair), and so do we
    for perms in (oracle, ours):
        assert position_p(perms, n) > 1e-4
        assert pair_p(perms, n) > 1e-4


@pytest.mark.parametrize("n", [5, 100])
def test_the_spread_tests_catch_a_weak_shuffle(n):
    """Two Feistel rounds are too few: the same tests reject them."""
    weak = _many(n, rounds=2)
    assert min(position_p(weak, n), pair_p(weak, n)) < 1e-6


def test_rejects_negative_size():
    with pytest.raises(ValueError, match="≥ 0"):
        permutation(jax.random.key(0), -1)
