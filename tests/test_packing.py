"""jaxrl.perf.packing.scan against jax.lax.scan (the oracle) on mixed-dtype pytrees."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.perf import packing


def _body(carry, x):
    count, (pos, vel), done, key_data = carry
    pos = pos + 0.1 * vel + x["push"]
    vel = jnp.where(done[:, None], 0.0, vel * 0.9)
    count = count + 1
    done = jnp.abs(pos[:, 0]) > 0.3
    out = {"pos": pos, "done": done, "count": count, "sum": jnp.sum(pos), "k": key_data[0]}
    return (count, (pos, vel), done, key_data + np.uint32(1)), out


def _init():
    return (
        jnp.int32(0),
        (jnp.zeros((3, 2), jnp.float32), jnp.ones((3, 2), jnp.float32)),
        jnp.zeros((3,), jnp.bool_),
        jnp.arange(2, dtype=jnp.uint32),
    )


def _xs(steps=9):
    return {"push": jax.random.normal(jax.random.key(0), (steps, 3, 2))}


def _assert_same(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_scan_equals_lax_scan():
    want = jax.jit(lambda i, xs: jax.lax.scan(_body, i, xs))(_init(), _xs())
    got = jax.jit(lambda i, xs: packing.scan(_body, i, xs))(_init(), _xs())
    _assert_same(got, want)


def test_scan_under_vmap_and_with_length_only():
    inits = jax.tree.map(lambda x: jnp.stack([x, x]), _init())
    xs = jax.tree.map(lambda x: jnp.stack([x, -x]), _xs())
    want = jax.jit(jax.vmap(lambda i, x: jax.lax.scan(_body, i, x)))(inits, xs)
    got = jax.jit(jax.vmap(lambda i, x: packing.scan(_body, i, x)))(inits, xs)
    _assert_same(got, want)

    def count(c, _):
        return c + 1, c * 2

    _assert_same(packing.scan(count, jnp.int32(3), length=4), jax.lax.scan(count, jnp.int32(3), length=4))


def test_pack_then_unpack_round_trips_and_groups_by_dtype():
    tree = {"a": jnp.ones((2, 3)), "b": jnp.arange(4), "c": jnp.zeros((), jnp.float32), "d": jnp.array([True])}
    arrays, spec = packing.pack(tree)
    assert [a.dtype for a in arrays] == [jnp.float32, jnp.int32, jnp.bool_]
    assert [a.shape for a in arrays] == [(7,), (4,), (1,)]
    _assert_same(packing.unpack(arrays, spec), tree)


def test_carry_must_keep_its_dtypes():
    with pytest.raises(TypeError, match="same structure and dtypes"):
        packing.scan(lambda c, _: (c.astype(jnp.float32), None), jnp.int32(0), length=2)


def _env_body(carry, x):
    """Every carried and output leaf has the env axis first (like a rollout step)."""
    (pos, vel), steps, done = carry
    vel = jnp.where(done[:, None], 0.0, vel + x[:, None])
    pos = pos + vel
    steps = jnp.where(done, 0, steps + 1)
    done = jnp.abs(pos[:, 0]) > 1.0
    return ((pos, vel), steps, done), {"pos": pos, "steps": steps, "done": done, "x": x}


def _env_init(n=4):
    return (jnp.zeros((n, 3)), jnp.ones((n, 3)) * 0.1), jnp.zeros((n,), jnp.int32), jnp.zeros((n,), jnp.bool_)


def test_pack_keeps_a_first_axis_every_leaf_shares():
    arrays, spec = packing.pack(_env_init())
    assert [(a.dtype, a.shape) for a in arrays] == [(jnp.float32, (4, 6)), (jnp.int32, (4, 1)), (jnp.bool_, (4, 1))]
    _assert_same(packing.unpack(arrays, spec), _env_init())
    xs = jax.random.normal(jax.random.key(1), (7, 4))
    want = jax.jit(lambda i, x: jax.lax.scan(_env_body, i, x))(_env_init(), xs)
    _assert_same(jax.jit(lambda i, x: packing.scan(_env_body, i, x))(_env_init(), xs), want)
    inits = jax.tree.map(lambda a: jnp.stack([a, a]), _env_init())
    xs2 = jnp.stack([xs, -xs])
    want = jax.jit(jax.vmap(lambda i, x: jax.lax.scan(_env_body, i, x)))(inits, xs2)
    _assert_same(jax.jit(jax.vmap(lambda i, x: packing.scan(_env_body, i, x)))(inits, xs2), want)
