"""jaxrl.nets: the Dense product with its XLA:CPU-friendly backward against
``lax.dot_general``'s own values and gradients."""

import flax.linen as nn
import jax
import jax.extend.core
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.nets import networks
from jaxrl.nets.networks import MLP, ActorCritic
from jaxrl.perf import dense as dense_kernels
from jaxrl.perf.dense import dense_dot_general


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


@pytest.mark.parametrize("out", [1, 5])
def test_dense_dot_general_under_vmap_matches_per_member_gradients(out):
    kx, kw = jax.random.split(jax.random.key(1))
    xs = jax.random.normal(kx, (3, 10, 4))  # 3 members × batch 10
    ws = jax.random.normal(kw, (3, 4, out))

    def grad_of(fn):
        return jax.grad(lambda x, w: jnp.sum(jnp.sin(fn(x, w, _dims(x)))), argnums=1)

    ours = jax.jit(jax.vmap(grad_of(dense_dot_general)))(xs, ws)
    ref = np.stack([np.asarray(grad_of(jax.lax.dot_general)(x, w)) for x, w in zip(xs, ws, strict=True)])
    np.testing.assert_allclose(np.asarray(ours), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("features", [1, 2, 8, 9])
@pytest.mark.parametrize("out", [2, 64])
@pytest.mark.parametrize("axes", [(0, 0), (0, None), (None, 0)])
@pytest.mark.parametrize("members", [1, 3])
def test_small_products_under_vmap_match_float64_per_member(features, out, axes, members):
    """Under vmap a product over ≤ SMALL_CONTRACTION features (the first layer
    on a small observation, a few-action head's ∂x) is computed as
    multiply-adds: values and both gradients per member against float64."""
    kx, kw, kg = jax.random.split(jax.random.key(4), 3)
    xs = jax.random.normal(kx, (members, 2, 5, features))  # members × [2, 5] rows
    ws = jax.random.normal(kw, (members, features, out))
    cot = jax.random.normal(kg, (members, 2, 5, out))
    x_in = xs if axes[0] == 0 else xs[0]
    w_in = ws if axes[1] == 0 else ws[0]

    def loss(x, w, c):
        return jnp.sum(jnp.tanh(dense_dot_general(x, w, _dims(x))) * c)

    value, (gx, gw) = jax.jit(jax.vmap(jax.value_and_grad(loss, argnums=(0, 1)), in_axes=(*axes, 0)))(x_in, w_in, cot)
    for m in range(members):
        x = np.asarray(xs[m if axes[0] == 0 else 0], np.float64)
        w = np.asarray(ws[m if axes[1] == 0 else 0], np.float64)
        c = np.asarray(cot[m], np.float64)
        y = np.tanh(x @ w)
        dy = c * (1.0 - y**2)
        np.testing.assert_allclose(float(value[m]), np.sum(y * c), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(gx[m]), dy @ w.T, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(
            np.asarray(gw[m]), x.reshape(-1, features).T @ dy.reshape(-1, out), rtol=1e-4, atol=1e-5
        )


# jax ≥ 0.10 moved it to jax.extend.core (and 0.11 removed the old name)
_jaxprs_in_params = getattr(jax.extend.core, "jaxprs_in_params", None) or jax.core.jaxprs_in_params


def _eqns(jaxpr):
    """Every equation of ``jaxpr``, those of nested jaxprs included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in _jaxprs_in_params(eqn.params):
            yield from _eqns(sub)


def _batched_dots(jaxpr):
    """(contracted size, has batch dims) of every dot_general in ``jaxpr``, nested included."""
    found = []
    for eqn in _eqns(jaxpr):
        if eqn.primitive.name == "dot_general":
            (contract, _), (batch, _) = eqn.params["dimension_numbers"]
            size = int(np.prod([eqn.invars[0].aval.shape[d] for d in contract]))
            found.append((size, bool(batch)))
    return found


def test_vmapped_network_has_no_batched_dot_over_a_few_features():
    """The reason for the multiply-adds: XLA:CPU's batched dot over 2–8
    features costs as much as a 64-wide layer. The vmapped forward and
    backward of an actor-critic on a 4-feature observation with 2 actions
    must contain none (the first layer and the policy head's ∂x are the ones)."""
    net = ActorCritic(action_dim=2, discrete=True, perf=True)
    obs = jax.random.normal(jax.random.key(5), (4, 16, 4))
    params = jax.vmap(net.init)(jax.random.split(jax.random.key(6), 4), obs)

    def loss(p, o):
        logits, value = net.apply(p, o)
        return jnp.sum(logits**2) + jnp.sum(value**2)

    jaxpr = jax.make_jaxpr(jax.vmap(jax.grad(loss)))(params, obs).jaxpr
    dots = _batched_dots(jaxpr)
    assert dense_kernels.SMALL_CONTRACTION >= 4
    assert dots and not [d for d in dots if d[1] and d[0] <= 4]
    assert [d for d in dots if d[1] and d[0] == 64]  # the 64-wide layers stay batched dots


@pytest.mark.parametrize("members", [None, 3])
def test_one_output_kernel_gradient_is_a_column_sum_not_a_product(members):
    """A one-output head's ∂W is ``Σ_b x_b g_b``: XLA:CPU runs it as a
    matrix-vector loop that re-evaluates the cotangent's producers per kernel
    row, so the backward must contain no product with one output column
    (the 64-wide ∂x and ∂W products stay)."""
    head = networks.dense(1, 1.0, perf=True)
    x = jax.random.normal(jax.random.key(7), (16, 64))
    params = head.init(jax.random.key(8), x)

    def grad(p, x):
        return jax.grad(lambda p: jnp.sum(jnp.exp(head.apply(p, x))))(p)

    if members is not None:
        params = jax.tree.map(lambda a: jnp.stack([a] * members), params)
        x = jnp.stack([x] * members)
        grad = jax.vmap(grad)
    jaxpr = jax.make_jaxpr(grad)(params, x).jaxpr
    outs = [eqn.outvars[0].aval.shape for eqn in _eqns(jaxpr) if eqn.primitive.name == "dot_general"]
    assert outs  # the forward product and ∂x
    assert not [s for s in outs if s[-2:] == (64, 1)], outs


def test_the_kernels_change_nothing_but_the_program():
    """The same parameters give the same gradients through jaxrl's XLA:CPU
    product (``perf=True``), through ``lax.dot_general`` itself (the library
    default, ``perf=False``) and through the plain backward layout
    (:func:`jaxrl.perf.dense.make_dot_general`)."""
    net = ActorCritic(action_dim=2, discrete=True, perf=True)
    obs = jax.random.normal(jax.random.key(2), (16, 4))
    params = net.init(jax.random.key(3), obs)

    def grads(module):
        return jax.jit(jax.grad(lambda p: sum(jnp.sum(o**2) for o in module.apply(p, obs))))(params)

    ours, plain = grads(net), grads(net.clone(perf=False))
    x, w = obs, params["params"]["actor_torso"]["Dense_0"]["kernel"]
    untransposed = jax.grad(lambda w: jnp.sum(dense_kernels.make_dot_general(False)(x, w, _dims(x)) ** 2))(w)
    transposed = jax.grad(lambda w: jnp.sum(dense_dot_general(x, w, _dims(x)) ** 2))(w)
    np.testing.assert_allclose(np.asarray(untransposed), np.asarray(transposed), rtol=1e-5, atol=1e-6)
    assert jax.tree.structure(ours) == jax.tree.structure(plain)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(plain), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def test_library_networks_are_plain_flax_by_default():
    """Built outside make_train, a network is plain flax: forward-mode
    autodiff (which jaxrl's custom-VJP product does not have) goes through it."""
    net = ActorCritic(action_dim=2, discrete=True)
    obs = jnp.ones((3, 4))
    params = net.init(jax.random.key(0), obs)
    tangent = jax.tree.map(jnp.ones_like, params)
    _, out = jax.jvp(lambda p: net.apply(p, obs)[1], (params,), (tangent,))
    assert out.shape == (3,)
    with pytest.raises(TypeError):  # the XLA:CPU product has no JVP rule
        jax.jvp(lambda p: net.clone(perf=True).apply(p, obs)[1], (params,), (tangent,))


def test_parameter_names_are_flax_dense_names():
    """Checkpoints keep their layout: the layers are plain ``nn.Dense``."""
    params = MLP((8, 8)).init(jax.random.key(0), jnp.zeros((1, 3)))
    assert set(params["params"]) == {"Dense_0", "Dense_1"}
    assert set(params["params"]["Dense_0"]) == {"kernel", "bias"}
    assert all(isinstance(m, nn.Dense) for m in [networks.dense(4, 1.0)])


def _kernels(params):
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    return {jax.tree_util.keystr(p): x for p, x in flat if p[-1].key == "kernel"}


@pytest.mark.parametrize("which", ["actor_critic", "sac"])
def test_init_params_has_module_inits_structure_constants_and_orthogonal_kernels(which):
    from jaxrl.algos.sac import Actor
    from jaxrl.nets import TwinCritic

    obs = jnp.zeros((1, 3))
    if which == "actor_critic":
        calls = [(ActorCritic(2, discrete=False, hidden_sizes=(16, 16), log_std_init=-0.5), obs)]
    else:
        calls = [(Actor(2, (16, 16)), obs), (TwinCritic((16, 16)), obs, jnp.zeros((1, 2)))]
    ours = dense_kernels.init_many(jax.random.key(0), *calls)
    for params, (module, *example) in zip(ours, calls, strict=True):
        ref = module.init(jax.random.key(0), *example)
        assert jax.tree.structure(params) == jax.tree.structure(ref)
        for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(ref), strict=True):
            assert a.shape == b.shape and a.dtype == b.dtype
        for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
            name = path[-1].key
            if name == "bias":
                assert np.all(np.asarray(leaf) == 0.0)
            if name == "log_std":
                np.testing.assert_array_equal(leaf, np.full((2,), -0.5, np.float32))
        head_gain = 1.0 if isinstance(module, TwinCritic) else 0.01  # SAC heads; ActorCritic's by name
        for name, k in _kernels(params).items():
            if "MLP" in name or "torso" in name:
                gain = np.sqrt(2.0)
            elif "value_head" in name:
                gain = 1.0
            else:
                gain = 0.01 if "policy_head" in name else head_gain
            k = np.asarray(k, np.float64)
            gram = k.T @ k if k.shape[0] >= k.shape[1] else k @ k.T
            np.testing.assert_allclose(gram, gain**2 * np.eye(len(gram)), atol=1e-5 * gain**2, err_msg=name)
    # the two twin critics' equal-shaped kernels come from one batched QR: distinct draws
    if which == "sac":
        k = _kernels(ours[1])
        first, second = k["['params']['MLP_0']['Dense_1']['kernel']"], k["['params']['MLP_1']['Dense_1']['kernel']"]
        assert abs(np.corrcoef(np.ravel(first), np.ravel(second))[0, 1]) < 0.3  # ≈ 5σ for 256 entries


@pytest.mark.parametrize("shape", [(3, 2), (2, 5)])
def test_init_params_kernels_have_flax_orthogonal_distribution(shape):
    """Entry by entry, 4000 draws against flax's own orthogonal initializer
    (two-sample Kolmogorov–Smirnov) — catches a missing sign fix of ``Q``."""
    from scipy import stats

    class Two(nn.Module):
        @nn.compact
        def __call__(self, x):
            return networks.dense(shape[1], 1.0)(x) + networks.dense(shape[1], 1.0)(x)

    keys = jax.random.split(jax.random.key(7), 4000)
    x = jnp.zeros((1, shape[0]))
    ours = jax.jit(jax.vmap(lambda k: dense_kernels.init_params(Two(), k, x)))(keys)
    ours = np.stack([np.asarray(k) for k in _kernels(ours).values()])  # [2, 4000, *shape]
    ref = np.asarray(jax.jit(jax.vmap(lambda k: nn.initializers.orthogonal(1.0)(k, shape)))(keys))
    for layer in ours:
        for i in range(shape[0]):
            for j in range(shape[1]):
                assert stats.ks_2samp(layer[:, i, j], ref[:, i, j]).pvalue > 1e-4, (i, j)
    assert np.all(np.abs(ours.mean(axis=1)) < 0.05)  # unbiased signs
    np.testing.assert_array_less(np.abs(ours[0] - ours[1]).max(axis=(1, 2)), np.inf)
    assert np.min(np.abs(ours[0] - ours[1]).max(axis=(1, 2))) > 1e-3  # the two layers differ
