"""jaxrl.rl.optim against optax's own chain (clip_by_global_norm → scale_by_adam → −lr)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrl.rl import optim


def test_raveled_adam_equals_optax_chain_on_the_tree():
    keys = jax.random.split(jax.random.key(0), 4)
    params = {
        "dense": {"kernel": jax.random.normal(keys[0], (5, 3)), "bias": jnp.zeros(3)},
        "head": jax.random.normal(keys[1], (3,)),
    }
    lr, max_norm, eps = 3e-3, 0.5, 1e-5
    oracle = optax.chain(optax.clip_by_global_norm(max_norm), optax.scale_by_adam(eps=eps), optax.scale(-lr))
    ours_params, ours_state = params, optim.init(params, eps)
    ref_params, ref_state = params, oracle.init(params)
    for step in range(5):
        scale = 10.0 if step % 2 == 0 else 0.01  # clipped on even steps, not on odd ones
        key = jax.random.fold_in(keys[2], step)
        grads = jax.tree.map(lambda p: scale * jax.random.normal(key, p.shape), params)
        ours_params, ours_state, norm = optim.apply(ours_params, grads, ours_state, lr, max_norm, eps)
        updates, ref_state = oracle.update(grads, ref_state, ref_params)
        ref_params = optax.apply_updates(ref_params, updates)
        np.testing.assert_allclose(float(norm), float(optax.tree.norm(grads)), rtol=1e-6)
        for a, b in zip(jax.tree.leaves(ours_params), jax.tree.leaves(ref_params), strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)


def test_tree_all_finite_checks_every_element_of_every_leaf():
    tree = {"a": jnp.zeros((3, 2)), "b": (jnp.ones(4), jnp.float32(2.0)), "n": jnp.arange(3)}
    check = jax.jit(optim.tree_all_finite)
    assert bool(check(tree))
    leaves, treedef = jax.tree.flatten(tree)
    for i, leaf in enumerate(leaves):
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            continue
        for j in range(leaf.size):
            for bad in (jnp.nan, jnp.inf, -jnp.inf):
                broken = leaves[:i] + [leaf.ravel().at[j].set(bad).reshape(leaf.shape)] + leaves[i + 1 :]
                assert not bool(check(jax.tree.unflatten(treedef, broken))), (i, j, bad)
    assert bool(optim.tree_all_finite({}))
