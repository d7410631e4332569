"""jaxrl.rl.distributional against its oracles: the C51 projection against a
float64 loop of Bellemare et al.'s Algorithm 1 and rlax's
``categorical_l2_project``; the C51 loss against rlax's
``categorical_td_learning``; hand-computed projections (terminal transitions,
atoms outside the support, atoms on support points); the quantile Huber loss
against a float64 loop and rlax's ``quantile_regression_loss``, and its
minimizers being the quantiles."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.rl import distributional as D

rlax = pytest.importorskip("rlax")


def _project_loop(atoms, probs, z):
    """Algorithm 1 of arXiv:1707.06887 in float64, one distribution at a time,
    with the usual fix for an atom that lands exactly on a support point
    (``l == u``: all its mass there)."""
    atoms, probs, z = (np.asarray(x, np.float64) for x in (atoms, probs, z))
    dz = z[1] - z[0]
    out = np.zeros(atoms.shape[:-1] + z.shape)
    for index in np.ndindex(atoms.shape[:-1]):
        for x, p in zip(atoms[index], probs[index], strict=True):
            b = (min(max(x, z[0]), z[-1]) - z[0]) / dz
            lo, hi = int(np.floor(b)), int(np.ceil(b))
            if lo == hi:
                out[index + (lo,)] += p
            else:
                out[index + (lo,)] += p * (hi - b)
                out[index + (hi,)] += p * (b - lo)
    return out


def _random_case(seed: int, batch: int = 32, atoms: int = 51):
    rng = np.random.default_rng(seed)
    z = np.linspace(-10.0, 10.0, atoms)
    logits = rng.normal(size=(batch, atoms)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    reward = rng.normal(scale=4.0, size=batch)  # some targets leave the support
    discount = rng.choice([0.0, 0.99, 0.99**3, 0.5], size=batch)  # terminal, 1-step, 3-step, …
    return z, probs, reward, discount


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_projection_equals_algorithm_1_and_rlax(seed):
    z, probs, reward, discount = _random_case(seed)
    atoms = reward[:, None] + discount[:, None] * z
    got = np.asarray(D.categorical_projection(jnp.asarray(atoms), jnp.asarray(probs), jnp.asarray(z)))
    np.testing.assert_allclose(got, _project_loop(atoms, probs, z), atol=1e-5)
    theirs = jax.vmap(rlax.categorical_l2_project, (0, 0, None))(jnp.asarray(atoms), jnp.asarray(probs), jnp.asarray(z))
    np.testing.assert_allclose(got, np.asarray(theirs), atol=1e-5)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-5)  # mass conserved
    target = D.categorical_target(jnp.asarray(reward), jnp.asarray(discount), jnp.asarray(probs), jnp.asarray(z))
    np.testing.assert_allclose(np.asarray(target), got, atol=1e-5)


def test_projections_by_hand():
    z = D.support(0.0, 2.0, 3)  # [0, 1, 2]
    np.testing.assert_array_equal(np.asarray(z), [0.0, 1.0, 2.0])
    one = jnp.ones(3) / 3
    # a terminal transition (discount 0): every atom is the reward, split around it
    np.testing.assert_allclose(D.categorical_target(jnp.array(0.5), jnp.array(0.0), one, z), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(D.categorical_target(jnp.array(1.0), jnp.array(0.0), one, z), [0.0, 1.0, 0.0])
    # beyond the support: clipped to its end
    np.testing.assert_allclose(D.categorical_target(jnp.array(5.0), jnp.array(0.0), one, z), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(D.categorical_target(jnp.array(-3.0), jnp.array(0.5), one, z), [1.0, 0.0, 0.0])
    # r + γ z with γ = 0.5 from the point mass on z = 2: the atom 0.25 + 1 = 1.25
    point = jnp.array([0.0, 0.0, 1.0])
    np.testing.assert_allclose(D.categorical_target(jnp.array(0.25), jnp.array(0.5), point, z), [0.0, 0.75, 0.25])


@pytest.mark.filterwarnings("ignore:Rlax categorical_cross_entropy:PendingDeprecationWarning")  # rlax's own call
def test_categorical_loss_equals_rlax_td_learning():
    z, probs, reward, discount = _random_case(3, batch=16)
    rng = np.random.default_rng(4)
    logits_tm1, logits_t = rng.normal(size=(2, 16, z.size))
    target = D.categorical_target(jnp.asarray(reward), jnp.asarray(discount), jax.nn.softmax(logits_t), jnp.asarray(z))
    ours = D.categorical_loss(jnp.asarray(logits_tm1), target)
    theirs = jax.vmap(rlax.categorical_td_learning, (None, 0, 0, 0, None, 0))(
        jnp.asarray(z),
        jnp.asarray(logits_tm1),
        jnp.asarray(reward),
        jnp.asarray(discount),
        jnp.asarray(z),
        jnp.asarray(logits_t),
    )
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5)
    # the mean of the categorical value is its Q
    np.testing.assert_allclose(
        np.asarray(D.categorical_mean(jnp.asarray(logits_t), jnp.asarray(z))),
        (np.exp(logits_t) / np.exp(logits_t).sum(-1, keepdims=True) * z).sum(-1),
        rtol=1e-5,
        atol=1e-5,
    )


def _quantile_loop(theta, taus, target, kappa):
    theta, taus, target = (np.asarray(x, np.float64) for x in (theta, taus, target))
    out = np.zeros(theta.shape[:-1])
    for index in np.ndindex(theta.shape[:-1]):
        total = 0.0
        for th, tau in zip(theta[index], taus, strict=True):
            terms = []
            for y in target[index]:
                u = y - th
                if kappa > 0:
                    h = 0.5 * u * u if abs(u) <= kappa else kappa * (abs(u) - 0.5 * kappa)
                    h /= kappa
                else:
                    h = abs(u)
                terms.append(abs(tau - (u < 0)) * h)
            total += np.mean(terms)
        out[index] = total
    return out


@pytest.mark.parametrize("kappa", [0.0, 1.0, 2.5])
def test_quantile_huber_loss_equals_a_float64_loop_and_rlax(kappa):
    rng = np.random.default_rng(5)
    theta = rng.normal(size=(8, 11)) * 3
    taus = np.asarray(D.quantile_levels(11))
    next_q = rng.normal(size=(8, 13)) * 3
    reward, discount = rng.normal(size=8), rng.choice([0.0, 0.99], size=8)
    target = D.quantile_target(jnp.asarray(reward), jnp.asarray(discount), jnp.asarray(next_q))
    np.testing.assert_allclose(np.asarray(target), reward[:, None] + discount[:, None] * next_q, rtol=1e-6, atol=1e-6)
    ours = np.asarray(D.quantile_huber_loss(jnp.asarray(theta), jnp.asarray(taus), target, kappa))
    np.testing.assert_allclose(ours, _quantile_loop(theta, taus, np.asarray(target), kappa), rtol=1e-5)
    theirs = jax.vmap(rlax.quantile_regression_loss, (0, None, 0, None))(
        jnp.asarray(theta), jnp.asarray(taus), target, kappa
    )
    np.testing.assert_allclose(ours, np.asarray(theirs) / (kappa if kappa > 0 else 1.0), rtol=1e-5)  # rlax: no 1/κ


def test_quantile_levels_and_the_loss_is_minimized_at_the_quantiles():
    np.testing.assert_allclose(np.asarray(D.quantile_levels(4)), [0.125, 0.375, 0.625, 0.875])
    samples = jnp.arange(100.0)  # uniform on 0 … 99: the τ-quantile is ≈ 100 τ
    levels = D.quantile_levels(4)
    grid = jnp.linspace(0.0, 99.0, 397)
    for i, tau in enumerate(np.asarray(levels)):
        losses = jax.vmap(lambda t, i=i: D.quantile_huber_loss(t[None], levels[i : i + 1], samples, 0.0))(grid)
        best = float(grid[int(jnp.argmin(losses))])
        assert abs(best - 100 * tau) <= 1.0, (tau, best)


def test_a_support_needs_two_atoms_and_an_interval():
    with pytest.raises(ValueError, match="atoms >= 2"):
        D.support(0.0, 1.0, 1)
    with pytest.raises(ValueError, match="v_min < v_max"):
        D.support(1.0, 1.0, 51)
