"""Recurrent torsos: the sequence pass equals the step-by-step one, the LRU's
associative scan equals its sequential form, the CNN equals a lax.conv reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.nets import CNN, GRU, LRU, RecurrentActorCritic, linear_recurrence
from jaxrl.nets.networks import init


@pytest.mark.parametrize("core", [GRU(8, (16,)), LRU(8, (16,))], ids=["gru", "lru"])
def test_sequence_equals_steps_with_resets(core):
    net = RecurrentActorCritic(3, True, core, 16)
    carry0 = jax.random.normal(jax.random.key(3), (4, core.carry_size))
    params = init(net, jax.random.key(0), net.initialize_carry((4,)), jnp.zeros((4, 5)), jnp.zeros((4,), bool))
    obs = jax.random.normal(jax.random.key(1), (6, 4, 5))
    reset = jax.random.bernoulli(jax.random.key(2), 0.3, (6, 4))
    last, features = jax.jit(lambda p: net.apply(p, carry0, obs, reset, method="sequence"))(params)
    carry, steps = carry0, []
    for t in range(6):  # a plain loop, the carry zeroed by hand where an episode begins
        carry = jnp.where(reset[t][:, None], 0.0, carry)
        carry, f = net.apply(params, carry, obs[t], None, method="step")
        steps.append(f)
    np.testing.assert_allclose(np.stack(steps), features, atol=1e-5)
    np.testing.assert_allclose(carry, last, atol=1e-5)


def test_associative_scan_equals_sequential_under_jit_and_vmap():
    key = jax.random.split(jax.random.key(0), 3)
    a = jnp.exp(-jax.random.uniform(key[0], (3, 50, 7)) + 1j * jax.random.uniform(key[1], (3, 50, 7)))
    a = a * (jax.random.uniform(key[2], (3, 50, 7)) > 0.1)  # resets
    b = jax.random.normal(key[0], (3, 50, 7)) + 0j
    h0 = jnp.ones((3, 7), jnp.complex64)
    assoc = jax.jit(jax.vmap(lambda a, b, h: linear_recurrence(a, b, h, "associative")))(a, b, h0)
    seq = jax.jit(jax.vmap(lambda a, b, h: linear_recurrence(a, b, h, "scan")))(a, b, h0)
    loop = []
    for m in range(3):
        h = np.asarray(h0[m], np.complex128)
        for t in range(50):
            h = np.asarray(a[m, t]) * h + np.asarray(b[m, t])
        loop.append(h)
    np.testing.assert_allclose(assoc[0], seq[0], atol=1e-5)
    np.testing.assert_allclose(assoc[1], seq[1], atol=1e-5)
    np.testing.assert_allclose(assoc[0], np.stack(loop), atol=1e-4)


def test_cnn_equals_lax_conv_reference():
    cnn = CNN((8, 4), (3, 2), (1, 2), (16,), "relu", perf=False)
    x = jax.random.normal(jax.random.key(0), (2, 3, 10, 10, 4))
    params = init(cnn, jax.random.key(1), x[0], perf=False)
    p = params["params"]
    h = x.reshape(6, 10, 10, 4)
    for i, stride in enumerate((1, 2)):
        conv = p[f"Conv_{i}"]
        h = jax.lax.conv_general_dilated(
            h, conv["kernel"], (stride, stride), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        h = jax.nn.relu(h + conv["bias"])
    h = jax.nn.relu(h.reshape(6, -1) @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"]).reshape(2, 3, 16)
    np.testing.assert_allclose(cnn.apply(params, x), h, atol=1e-5)


def test_patch_conv_equals_lax_conv_with_gradients_under_vmap():
    cnn_perf = CNN((8, 4), (3, 2), (1, 2), (16,), "relu", perf=True)
    cnn_plain = cnn_perf.clone(perf=False)
    x = jax.random.normal(jax.random.key(0), (3, 5, 10, 10, 4))  # 3 members
    params = jax.vmap(lambda k: init(cnn_plain, k, x[0], perf=False))(jax.random.split(jax.random.key(1), 3))

    def loss(cnn, p, x):
        return jnp.sum(jnp.sin(cnn.apply(p, x)))

    for fn in (
        lambda c: jax.vmap(lambda p, x: loss(c, p, x)),
        lambda c: jax.vmap(jax.grad(lambda p, x: loss(c, p, x))),
    ):
        got, want = jax.jit(fn(cnn_perf))(params, x), jax.jit(fn(cnn_plain))(params, x)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
