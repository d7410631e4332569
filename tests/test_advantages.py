"""GAE against a float64 loop, rlax, closed forms; under jit and vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import gae, gae_reference


def loop_gae(rewards, values, next_values, terminated, done, gamma, lam):
    """Float64 plain-Python reference, written from the equations."""
    rewards, values, next_values = (np.asarray(x, np.float64) for x in (rewards, values, next_values))
    terminated, done = np.asarray(terminated, bool), np.asarray(done, bool)
    advantages = np.zeros_like(rewards)
    next_advantage = np.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        delta = rewards[t] + gamma * (1.0 - terminated[t]) * next_values[t] - values[t]
        next_advantage = delta + gamma * lam * (1.0 - done[t]) * next_advantage
        advantages[t] = next_advantage
    return advantages


def random_batch(seed, T=37, shape=(5,)):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, *shape)).astype(np.float32)
    values = rng.normal(size=(T, *shape)).astype(np.float32)
    next_values = rng.normal(size=(T, *shape)).astype(np.float32)
    terminated = rng.random((T, *shape)) < 0.1
    truncated = rng.random((T, *shape)) < 0.1
    done = terminated | truncated
    return rewards, values, next_values, terminated, done


@pytest.mark.parametrize("method", ["associative", "scan"])
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)])
def test_matches_float64_loop(method, shape):
    batch = random_batch(0, shape=shape)
    expected = loop_gae(*batch, 0.97, 0.9)
    got = jax.jit(lambda *b: gae(*b, 0.97, 0.9, method=method))(*batch)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-5, atol=2e-5)


def test_associative_equals_scan_reference():
    batch = random_batch(1, T=128, shape=(64,))
    a = gae(*batch, 0.99, 0.95)
    b = gae_reference(*batch, 0.99, 0.95)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)


def test_matches_rlax_without_auto_reset():
    """rlax's truncated GAE (one discount for bootstrap and trace) equals ours when
    the trajectory is one stream whose next value is the following step's value
    and terminations are the only boundaries; the trajectory end bootstraps."""
    rlax = pytest.importorskip("rlax")
    rng = np.random.default_rng(2)
    T, gamma, lam = 50, 0.99, 0.9
    rewards = rng.normal(size=T).astype(np.float32)
    all_values = rng.normal(size=T + 1).astype(np.float32)
    terminated = rng.random(T) < 0.1
    discount = gamma * (1.0 - terminated)
    expected = rlax.truncated_generalized_advantage_estimation(rewards, discount, lam, all_values)
    got = gae(rewards, all_values[:-1], all_values[1:], terminated, terminated, gamma, lam)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-5)


def test_closed_form_constant_reward():
    """r=1, V=0 everywhere, no boundaries: A_t = Σ_{k<T−t} (γλ)^k."""
    T, gamma, lam = 10, 0.9, 0.8
    zeros = np.zeros(T, np.float32)
    adv = gae(np.ones(T, np.float32), zeros, zeros, zeros, zeros, gamma, lam)
    c = gamma * lam
    expected = np.array([(1 - c ** (T - t)) / (1 - c) for t in range(T)])
    np.testing.assert_allclose(np.asarray(adv), expected, rtol=1e-6)


def test_lambda_one_is_discounted_return_minus_value():
    T, gamma = 6, 0.5
    rewards = np.arange(1, T + 1, dtype=np.float32)
    values = np.full(T, 2.0, np.float32)
    next_values = np.concatenate([values[1:], [4.0]]).astype(np.float32)
    zeros = np.zeros(T, bool)
    adv = np.asarray(gae(rewards, values, next_values, zeros, zeros, gamma, 1.0))
    returns = [sum(gamma**k * rewards[t + k] for k in range(T - t)) + gamma ** (T - t) * 4.0 for t in range(T)]
    np.testing.assert_allclose(adv + values, returns, rtol=1e-6)


def test_termination_bootstraps_nothing_truncation_bootstraps_final_value():
    rewards = np.array([1.0, 1.0], np.float32)
    values = np.array([0.0, 0.0], np.float32)
    next_values = np.array([10.0, 10.0], np.float32)
    gamma, lam = 0.9, 0.95
    # step 0 terminated: A_0 = r_0 (no bootstrap, no flow from step 1)
    adv = gae(rewards, values, next_values, np.array([True, False]), np.array([True, False]), gamma, lam)
    assert float(adv[0]) == pytest.approx(1.0)
    # step 0 truncated: A_0 = r_0 + γ V(final obs), still no flow from step 1
    adv = gae(rewards, values, next_values, np.array([False, False]), np.array([True, False]), gamma, lam)
    assert float(adv[0]) == pytest.approx(1.0 + gamma * 10.0)
    # no boundary: advantage flows back
    adv = gae(rewards, values, next_values, np.array([False, False]), np.array([False, False]), gamma, lam)
    assert float(adv[0]) == pytest.approx(1.0 + gamma * 10.0 + gamma * lam * float(adv[1]))


def test_vmap_over_hyperparameters_and_batch():
    batch = random_batch(3, T=20, shape=(4,))
    gammas = jnp.array([0.9, 0.99])
    out = jax.vmap(lambda g: gae(*batch, g, 0.95))(gammas)
    for i, g in enumerate([0.9, 0.99]):
        np.testing.assert_allclose(np.asarray(out[i]), loop_gae(*batch, g, 0.95), rtol=2e-5, atol=2e-5)


def test_rejects_unknown_method():
    with pytest.raises(ValueError, match="method"):
        gae(*random_batch(0), 0.9, 0.9, method="magic")
