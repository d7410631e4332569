"""The env contract: terminated vs truncated, pre-reset observation, episode stats."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs
from jaxrl.envs.gymnax_env import GymnaxEnv
from tests.helpers import plain_and_drawn
from tests.toy_envs import CountingEnv, Params


def test_names_and_aliases():
    names = envs.names()
    for short in ("cartpole", "acrobot", "mountaincar", "pendulum", "mountaincar-continuous"):
        assert short in names
    assert "Breakout-MinAtar" in names
    assert envs.make("cartpole").name == "CartPole-v1"
    assert envs.make("CARTPOLE").name == "CartPole-v1"
    assert envs.make("gymnax:Acrobot-v1").name == "Acrobot-v1"
    breakout = envs.make("Breakout-MinAtar")
    assert breakout.obs_shape == (10, 10, 4)
    pendulum = envs.make("pendulum")
    assert isinstance(pendulum.action_space, envs.Box) and pendulum.action_space.shape == (1,)
    assert float(pendulum.action_space.high[0]) == pytest.approx(2.0)


def test_unknown_name_suggests():
    with pytest.raises(ValueError, match="CartPole-v1|cartpole"):
        envs.make("cartpol")


def run_steps(env, params, actions, key=0):
    state, obs = env.reset(jax.random.PRNGKey(key), params)
    out = []
    for i, a in enumerate(actions):
        state, step = env.step(jax.random.PRNGKey(1000 + i), state, jnp.asarray(a), params)
        out.append(step)
    return state, out


def test_cartpole_truncation_keeps_final_observation():
    env = envs.make("cartpole")
    params = env.default_params.replace(max_steps_in_episode=5)
    # alternate actions: the pole stays up for 5 steps
    state, steps = run_steps(env, params, [0, 1, 0, 1, 0, 1, 0])
    for i in range(4):
        assert not bool(steps[i].terminated) and not bool(steps[i].truncated)
        np.testing.assert_array_equal(steps[i].obs, steps[i].final_obs)
    last = steps[4]
    assert bool(last.truncated) and not bool(last.terminated)
    assert not np.array_equal(np.asarray(last.obs), np.asarray(last.final_obs))  # reset obs differs
    # final_obs continues the physics: x' = x + τ·ẋ from the previous obs
    prev = np.asarray(steps[3].obs)
    assert float(last.final_obs[0]) == pytest.approx(prev[0] + 0.02 * prev[1], abs=1e-6)
    assert np.all(np.abs(np.asarray(last.obs)) <= 0.05)  # fresh reset state
    assert float(last.episode_return) == 5.0 and int(last.episode_length) == 5
    # counters restart after the boundary
    assert float(steps[5].episode_return) == 1.0 and int(steps[5].episode_length) == 1


def test_cartpole_termination_is_not_truncation():
    env = envs.make("cartpole")
    state, steps = run_steps(env, env.default_params, [1] * 40)
    done_at = next(i for i, s in enumerate(steps) if bool(s.terminated))
    assert not any(bool(s.truncated) for s in steps[: done_at + 1])
    assert abs(float(steps[done_at].final_obs[2])) > 0.2094  # pole angle past the threshold
    assert float(steps[done_at].episode_return) == done_at + 1


def test_user_env_time_limit_and_termination():
    env = envs.from_gymnax(CountingEnv())
    params = Params(max_steps_in_episode=4, terminate_after=3)
    _, steps = run_steps(env, params, [0] * 7)
    terminated = [bool(s.terminated) for s in steps]
    truncated = [bool(s.truncated) for s in steps]
    assert terminated == [False, False, True, False, False, True, False]
    assert truncated == [False] * 7
    np.testing.assert_array_equal([float(s.final_obs[0]) for s in steps], [1, 2, 3, 1, 2, 3, 1])
    np.testing.assert_array_equal([float(s.obs[0]) for s in steps], [1, 2, 0, 1, 2, 0, 1])
    params = Params(max_steps_in_episode=2, terminate_after=100)
    _, steps = run_steps(env, params, [0] * 3)
    assert [bool(s.truncated) for s in steps] == [False, True, False]


def test_vmapped_step():
    env = envs.make("acrobot")
    keys = jax.random.split(jax.random.PRNGKey(0), 8)
    state, obs = jax.vmap(env.reset, (0, None))(keys, env.default_params)
    assert obs.shape == (8, 6)
    state, step = jax.jit(jax.vmap(env.step, (0, 0, 0, None)))(keys, state, jnp.zeros(8, jnp.int32), env.default_params)
    assert step.reward.shape == (8,) and step.terminated.dtype == jnp.bool_


def _with_limit(env, steps):
    env.default_params = env.default_params.replace(max_steps_in_episode=steps)
    return env


class _OwnStep(CountingEnv):
    """A user env that overrides gymnax's ``step`` itself: it must keep the plain path."""

    def step(self, key, state, action, params=None):
        obs, state, reward, terminated, truncated, info = super().step(key, state, action, params)
        return obs, state, 2.0 * reward, terminated, truncated, info


class _HalfReward(GymnaxEnv):
    """A subclass of the adapter that replaces ``_step``: it must keep the plain path."""

    def _step(self, key, inner, action, params):
        inner, obs, reward, terminated, truncated, final_obs = super()._step(key, inner, action, params)
        return inner, obs, 0.5 * reward, terminated, truncated, final_obs


@pytest.mark.parametrize(
    "make",
    [
        lambda: _with_limit(envs.make("cartpole"), 20),  # truncations as well as terminations
        lambda: _with_limit(envs.make("acrobot"), 15),
        lambda: _with_limit(envs.make("mountaincar-continuous"), 7),
        lambda: envs.make("Breakout-MinAtar"),  # step_env draws from its key
        lambda: envs.from_gymnax(CountingEnv(), Params(max_steps_in_episode=5, terminate_after=3)),
        lambda: envs.from_gymnax(_OwnStep(), Params(max_steps_in_episode=4, terminate_after=100)),
        lambda: _HalfReward(CountingEnv(), Params(max_steps_in_episode=5, terminate_after=3)),
    ],
)
def test_draw_steps_then_step_drawn_equals_step(make):
    """``draw_steps`` up front + ``step_drawn`` in the loop returns what
    ``step`` returns with the same keys, across episode boundaries: the same
    episode boundaries and integers, floats to rounding (the two programs fuse
    the physics differently)."""
    env = make()
    n = 6
    want, got = plain_and_drawn(env, env.default_params, 60, n)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        a, b = np.asarray(a), np.asarray(b)
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
        else:
            np.testing.assert_array_equal(b, a)
    done = np.asarray(want[1].terminated | want[1].truncated)
    assert done.sum() >= n  # the comparison crossed episode boundaries


def test_draw_steps_accepts_legacy_uint32_keys():
    env = envs.make("cartpole")
    keys = jax.random.split(jax.random.PRNGKey(0), 6).reshape(2, 3, 2)  # raw uint32 [2, 3, 2]
    typed = env.draw_steps(jax.random.wrap_key_data(keys))
    legacy = env.draw_steps(keys)
    for a, b in zip(jax.tree.leaves(legacy), jax.tree.leaves(typed), strict=True):
        assert a.shape[:2] == (2, 3)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize(
    "make",
    [
        lambda: _with_limit(envs.make("cartpole"), 6),
        lambda: _with_limit(envs.make("acrobot"), 4),
        lambda: _with_limit(envs.make("pendulum"), 5),
        lambda: _with_limit(envs.make("mountaincar-continuous"), 3),
        lambda: _with_limit(envs.make("Breakout-MinAtar"), 7),
    ],
)
def test_truncation_period_is_the_gap_between_truncations(make):
    """``truncation_period`` promises that one env copy never truncates twice
    within fewer steps (PPO's rollout computes ``V(final_obs)`` only at
    ``⌈T / P⌉`` slots per env on that promise): random play across many
    episodes, every truncation exactly ``P`` steps after the last reset."""
    env = make()
    period = env.truncation_period()
    assert period == int(env.default_params.max_steps_in_episode)
    n, steps = 8, 5 * period + 3
    keys = jax.random.split(jax.random.key(0), n)
    state, _ = jax.vmap(env.reset)(keys)

    def one(carry, key):
        state, since = carry
        keys = jax.random.split(key, 2 * n).reshape(2, n)
        action = jax.vmap(env.random_action)(keys[0])
        state, out = jax.vmap(env.step)(keys[1], state, action)
        since = since + 1
        gap = jnp.where(out.truncated, since, -1)
        return (state, jnp.where(out.done, 0, since)), (gap, out.truncated)

    _, (gaps, truncated) = jax.lax.scan(
        one, (state, jnp.zeros(n, jnp.int32)), jax.random.split(jax.random.key(1), steps)
    )
    gaps = np.asarray(gaps)[np.asarray(truncated)]
    assert gaps.size >= n  # every copy truncated at least once
    assert (gaps == period).all()


def test_truncation_period_unknown_unless_the_clock_is_gymnax_own():
    assert (
        envs.from_gymnax(CountingEnv(), Params(max_steps_in_episode=5, terminate_after=3)).truncation_period() is None
    )
    assert _HalfReward(CountingEnv(), Params(max_steps_in_episode=5, terminate_after=3)).truncation_period() is None
    env = envs.make("cartpole")
    assert _HalfReward(env.env, env.default_params).truncation_period() is None  # gymnax's env, our subclass
    assert env.truncation_period(env.default_params.replace(max_steps_in_episode=7)) == 7
    seen = []
    jax.jit(lambda p: seen.append(env.truncation_period(p)) or 0)(env.default_params)  # a traced limit
    assert seen == [None]
