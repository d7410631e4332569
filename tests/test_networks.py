"""jaxrl.networks: the Dense product with its XLA:CPU-friendly backward against
``lax.dot_general``'s own values and gradients."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import networks
from jaxrl.networks import MLP, ActorCritic, dense_dot_general


def _dims(x):
    return (((x.ndim - 1,), (0,)), ((), ()))


@pytest.mark.parametrize("lead", [(), (7,), (3, 5)])
@pytest.mark.parametrize("out", [1, 4])
def test_dense_dot_general_values_and_gradients_equal_lax(lead, out):
    kx, kw, kg = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (*lead, 6))
    w = jax.random.normal(kw, (6, out))
    cot = jax.random.normal(kg, (*lead, out))

    def loss(fn, x, w):
        return jnp.sum(jnp.tanh(fn(x, w, _dims(x))) * cot)

    ours = jax.jit(jax.value_and_grad(lambda x, w: loss(dense_dot_general, x, w), argnums=(0, 1)))(x, w)
    ref = jax.value_and_grad(lambda x, w: loss(jax.lax.dot_general, x, w), argnums=(0, 1))(x, w)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(ref), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_dense_dot_general_under_vmap_matches_per_member_gradients():
    kx, kw = jax.random.split(jax.random.key(1))
    xs = jax.random.normal(kx, (3, 10, 4))  # 3 members × batch 10
    ws = jax.random.normal(kw, (3, 4, 5))

    def grad_of(fn):
        return jax.grad(lambda x, w: jnp.sum(jnp.sin(fn(x, w, _dims(x)))), argnums=1)

    ours = jax.jit(jax.vmap(grad_of(dense_dot_general)))(xs, ws)
    ref = np.stack([np.asarray(grad_of(jax.lax.dot_general)(x, w)) for x, w in zip(xs, ws, strict=True)])
    np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-5, atol=1e-6)


def test_switching_the_backward_off_changes_nothing_but_the_program(monkeypatch):
    net = ActorCritic(action_dim=2, discrete=True)
    obs = jax.random.normal(jax.random.key(2), (16, 4))
    params = net.init(jax.random.key(3), obs)

    def grads():
        return jax.grad(lambda p: sum(jnp.sum(o**2) for o in net.apply(p, obs)))(params)

    ours = jax.jit(grads)()
    monkeypatch.setattr(networks, "TRANSPOSED_BACKWARD", False)
    ref = jax.jit(grads)()
    assert jax.tree.structure(ours) == jax.tree.structure(ref)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(ref), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_parameter_names_are_flax_dense_names():
    """Checkpoints keep their layout: the layers are plain ``nn.Dense``."""
    params = MLP((8, 8)).init(jax.random.key(0), jnp.zeros((1, 3)))
    assert set(params["params"]) == {"Dense_0", "Dense_1"}
    assert set(params["params"]["Dense_0"]) == {"kernel", "bias"}
    assert all(isinstance(m, nn.Dense) for m in [networks._dense(4, 1.0)])
