"""The compiled training program: semantics, determinism, seeds, learning."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import envs, make_train, parse, validate
from jaxrl.nets.networks import ActorCritic
from jaxrl.run.checkpoint import keys_to_data
from jaxrl.trainer.loop import make_batched, make_segments, seed_keys
from tests.helpers import CARTPOLE_TINY
from tests.toy_envs import ConstantReward, CountingEnv, Params


def cfg(*overrides):
    return validate(parse(list(overrides)))


class TruncationAsTermination(envs.Env):
    """The classic bug, for contrast: a time limit reported as a terminal state."""

    def __init__(self, inner):
        self.inner = inner
        for attr in ("name", "obs_shape", "action_space", "default_params", "max_episode_steps"):
            setattr(self, attr, getattr(inner, attr))

    def _reset(self, key, params):
        return self.inner._reset(key, params)

    def _step(self, key, state, action, params):
        inner, obs, reward, terminated, truncated, final_obs = self.inner._step(key, state, action, params)
        return inner, obs, reward, jnp.logical_or(terminated, truncated), jnp.zeros_like(truncated), final_obs


def learned_value(env, seeds=(0, 1)):
    config = cfg(
        "seeds=2",
        "num_envs=8",
        "total_timesteps=24576",
        "num_evals=1",
        "eval.episodes=1",
        "algo.num_steps=16",
        "algo.update_epochs=4",
        "algo.num_minibatches=2",
        "algo.lr=3e-3",
        "algo.lr_schedule=constant",
        "algo.clip_value=false",
        "algo.gamma=0.98",
        "algo.gae_lambda=0.95",
        "algo.ent_coef=0.0",
    )
    trainer = make_train(config, env=env)
    keys = jnp.stack([jax.random.PRNGKey(s) for s in seeds])
    state, _ = jax.jit(jax.vmap(trainer.train, (0, None)))(keys, trainer.hparams)
    values = jax.vmap(lambda p: trainer.agent.network.apply(p, jnp.ones((1,)), method=ActorCritic.value))(
        state.agent.params
    )
    return np.asarray(values)


def test_time_limit_bootstraps_from_final_observation():
    """Reward 1 forever, time limit 8, γ = 0.98: the infinite-horizon value is
    1/(1−γ) = 50. Treating the time limit as termination instead learns a
    value near the truncated returns (≈ 4.6 averaged over the 8 steps)."""
    env = envs.from_gymnax(ConstantReward(), Params(max_steps_in_episode=8))
    correct = learned_value(env)
    assert np.all(np.abs(correct - 50.0) < 2.5), correct
    wrong = learned_value(TruncationAsTermination(env))
    assert np.all(wrong < 8.0), wrong


def test_episode_statistics_count_only_completed_episodes():
    config = cfg(
        "seeds=1", "num_envs=2", "total_timesteps=32", "num_evals=1", "algo.num_steps=8", "algo.num_minibatches=1"
    )
    # a user's own gymnax Environment subclass, passed to make_train directly
    trainer = make_train(config, env=CountingEnv(), env_params=Params(max_steps_in_episode=100, terminate_after=3))
    state = trainer.init(jax.random.PRNGKey(0), trainer.hparams)
    returns, counts = [], []
    for _ in range(2):
        state, m = jax.jit(trainer.update)(state, trainer.hparams)
        returns.append(float(m.loop.episode_return_sum))
        counts.append(int(m.loop.episodes))
    # update 1: steps 1..8 per env → episodes end at 3 and 6 (2 per env); the partial one is not counted
    # update 2: steps 9..16 → ends at 9, 12, 15 (3 per env)
    assert counts == [4, 6]
    assert returns == [12.0, 18.0]


def _run_batched(config, env=None):
    trainer = make_train(config, env=env)
    keys = seed_keys(config)
    init_b, chunk_b = make_batched(trainer)
    states = jax.jit(init_b)(keys, trainer.hparams)
    chunk = jax.jit(chunk_b)
    evals = []
    for _ in range(trainer.num_chunks):
        states, m = chunk(states, trainer.hparams)
        evals.append(np.asarray(m.eval.returns))
    return states, np.stack(evals), m


SMALL = CARTPOLE_TINY


def test_same_seed_same_numbers_bitwise():
    config = cfg("seeds=2", *SMALL)
    a, evals_a, m_a = _run_batched(config)
    b, evals_b, m_b = _run_batched(dataclasses.replace(config, num_evals=2))  # a fresh trace and compile
    for x, y in zip(jax.tree.leaves(keys_to_data((a, m_a))), jax.tree.leaves(keys_to_data((b, m_b))), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    np.testing.assert_array_equal(evals_a, evals_b)


def test_seed_independence():
    """Seeds [3, 5] and [3, 9]: seed 3's run is identical in both."""
    a, evals_a, m_a = _run_batched(cfg("seeds=[3,5]", *SMALL))
    b, evals_b, m_b = _run_batched(cfg("seeds=[3,9]", *SMALL))
    for x, y in zip(jax.tree.leaves(keys_to_data((a, m_a))), jax.tree.leaves(keys_to_data((b, m_b))), strict=True):
        np.testing.assert_array_equal(np.asarray(x)[0], np.asarray(y)[0])
    assert not np.array_equal(np.asarray(keys_to_data(a.agent.key))[1], np.asarray(keys_to_data(b.agent.key))[1])


def test_single_program_train_equals_chunked_driver():
    config = cfg("seeds=1", *SMALL)
    trainer = make_train(config)
    key = jax.random.PRNGKey(7)
    final, metrics = jax.jit(trainer.train)(key, trainer.hparams)
    state = trainer.init(key, trainer.hparams)
    chunk = jax.jit(trainer.train_chunk)
    for c in range(trainer.num_chunks):
        state, m = chunk(state, trainer.hparams)
        np.testing.assert_array_equal(np.asarray(m.eval.returns), np.asarray(metrics.eval.returns)[c])
    for x, y in zip(jax.tree.leaves(keys_to_data(final)), jax.tree.leaves(keys_to_data(state)), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_evaluation_counts_first_episode_only_and_respects_max_steps():
    from jaxrl.trainer.evaluate import make_evaluate

    env = envs.from_gymnax(CountingEnv(), Params(max_steps_in_episode=100, terminate_after=3))
    act = lambda state, obs, key: jnp.zeros(obs.shape[0], jnp.int32)  # noqa: E731
    result = jax.jit(make_evaluate(env, act, num_episodes=5, max_steps=50))(None, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(result.returns), [3.0] * 5)
    np.testing.assert_array_equal(np.asarray(result.lengths), [3] * 5)
    capped = jax.jit(make_evaluate(env, act, num_episodes=2, max_steps=2))(None, jax.random.PRNGKey(0))
    np.testing.assert_array_equal(np.asarray(capped.returns), [2.0, 2.0])


def test_vmapped_hyperparameters_equal_separate_runs():
    """One program over two learning rates gives each setting's own numbers."""
    config = cfg("seeds=1", *SMALL)
    trainer = make_train(config)
    lrs = (1e-3, 3e-3)
    hps = jax.tree.map(lambda x: jnp.broadcast_to(x, (2,)), trainer.hparams).replace(lr=jnp.asarray(lrs))
    keys = jnp.stack([jax.random.PRNGKey(0)] * 2)
    batched, batched_metrics = jax.jit(jax.vmap(trainer.train))(keys, hps)
    for i, lr in enumerate(lrs):
        alone, alone_metrics = jax.jit(trainer.train)(keys[i], trainer.hparams.replace(lr=jnp.float32(lr)))
        for x, y in zip(jax.tree.leaves(batched.agent.params), jax.tree.leaves(alone.agent.params), strict=True):
            np.testing.assert_allclose(np.asarray(x)[i], np.asarray(y), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(
            np.asarray(batched_metrics.eval.returns)[i], np.asarray(alone_metrics.eval.returns), atol=1e-6
        )


def test_a_chunk_run_in_segments_equals_the_chunk_in_one_program():
    """The host runs a chunk as ``advance`` calls of at most ``capacity`` updates
    (reporting progress between them) and a ``close``: the same states and
    metrics, bit for bit, as the chunk in one program."""
    config = cfg(*SMALL, "seeds=2", "num_evals=1")
    trainer = make_train(config)
    init_b, chunk_b = make_batched(trainer)
    states = jax.jit(init_b)(seed_keys(config), trainer.hparams)
    want_states, want = jax.jit(chunk_b)(states, trainer.hparams)
    _, advance, close = make_segments(trainer, capacity=3)
    advance, close = jax.jit(advance), jax.jit(close)
    parts, got_states, done = [], states, 0
    while done < trainer.chunk_updates:
        n = min(3, trainer.chunk_updates - done)
        got_states, rows = advance(got_states, trainer.hparams, np.int32(n))
        assert all(np.all(np.asarray(x)[:, n:] == 0) for x in jax.tree.leaves(rows))  # rows past n stay empty
        parts.append(jax.tree.map(lambda x, n=n: np.asarray(x)[:, :n], rows))
        done += n
    assert len(parts) == -(-trainer.chunk_updates // 3) > 1
    got_states, got_eval, _ = close(got_states)
    updates = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *parts)
    for a, b in zip(jax.tree.leaves((updates, got_eval)), jax.tree.leaves((want.updates, want.eval)), strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))
    same = jax.tree.map(
        lambda a, b: bool(np.array_equal(a, b)),
        *(
            jax.tree.map(
                lambda x: np.asarray(
                    jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x
                ),
                t,
            )
            for t in (got_states, want_states)
        ),
    )
    assert all(jax.tree.leaves(same))
