"""Our distributions against distrax."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.rl.distributions import Categorical, DiagGaussian

distrax = pytest.importorskip("distrax")


def test_categorical_matches_distrax():
    logits = jax.random.normal(jax.random.PRNGKey(0), (7, 5)) * 3
    actions = jax.random.randint(jax.random.PRNGKey(1), (7,), 0, 5)
    ours, ref = Categorical(logits), distrax.Categorical(logits=logits)
    np.testing.assert_allclose(ours.log_prob(actions), ref.log_prob(actions), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.entropy(), ref.entropy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ours.mode(), ref.mode())


def test_categorical_sampling_frequencies():
    probs = jnp.array([0.1, 0.6, 0.3])
    keys = jax.random.split(jax.random.PRNGKey(0), 20000)
    samples = jax.vmap(lambda k: Categorical(jnp.log(probs)).sample(k))(keys)
    freq = np.bincount(np.asarray(samples), minlength=3) / samples.shape[0]
    np.testing.assert_allclose(freq, probs, atol=0.015)


def test_diag_gaussian_matches_distrax():
    key_mean, key_std, key_x = jax.random.split(jax.random.PRNGKey(2), 3)
    mean = jax.random.normal(key_mean, (6, 3))
    log_std = jax.random.normal(key_std, (6, 3)) * 0.5
    x = jax.random.normal(key_x, (6, 3)) * 2
    ours = DiagGaussian(mean, log_std)
    ref = distrax.MultivariateNormalDiag(mean, jnp.exp(log_std))
    np.testing.assert_allclose(ours.log_prob(x), ref.log_prob(x), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours.entropy(), ref.entropy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours.mode(), mean)


def test_diag_gaussian_sample_moments():
    mean, log_std = jnp.array([1.0, -2.0]), jnp.log(jnp.array([0.5, 2.0]))
    keys = jax.random.split(jax.random.PRNGKey(3), 20000)
    x = jax.vmap(lambda k: DiagGaussian(mean, log_std).sample(k))(keys)
    np.testing.assert_allclose(x.mean(0), mean, atol=0.05)
    np.testing.assert_allclose(x.std(0), jnp.exp(log_std), rtol=0.03)
