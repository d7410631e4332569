"""Rainbow's own pieces against independent oracles: the factorized noisy
layer against explicit per-row weight matrices built from its noise, and the
prioritized buffer's n-step window starts against a plain-Python account of
what was written when."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.algos import replay
from jaxrl.nets.networks import MLP, NoisyDense, QNetwork
from jaxrl.rl import prioritized

IN, OUT, KEYS = 5, 3, 4096


def _layer(seed: int = 0):
    layer = NoisyDense(OUT, std=0.5)
    params = layer.init(jax.random.key(seed), jnp.zeros((1, IN)))
    return layer, params


def _with(params, **leaves):
    inner = dict(params["params"])
    inner.update({k: jnp.asarray(v, jnp.float32) for k, v in leaves.items()})
    return {"params": inner}


def test_noisy_layer_initializes_as_fortunato_et_al():
    _, params = _layer()
    p = params["params"]
    bound = 1 / np.sqrt(IN)
    assert np.all(np.abs(np.asarray(p["mu_kernel"])) <= bound) and np.all(np.abs(np.asarray(p["mu_bias"])) <= bound)
    np.testing.assert_allclose(np.asarray(p["sigma_kernel"]), 0.5 * bound, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(p["sigma_bias"]), 0.5 * bound, rtol=1e-6)


def test_noisy_layer_without_noise_is_its_mean():
    layer, params = _layer()
    x = jax.random.normal(jax.random.key(1), (7, IN))
    p = params["params"]
    np.testing.assert_allclose(
        np.asarray(layer.apply(params, x)), np.asarray(x @ p["mu_kernel"] + p["mu_bias"]), rtol=1e-6, atol=1e-6
    )


def test_noisy_layer_is_a_factorized_noisy_weight_matrix():
    """Read each key's noise out of the layer by probing it with chosen
    parameters (the noise depends on the key, not on the input's values), then
    check the output on real parameters and a batch of inputs against
    ``x (μ_W + σ_W ⊙ ε_in ε_outᵀ) + μ_b + σ_b ⊙ ε_out`` in float64, one noise
    sample shared by the batch's rows; and the noise's law over many keys:
    ``f(e) = sgn(e) √|e|`` of standard normals, independent across keys."""
    layer, params = _layer()
    keys = jax.random.split(jax.random.key(11), KEYS)
    one = jnp.ones((1, IN))
    zeros_w, zeros_b = np.zeros((IN, OUT)), np.zeros(OUT)

    def probe(sigma_kernel, sigma_bias):
        zeroed = _with(params, mu_kernel=zeros_w, mu_bias=zeros_b, sigma_kernel=sigma_kernel, sigma_bias=sigma_bias)
        apply = jax.vmap(lambda k: layer.apply(zeroed, one, rngs={"noise": k})[0])
        return np.asarray(apply(keys), np.float64)  # [keys, out]

    eps_out = probe(zeros_w, np.ones(OUT))
    eps_in = np.empty((KEYS, IN))
    for j in range(IN):  # σ_W = e_j e_0ᵀ, x = 1: the output's column 0 is ε_in,j ε_out,0
        unit = np.zeros((IN, OUT))
        unit[j, 0] = 1.0
        eps_in[:, j] = probe(unit, zeros_b)[:, 0] / eps_out[:, 0]

    x = np.asarray(jax.random.normal(jax.random.key(2), (7, IN)), np.float64)
    p = {k: np.asarray(v, np.float64) for k, v in params["params"].items()}
    for i in range(0, KEYS, 409):
        got = np.asarray(layer.apply(params, jnp.asarray(x, jnp.float32), rngs={"noise": keys[i]}), np.float64)
        weights = p["mu_kernel"] + p["sigma_kernel"] * np.outer(eps_in[i], eps_out[i])
        expected = x @ weights + p["mu_bias"] + p["sigma_bias"] * eps_out[i]
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)

    # f(e) = sgn(e) √|e| with e ~ N(0, 1): mean 0, E[f²] = E|e| = √(2/π)
    for eps in (eps_in, eps_out):
        assert abs(eps.mean()) < 0.03
        np.testing.assert_allclose(np.mean(eps**2), np.sqrt(2 / np.pi), rtol=0.03)
    assert abs(np.corrcoef(eps_out[:-1, 0], eps_out[1:, 0])[0, 1]) < 0.05  # keys independent
    assert abs(np.corrcoef(eps_in[:, 0], eps_out[:, 0])[0, 1]) < 0.05  # ε_in and ε_out drawn apart


def test_noisy_q_network_draws_fresh_noise_per_key_and_has_noisy_heads_only():
    network = QNetwork(2, MLP((8,), "relu"), dueling=True, atoms=5, noise_std=0.5)
    params = network.init(jax.random.key(0), jnp.zeros((1, IN)))
    names = set(params["params"])
    assert {"advantage_head", "value_head", "q_torso"} <= names
    assert "sigma_kernel" in params["params"]["advantage_head"]
    assert "sigma_kernel" not in str(jax.tree_util.tree_structure(params["params"]["q_torso"]))
    x = jnp.ones((3, IN))
    mean = network.apply(params, x)
    a = network.apply(params, x, rngs={"noise": jax.random.key(1)})
    b = network.apply(params, x, rngs={"noise": jax.random.key(2)})
    assert a.shape == mean.shape == (3, 2, 5)
    assert not np.allclose(a, mean) and not np.allclose(a, b)
    np.testing.assert_array_equal(a, network.apply(params, x, rngs={"noise": jax.random.key(1)}))


def _starts_reference(writes: list[int], capacity: int, window: int) -> np.ndarray:
    """Which slots may start a window after ``writes`` (item counts, in order):
    slot of item t is t mod C; item t starts a window when it and the item
    ``window`` later are both written and t has not been overwritten."""
    total = sum(writes)
    valid = np.zeros(capacity, bool)
    for t in range(max(0, total - capacity), total - window):
        valid[t % capacity] = True
    return valid


@pytest.mark.parametrize("window", [0, 4, 8])
def test_prioritized_window_starts_match_a_plain_account(window):
    capacity = 24
    example = {"x": jnp.zeros(())}
    buffer = replay.prioritized_init(example, capacity)
    rng = np.random.default_rng(window)
    writes, counter = [], 0
    add = jax.jit(replay.prioritized_add, static_argnums=2)
    update = jax.jit(replay.prioritized_update)
    for _ in range(12):
        # three write sizes (one, a few, the most a write may hold) and four re-ranked
        # starts a round: a handful of compiled shapes, every wrap-around case
        k = int(rng.choice([1, 5, capacity - window]))
        items = {"x": jnp.arange(counter, counter + k, dtype=jnp.float32)}
        buffer = add(buffer, items, window)
        writes.append(k)
        counter += k
        valid = _starts_reference(writes, capacity, window)
        ranks = np.asarray(prioritized.priorities(buffer.tree))
        np.testing.assert_array_equal(ranks > 0, valid)
        # the stored items are the ones the account says: slot t mod C holds item t
        data = np.asarray(buffer.ring.data["x"])
        for t in range(max(0, counter - capacity), counter):
            assert data[t % capacity] == t
        # re-rank the valid starts; new windows then get the largest priority so far
        if not valid.any():
            continue
        starts = rng.choice(np.flatnonzero(valid), size=4)  # repeats re-rank a start to the same value
        new = rng.uniform(0.1, 3.0, size=capacity)[starts]
        buffer = update(buffer, jnp.asarray(starts), jnp.asarray(new, jnp.float32))
        np.testing.assert_allclose(np.asarray(prioritized.priorities(buffer.tree))[starts], new, rtol=1e-6)
        assert float(buffer.max_priority) >= new.max() - 1e-6


def test_prioritized_sample_draws_only_valid_starts_with_normalized_weights():
    capacity, window = 32, 6
    buffer = replay.prioritized_init({"x": jnp.zeros(())}, capacity)
    buffer = replay.prioritized_add(buffer, {"x": jnp.arange(20.0)}, window)  # starts 0..13 valid
    ranks = np.linspace(0.5, 2.0, 14)
    buffer = replay.prioritized_update(buffer, jnp.arange(14), jnp.asarray(ranks, jnp.float32))
    start, weights = jax.jit(replay.prioritized_sample, static_argnums=(2, 3))(
        buffer, jax.random.key(0), 4096, window, 0.6
    )
    start, weights = np.asarray(start), np.asarray(weights)
    assert start.min() >= 0 and start.max() <= 13
    probs = ranks / ranks.sum()
    counts = np.bincount(start, minlength=14) / len(start)
    np.testing.assert_allclose(counts, probs, atol=0.01)
    expected = (14 * probs[start]) ** -0.6
    np.testing.assert_allclose(weights, expected / expected.max(), rtol=1e-5)
