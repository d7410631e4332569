"""The prioritized-replay sum-tree against numpy: sequential last-wins updates,
``searchsorted`` over the cumulative sum, sampling frequencies and strata, weights."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.rl import prioritized as per


def rebuild(p: np.ndarray) -> np.ndarray:
    """The full float32 tree over priorities ``p``, built bottom-up (the oracle)."""
    leaves = 1 << (len(p) - 1).bit_length()
    nodes = np.zeros(2 * leaves, np.float32)
    nodes[leaves : leaves + len(p)] = p
    for i in range(leaves - 1, 0, -1):
        nodes[i] = nodes[2 * i] + nodes[2 * i + 1]
    return nodes


def tree_of(p: np.ndarray) -> per.SumTree:
    return per.SumTree(jnp.asarray(rebuild(np.asarray(p, np.float32))), len(p))


def check_consistent(tree: per.SumTree, p: np.ndarray) -> None:
    nodes, leaves = np.asarray(tree.nodes), tree.leaves
    np.testing.assert_array_equal(np.asarray(per.priorities(tree)), p.astype(np.float32))
    assert nodes[0] == 0 and not nodes[leaves + len(p) :].any()  # unused slot, padding leaves
    internal = np.arange(1, leaves)
    np.testing.assert_allclose(nodes[internal], nodes[2 * internal] + nodes[2 * internal + 1], rtol=1e-6)
    np.testing.assert_allclose(float(per.total(tree)), p.astype(np.float64).sum(), rtol=1e-5)


@pytest.mark.parametrize("capacity", [37, 1, 5])
def test_update_is_sequential_last_wins(capacity):
    rng = np.random.default_rng(capacity)
    tree, p = per.init(capacity), np.zeros(capacity, np.float32)
    assert tree.leaves == 1 << (capacity - 1).bit_length() and tree.nodes.shape == (2 * tree.leaves,)
    update = jax.jit(per.update)
    for _ in range(30):
        k = int(rng.choice([1, 7, 3 * capacity + 1]))  # few shapes, few compilations
        index = rng.integers(0, capacity, k).astype(np.int32)  # duplicates whenever k > capacity
        value = rng.uniform(0.0, 3.0, k).astype(np.float32)
        value[rng.random(k) < 0.3] = 0.0
        for i, v in zip(index, value, strict=True):  # numpy: one at a time, the last write wins
            p[i] = v
        tree = update(tree, index, value)
        check_consistent(tree, p)
    assert (p > 0).any() and (p == 0).any() or capacity == 1


def test_update_duplicates_many_in_one_call():
    # 64 writes to 5 slots in one call: only an explicit last-wins rule gets every slot right
    rng = np.random.default_rng(1)
    index = rng.integers(0, 5, 64).astype(np.int32)
    value = rng.uniform(0.5, 2.0, 64).astype(np.float32)
    last = {int(i): v for i, v in zip(index, value, strict=True)}
    tree = jax.jit(per.update)(per.init(5), index, value)
    np.testing.assert_array_equal(np.asarray(per.priorities(tree)), [last.get(i, 0.0) for i in range(5)])


def zeros_profile(n: int, seed: int) -> np.ndarray:
    p = np.random.default_rng(seed).uniform(0.1, 2.0, n).astype(np.float32)
    p[:3] = p[-4:] = p[10:13] = p[20] = 0.0  # leading, trailing and interior zeros
    return p


def test_find_is_searchsorted_and_skips_zeros():
    p = zeros_profile(37, 0)
    tree = tree_of(p)
    c = np.cumsum(p.astype(np.float64))
    mass = np.linspace(0.0, c[-1], 20001)[:-1]
    edges = np.concatenate([[0.0], c])
    mass = mass[np.abs(mass[:, None] - edges[None, :]).min(1) > 1e-4 * c[-1]]  # away from interval edges
    assert len(mass) > 15000
    got = np.asarray(jax.jit(per.find)(tree, jnp.asarray(mass, jnp.float32)))
    np.testing.assert_array_equal(got, np.searchsorted(c, mass, side="right"))
    assert set(np.unique(got)) == set(np.flatnonzero(p))  # every positive slot is reached

    # integer priorities sum exactly in float32: masses on the interval edges themselves follow side="right"
    k = np.round(p * 4).astype(np.float32)
    mass = np.arange(0, k.sum(), 0.5)
    got = np.asarray(jax.jit(per.find)(tree_of(k), jnp.asarray(mass, jnp.float32)))
    np.testing.assert_array_equal(got, np.searchsorted(np.cumsum(k), mass, side="right"))

    t = np.float32(per.total(tree))
    edge = np.array([t, np.nextafter(t, 0), t * np.float32(1 - 1e-7), 2 * t, 1e30, -1.0, 0.0], np.float32)
    edge = np.concatenate([edge, np.float32(c[:-1]), np.random.default_rng(0).uniform(0, t, 5000).astype(np.float32)])
    got = np.asarray(jax.jit(per.find)(tree, jnp.asarray(edge)))
    assert (p[got] > 0).all()
    assert got[3] == got[4] == np.flatnonzero(p)[-1]  # past the total: the last positive slot
    assert got[5] == got[6] == np.flatnonzero(p)[0]  # at or below 0: the first positive slot


def test_find_never_returns_zero_slots_under_rounding():
    # many trees with wide-ranging priorities and zero tails; masses at and just below the float32 total
    rng = np.random.default_rng(2)
    find = jax.jit(per.find)
    for trial in range(40):
        n = 300  # one shape; the zero tail below varies where the filled range ends
        p = (10.0 ** rng.uniform(-6, 3, n)).astype(np.float32)
        p[rng.random(n) < 0.3] = 0.0
        p[int(rng.integers(0, n)) :] = 0.0
        p[0] = max(p[0], 1e-3)
        tree = tree_of(p)
        t = np.float32(per.total(tree))
        below = np.nextafter(t, np.float32(0))
        mass = np.array([t, below, np.nextafter(below, np.float32(0)), t * np.float32(1 - 1e-6)], np.float32)
        got = np.asarray(find(tree, jnp.asarray(np.concatenate([mass, rng.uniform(0, t, 200).astype(np.float32)]))))
        assert (p[got] > 0).all(), trial


def test_sample_frequencies_strata_and_probs():
    p = np.array([1.0, 0.0, 3.0, 0.5, 2.0, 0.25, 4.0, 1.0, 0.0, 2.25], np.float32)
    tree = tree_of(p)
    draw = jax.jit(jax.vmap(functools.partial(per.sample, batch_size=100), in_axes=(None, 0)))
    index, probs = draw(tree, jax.random.split(jax.random.key(0), 2000))  # 200k draws
    index, probs = np.asarray(index).ravel(), np.asarray(probs).ravel()
    freq = np.bincount(index, minlength=len(p)) / index.size
    assert np.abs(freq - p / p.sum()).max() < 0.003
    assert freq[p == 0].sum() == 0
    np.testing.assert_allclose(probs, p[index] / p.sum(), rtol=1e-5)

    # strata: with B draws, draw i falls in segment [i, i+1)·total/B, so its slot's interval meets it
    q = np.random.default_rng(3).uniform(0.0, 1.0, 1000).astype(np.float32)
    tree, c = tree_of(q), np.cumsum(q.astype(np.float64))
    batch = 8
    segment = np.arange(batch) * c[-1] / batch
    sample = jax.jit(jax.vmap(functools.partial(per.sample, batch_size=batch), in_axes=(None, 0)))
    for index in np.asarray(sample(tree, jax.random.split(jax.random.key(1), 50))[0]):
        lo, hi = c[index] - q[index], c[index]
        assert ((lo < segment + c[-1] / batch) & (hi > segment)).all()


def test_importance_weights_and_priority():
    rng = np.random.default_rng(4)
    probs = rng.uniform(1e-4, 1e-2, 64).astype(np.float32)
    for size, beta in [(500, 0.4), (1000, 1.0), (7, 0.0)]:
        w = np.asarray(jax.jit(per.importance_weights)(probs, jnp.int32(size), jnp.float32(beta)))
        expect = (size * probs.astype(np.float64)) ** -beta
        np.testing.assert_allclose(w, expect / expect.max(), rtol=1e-5)
        assert w.max() == 1.0
    w = np.asarray(per.importance_weights(np.array([0.0, 0.5, 0.5], np.float32), 3, 0.6))
    assert np.isfinite(w).all() and w.max() == 1.0

    x = rng.normal(size=32).astype(np.float32)
    np.testing.assert_allclose(np.asarray(per.priority(x, 0.6)), (np.abs(x) + 1e-6) ** 0.6, rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(per.priority(x, 0.0)), np.ones(32))


def test_vmap_over_seeds_equals_one_at_a_time():
    rng = np.random.default_rng(5)
    trees = [per.init(37) for _ in range(3)]
    stacked = jax.tree.map(lambda *x: jnp.stack(x), *trees)
    update, sample = jax.jit(per.update), jax.jit(per.sample, static_argnums=2)
    vupdate, vsample = (
        jax.jit(jax.vmap(per.update)),
        jax.jit(jax.vmap(per.sample, in_axes=(0, 0, None)), static_argnums=2),
    )
    for step in range(4):
        index = rng.integers(0, 37, (3, 50)).astype(np.int32)
        value = rng.uniform(0.0, 2.0, (3, 50)).astype(np.float32)
        trees = [update(t, i, v) for t, i, v in zip(trees, index, value, strict=True)]
        stacked = vupdate(stacked, index, value)
        keys = jax.random.split(jax.random.key(step), 3)
        one = [sample(t, k, 16) for t, k in zip(trees, keys, strict=True)]
        many = vsample(stacked, keys, 16)
        for s in range(3):
            np.testing.assert_array_equal(np.asarray(stacked.nodes[s]), np.asarray(trees[s].nodes))
            np.testing.assert_array_equal(np.asarray(many[0][s]), np.asarray(one[s][0]))
            np.testing.assert_array_equal(np.asarray(many[1][s]), np.asarray(one[s][1]))
    assert stacked.capacity == 37 and stacked.nodes.shape == (3, 128)


def test_update_touches_only_ancestors_on_a_big_tree():
    capacity = 2**16
    rng = np.random.default_rng(6)
    p = rng.uniform(0.0, 1.0, capacity).astype(np.float32)
    nodes = rebuild(p)
    # a deliberately wrong internal node off every updated path: a full O(L) rebuild would
    # repair it, an O(K log L) update leaves it as it is
    poisoned = (capacity + 4 * capacity // 8) >> 3
    nodes[poisoned] = -123.0
    index = np.array([5, 40000, 5, capacity - 1], np.int32)
    value = np.array([7.0, 0.0, 2.5, 3.0], np.float32)
    tree = jax.jit(per.update)(per.SumTree(jnp.asarray(nodes), capacity), index, value)
    p[5], p[40000], p[capacity - 1] = 2.5, 0.0, 3.0  # last wins for slot 5
    expect = rebuild(p)
    expect[poisoned] = -123.0
    touched = np.unique(np.concatenate([(index + capacity) >> k for k in range(17)]))
    got = np.asarray(tree.nodes)
    np.testing.assert_array_equal(got[capacity:], p)
    np.testing.assert_allclose(got[touched], expect[touched], rtol=1e-6)
    others = np.setdiff1d(np.arange(2 * capacity), touched)
    np.testing.assert_array_equal(got[others], nodes[others])  # untouched nodes keep their bits
    assert got[poisoned] == -123.0
