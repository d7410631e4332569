"""REINFORCE → A2C → PPO: the losses and returns against independent oracles.

(The CartPole presets learn at CI budgets in tests/test_readme.py, as the
docs' commands.)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import algos
from jaxrl.algos import a2c, ppo, reinforce


def _batch(b=64, seed=0):
    rng = np.random.default_rng(seed)
    return ppo.Batch(
        obs=jnp.zeros((b, 1)),
        action=jnp.zeros((b,), jnp.int32),
        log_prob=jnp.asarray(rng.normal(-0.7, 0.2, b), jnp.float32),
        value=jnp.asarray(rng.normal(size=b), jnp.float32),
        advantage=jnp.asarray(rng.normal(size=b), jnp.float32),
        target=jnp.asarray(rng.normal(size=b), jnp.float32),
    )


def test_a2c_gradient_is_ppos_at_ratio_one():
    """At r = 1 the clipped surrogate's gradient is −E[Â ∇log π] (the clip is
    inactive there), so with unclipped values and raw advantages PPO's loss and
    A2C's have the same gradient in log π, V and H."""
    batch = _batch()
    hp_ppo = ppo.HParams.from_config(jaxrl_ppo_config())
    hp_a2c = a2c.HParams.from_config(a2c.A2CConfig(vf_coef=hp_ppo.vf_coef.item(), ent_coef=0.01))
    entropy = jnp.full((64,), 0.6)

    def ppo_total(logp, value, ent):
        return ppo.loss_from_outputs(logp, ent, value, batch, hp_ppo, clip_value=False, normalize_advantages=False)[0]

    def a2c_total(logp, value, ent):
        return a2c.a2c_loss(logp, ent, value, batch, hp_a2c)[0]

    at_one = batch.log_prob  # log π = log π_old: ratio 1
    args = (at_one, batch.value + 0.3, entropy)
    for g_ppo, g_a2c in zip(jax.grad(ppo_total, (0, 1, 2))(*args), jax.grad(a2c_total, (0, 1, 2))(*args), strict=True):
        np.testing.assert_allclose(np.asarray(g_ppo), np.asarray(g_a2c), rtol=1e-6, atol=1e-8)


def jaxrl_ppo_config():
    return ppo.PPOConfig(ent_coef=0.01)


def test_a2c_loss_by_hand():
    batch = _batch(b=5, seed=1)
    hp = a2c.HParams.from_config(a2c.A2CConfig(vf_coef=0.5, ent_coef=0.1))
    logp, value, ent = batch.log_prob, batch.value + 1.0, jnp.full((5,), 0.4)
    total, m = a2c.a2c_loss(logp, ent, value, batch, hp)
    a, lp = np.asarray(batch.advantage, np.float64), np.asarray(logp, np.float64)
    want_policy = -np.mean(lp * a)
    want_value = 0.5 * np.mean((np.asarray(value, np.float64) - np.asarray(batch.target, np.float64)) ** 2)
    assert float(m.policy) == pytest.approx(want_policy, rel=1e-5)
    assert float(m.value) == pytest.approx(want_value, rel=1e-5)
    assert float(total) == pytest.approx(want_policy + 0.5 * want_value - 0.1 * 0.4, rel=1e-5)


def test_first_episode_mask():
    done = jnp.asarray([[0, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 0]], bool)  # [T=4, N=3]
    want = np.asarray([[1, 1, 1], [1, 0, 1], [0, 0, 1], [0, 0, 1]], bool)
    np.testing.assert_array_equal(np.asarray(reinforce.first_episode(done)), want)


def _returns_loop(rewards, terminated, truncated, values, next_values, gamma, baseline):
    """float64 reward-to-go per env, restarting at every episode end; a
    truncation, and the rollout's end, bootstrap from V with a baseline only."""
    t_len, n = rewards.shape
    out = np.zeros((t_len, n))
    for i in range(n):
        g = next_values[-1, i] if baseline else 0.0
        for t in reversed(range(t_len)):
            if terminated[t, i]:
                g = 0.0
            elif truncated[t, i]:
                g = next_values[t, i] if baseline else 0.0
            g = rewards[t, i] + gamma * g
            out[t, i] = g
    return out


@pytest.mark.parametrize("baseline", [True, False])
def test_reinforce_returns_equal_a_float64_loop(baseline):
    """The λ = 1 GAE returns REINFORCE learns from: discounted reward-to-go,
    no crossing of episode ends, truncations bootstrapped from V(final_obs)
    (and the unfinished tail from V(s_T)) only with a baseline."""
    from jaxrl.rl.advantages import gae

    rng = np.random.default_rng(3)
    t_len, n, gamma = 12, 4, 0.9
    rewards = rng.normal(size=(t_len, n))
    terminated = rng.random((t_len, n)) < 0.15
    truncated = (rng.random((t_len, n)) < 0.1) & ~terminated
    values = rng.normal(size=(t_len, n))
    # as in a rollout: V(final_obs_t) is V(s_{t+1}) unless step t ended an episode
    next_values = np.concatenate([values[1:], rng.normal(size=(1, n))])
    ended = terminated | truncated
    next_values[ended] = rng.normal(size=int(ended.sum()))
    v, nv = (values, next_values) if baseline else (np.zeros_like(values), np.zeros_like(values))
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    done = terminated | truncated
    got = gae(f32(rewards), f32(v), f32(nv), jnp.asarray(terminated), jnp.asarray(done), gamma, 1.0) + f32(v)
    want = _returns_loop(rewards, terminated, truncated, values, next_values, gamma, baseline)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


def test_reinforce_loss_counts_only_weighted_steps():
    b = 6
    batch = reinforce.Batch(
        obs=jnp.zeros((b, 1)),
        action=jnp.zeros((b,), jnp.int32),
        advantage=jnp.asarray([1.0, -2.0, 0.5, 3.0, 3.0, 3.0]),
        target=jnp.asarray([1.0, 2.0, 3.0, 9.0, 9.0, 9.0]),
        weight=jnp.asarray([1.0, 1.0, 1.0, 0.0, 0.0, 0.0]),
    )
    hp = reinforce.HParams.from_config(reinforce.ReinforceConfig(vf_coef=0.5, ent_coef=0.0))
    logp = jnp.log(jnp.asarray([0.5, 0.25, 0.8, 0.1, 0.1, 0.1]))
    value = jnp.asarray([0.0, 1.0, 1.0, 100.0, 100.0, 100.0])
    total, m = reinforce.reinforce_loss(logp, jnp.zeros(b), value, batch, hp)
    lp = np.log([0.5, 0.25, 0.8])
    assert float(m.policy) == pytest.approx(-np.mean(lp * np.array([1.0, -2.0, 0.5])), rel=1e-6)
    assert float(m.value) == pytest.approx(0.5 * np.mean(np.square([-1.0, -1.0, -2.0])), rel=1e-6)
    _, no_baseline = reinforce.reinforce_loss(logp, jnp.zeros(b), value, batch, hp, baseline=False)
    assert float(no_baseline.value) == 0.0 and float(no_baseline.total) == pytest.approx(float(m.policy))


def test_the_lineage_is_registered_with_its_declarations():
    for name in ("reinforce", "a2c", "ppo"):
        algorithm = algos.get(name)
        assert algorithm.name == name and "CartPole-v1" in algorithm.presets
        assert set(algorithm.actions) == {"discrete", "continuous"}
    assert "counted_fraction" in algos.get("reinforce").metrics
    assert algos.get("a2c").data_parallel and not algos.get("reinforce").data_parallel
