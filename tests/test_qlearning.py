"""PQN, DQN and TD3 pieces against independent oracles: Q(λ) targets against a
float64 loop of the recursion, n-step / double-DQN / TD3 targets on hand-computed
numbers, the target network's schedule, the ε schedule's endpoints, greedy action
selection, and the replay buffer's n-step windows.

Learning at CI budgets, resume, sweeps and the docs' commands:
tests/test_value_runs.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import make_train, parse
from jaxrl.algos import dqn, td3
from jaxrl.rl import buffers
from jaxrl.rl.qlearning import epsilon_greedy, linear_epsilon, n_step_return, q_lambda, q_target

# --- Q(λ) ------------------------------------------------------------------------


def q_lambda_loop(rewards, q_max, next_q_max, terminated, truncated, gamma, lam):
    """Peng's Q(λ) written directly in float64: G_t = r_t + γ[(1 − λ) max Q(s_{t+1}) + λ G_{t+1}]
    inside an episode, r_t + γ(1 − terminated) max Q(final obs) where it ended, and a full
    bootstrap at the rollout's last step. ``q_max`` is not used: the recursion never needs
    max Q(s_t), so this oracle is independent of the GAE form."""
    del q_max
    T, N = rewards.shape
    G = np.zeros((T, N))
    for n in range(N):
        for t in reversed(range(T)):
            r = float(rewards[t, n])
            if terminated[t, n]:
                G[t, n] = r
            elif truncated[t, n] or t == T - 1:
                G[t, n] = r + gamma * float(next_q_max[t, n])
            else:
                G[t, n] = r + gamma * ((1 - lam) * float(next_q_max[t, n]) + lam * G[t + 1, n])
    return G


def rollout_arrays(seed: int, T: int = 37, N: int = 5):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, N))
    next_q = rng.normal(size=(T, N)) * 3
    q = rng.normal(size=(T, N)) * 3
    ended = rng.random((T, N)) < 0.15
    terminated = ended & (rng.random((T, N)) < 0.5)
    truncated = ended & ~terminated
    # inside an episode max Q(s_{t+1}) is the next step's max Q(s_t)
    for t in range(T - 1):
        keep = ~ended[t]
        q[t + 1, keep] = next_q[t, keep]
    return rewards, q, next_q, terminated, truncated


@pytest.mark.parametrize("method", ["associative", "scan"])
@pytest.mark.parametrize("lam", [0.0, 0.65, 1.0])
def test_q_lambda_matches_a_float64_loop_with_terminations_and_truncations(method, lam):
    rewards, q, next_q, terminated, truncated = rollout_arrays(1)
    assert terminated.any() and truncated.any()
    done = terminated | truncated
    got = jax.jit(lambda *a: q_lambda(*a, 0.97, lam, method=method))(
        jnp.asarray(rewards, jnp.float32),
        jnp.asarray(q, jnp.float32),
        jnp.asarray(next_q, jnp.float32),
        jnp.asarray(terminated),
        jnp.asarray(done),
    )
    want = q_lambda_loop(rewards, q, next_q, terminated, truncated, 0.97, lam)
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)


def test_q_lambda_zero_is_one_step_q_learning():
    rewards, q, next_q, terminated, truncated = rollout_arrays(2)
    got = q_lambda(rewards, q, next_q, terminated, terminated | truncated, 0.9, 0.0)
    np.testing.assert_allclose(np.asarray(got), rewards + 0.9 * (1 - terminated) * next_q, rtol=1e-5, atol=1e-5)


# --- n-step, double-DQN and TD3 targets ---------------------------------------------


def test_n_step_return_by_hand():
    # window 1: no episode end → 1 + .5·2 + .25·3, bootstrap γ³ at step 2
    # window 2: truncated at step 1 → 1 + .5·2, bootstrap γ² from step 1's next obs
    # window 3: terminated at step 0 → 4, no bootstrap
    rewards = jnp.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    terminated = jnp.array([[0, 0, 0], [0, 0, 0], [1, 0, 0]], bool)
    done = jnp.array([[0, 0, 0], [0, 1, 0], [1, 0, 0]], bool)
    ret, discount, last = n_step_return(rewards, terminated, done, 0.5)
    np.testing.assert_allclose(np.asarray(ret), [2.75, 2.0, 4.0])
    np.testing.assert_allclose(np.asarray(discount), [0.125, 0.25, 0.0])
    np.testing.assert_array_equal(np.asarray(last), [2, 1, 0])


def test_double_dqn_target_by_hand():
    next_q_target = jnp.array([[1.0, 5.0, 2.0], [0.0, -1.0, 3.0]])
    next_q_online = jnp.array([[9.0, 0.0, 0.0], [0.0, 4.0, 1.0]])
    np.testing.assert_allclose(np.asarray(q_target(next_q_target)), [5.0, 3.0])  # max of the target net
    np.testing.assert_allclose(np.asarray(q_target(next_q_target, next_q_online)), [1.0, -1.0])  # online argmax
    batch = dqn.Transition(
        obs=jnp.zeros((2, 1)),
        action=jnp.zeros(2, jnp.int32),
        reward=jnp.array([1.0, 2.0]),
        terminated=jnp.array([False, True]),
        done=jnp.array([True, True]),  # the first was truncated: it still bootstraps
        next_obs=jnp.zeros((2, 1)),
    )
    got = dqn.dqn_targets(batch, next_q_target, next_q_online, 0.9, 2.0)
    np.testing.assert_allclose(np.asarray(got), [2.0 + 0.9 * 1.0, 4.0])


def test_n_step_dqn_target_bootstraps_from_the_windows_stopping_observation():
    batch = dqn.Transition(
        obs=jnp.zeros((1, 3, 1)),
        action=jnp.zeros((1, 3), jnp.int32),
        reward=jnp.array([[1.0, 1.0, 1.0]]),
        terminated=jnp.zeros((1, 3), bool),
        done=jnp.array([[False, True, False]]),  # truncated at step 1
        next_obs=jnp.array([[[10.0], [20.0], [30.0]]]),
    )
    np.testing.assert_array_equal(np.asarray(dqn.bootstrap_obs(batch)), [[20.0]])
    got = dqn.dqn_targets(batch, jnp.array([[7.0]]), None, 0.5)
    np.testing.assert_allclose(np.asarray(got), [1.0 + 0.5 + 0.25 * 7.0])


def test_td3_target_by_hand():
    hp = td3.HParams.from_config(td3.TD3Config(target_noise=0.5, noise_clip=0.3, gamma=0.9, reward_scale=1.0))
    batch = td3.Transition(
        obs=jnp.zeros((2, 1)),
        action=jnp.zeros((2, 1)),
        reward=jnp.array([1.0, 1.0]),
        terminated=jnp.array([False, True]),
        next_obs=jnp.zeros((2, 1)),
    )
    mean = jnp.array([[0.9], [0.0]])
    noise = jnp.array([[1.0], [-0.2]])  # 0.5·1 = .5 clipped to .3 → 1.2 clipped to 1; 0.5·(−.2) = −.1
    seen = []

    def critic(obs, action):
        seen.append(action)
        return jnp.stack([2.0 * action[:, 0], 3.0 * action[:, 0] + 0.5])  # twin critics

    got = td3.td3_targets(batch, mean, noise, critic, hp)
    np.testing.assert_allclose(np.asarray(seen[0][:, 0]), [1.0, -0.1], rtol=1e-6)
    # min(2·1, 3·1 + .5) = 2 → 1 + .9·2; terminated: 1
    np.testing.assert_allclose(np.asarray(got), [1.0 + 0.9 * 2.0, 1.0], rtol=1e-6)


# --- exploration -------------------------------------------------------------------


def test_correlated_noise_is_an_ar1_process():
    """Against a float64 loop; ρ = 0 gives the white draws bit for bit; long runs
    have unit variance and lag-k autocorrelation ρ^k."""
    white = np.asarray(jax.random.normal(jax.random.key(0), (50, 3, 2)))
    last = np.asarray(jax.random.normal(jax.random.key(1), (3, 2)))
    for rho in (0.0, 0.5, 0.95):
        got = np.asarray(td3.correlated_noise(jnp.asarray(last), jnp.asarray(white), jnp.float32(rho)))
        n, want = last.astype(np.float64), []
        for t in range(50):
            n = rho * n + np.sqrt(1 - rho**2) * white[t]
            want.append(n)
        np.testing.assert_allclose(got, np.stack(want), rtol=1e-5, atol=1e-5)
        if rho == 0.0:
            np.testing.assert_array_equal(got, white)
    long = jax.random.normal(jax.random.key(2), (20000, 64, 1))
    n = np.asarray(td3.correlated_noise(jnp.zeros((64, 1)), long, jnp.float32(0.9)))[100:, :, 0]
    assert abs(n.var() - 1.0) < 0.03, n.var()
    for lag in (1, 5):
        corr = np.mean(n[lag:] * n[:-lag]) / n.var()
        assert abs(corr - 0.9**lag) < 0.02, (lag, corr)


def test_linear_epsilon_endpoints():
    eps = lambda step, frac=0.5: float(linear_epsilon(step, 1.0, 0.05, frac, 1000))  # noqa: E731
    assert eps(0) == pytest.approx(1.0)
    assert eps(250) == pytest.approx(0.525)
    assert eps(500) == pytest.approx(0.05) and eps(999) == pytest.approx(0.05)
    assert eps(0, frac=0.0) == pytest.approx(0.05)


def test_epsilon_greedy_takes_the_argmax_unless_the_coin_falls_below_epsilon():
    q = jnp.array([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0]])
    random_action = jnp.array([2, 1])
    np.testing.assert_array_equal(np.asarray(epsilon_greedy(q, 0.5, jnp.array([0.9, 0.1]), random_action)), [1, 1])
    np.testing.assert_array_equal(np.asarray(epsilon_greedy(q, 0.0, jnp.array([0.0, 0.0]), random_action)), [1, 0])


# --- replay windows ------------------------------------------------------------------


def test_sequence_indices_are_consecutive_steps_of_one_env_behind_the_write_pointer():
    N, capacity, n = 3, 12, 3
    example = {"step": jnp.zeros((), jnp.int32), "env": jnp.zeros((), jnp.int32)}
    buffer = buffers.init(example, capacity)
    for step in range(7):  # 21 items into 12 slots: wrapped
        buffer = buffers.add(buffer, {"step": jnp.full((N,), step), "env": jnp.arange(N)})
    index = buffers.sequence_indices(buffer, jax.random.key(0), (4000,), n, N)
    items = buffers.take(buffer, index)
    steps, env = np.asarray(items["step"]), np.asarray(items["env"])
    assert (env == env[:, :1]).all()  # one env per window
    assert (np.diff(steps, axis=1) == 1).all()  # consecutive steps
    assert steps.min() == 3 and steps.max() == 6  # the 4 stored steps, never past the newest
    assert set(steps[:, 0]) == {3, 4}  # every start whose window is written
    assert set(env[:, 0]) == {0, 1, 2}


# --- agents: target schedule, delay, greedy act ---------------------------------------


def small(*overrides: str):
    return parse(["env=cartpole", "num_envs=4", "total_timesteps=2048", *overrides])


def test_dqn_target_network_moves_only_every_interval_and_by_tau():
    config = small("algo=dqn", "algo.learning_starts=64", "algo.target_update_interval=3", "algo.tau=0.5")
    trainer = make_train(config)
    agent = trainer.agent
    hp = trainer.hparams
    state = jax.jit(agent.init)(jax.random.key(0), hp)
    batch = buffers.take(state.buffer, jnp.arange(16))
    step = jax.jit(lambda s: dqn.gradient_step(s, batch, hp, agent.network, config.algo))
    for i in range(1, 7):
        before = state
        state, _ = step(state)
        changed = not all(
            np.array_equal(a, b)
            for a, b in zip(jax.tree.leaves(before.target_params), jax.tree.leaves(state.target_params), strict=True)
        )
        assert changed == (i % 3 == 0), i
        if changed:
            for t, old, p in zip(
                jax.tree.leaves(state.target_params),
                jax.tree.leaves(before.target_params),
                jax.tree.leaves(state.params),
                strict=True,
            ):
                np.testing.assert_allclose(np.asarray(t), 0.5 * np.asarray(old) + 0.5 * np.asarray(p), rtol=1e-6)


@pytest.mark.parametrize("algo", ["pqn", "dqn"])
def test_greedy_action_is_the_argmax_of_the_q_network(algo):
    extra = ("algo.learning_starts=64",) if algo == "dqn" else ("algo.num_steps=8", "algo.num_minibatches=4")
    trainer = make_train(small(f"algo={algo}", *extra))
    agent = trainer.agent
    state = jax.jit(agent.init)(jax.random.key(1), trainer.hparams)
    state, _ = jax.jit(agent.update)(state, trainer.hparams, jnp.int32(0))
    leaves, tree = jax.tree.flatten(state.params)  # random parameters: a policy that is not constant
    keys = jax.random.split(jax.random.key(5), len(leaves))
    state = state.replace(
        params=jax.tree.unflatten(tree, [jax.random.normal(k, x.shape) for k, x in zip(keys, leaves, strict=True)])
    )
    obs = jax.random.normal(jax.random.key(2), (256, 4))
    actions = jax.jit(agent.act)(state, obs, jax.random.key(3))
    q = agent.network.apply(state.params, obs)
    np.testing.assert_array_equal(np.asarray(actions), np.argmax(np.asarray(q), axis=-1))
    assert len(set(np.asarray(actions).tolist())) == 2  # not a constant policy
    # sampling at ε = 1 is uniform over the actions
    sampled = jax.jit(agent.sample)(state.replace(epsilon=jnp.float32(1.0)), jnp.zeros((4000, 4)), jax.random.key(4))
    counts = np.bincount(np.asarray(sampled), minlength=2)
    assert abs(counts[0] - 2000) < 150


def td3_trainer(grouped: bool):
    config = parse(
        [
            "env=pendulum",
            "algo=td3",
            "num_envs=2",
            "total_timesteps=1024",
            "algo.learning_starts=128",
            "algo.num_steps=2",
            "algo.hidden_sizes=[16,16]",
        ]
    )
    from jaxrl import envs

    env = envs.from_config(config)
    agent = td3.make_agent(config.algo, env, 2, 10, grouped=grouped)
    return agent, td3.HParams.from_config(config.algo)


def test_td3_actor_and_targets_move_every_policy_delay_critic_steps_and_grouping_changes_nothing():
    grouped, hp = td3_trainer(True)
    masked, _ = td3_trainer(False)
    state_g = state_m = jax.jit(grouped.init)(jax.random.key(0), hp)
    update_g, update_m = jax.jit(grouped.update), jax.jit(masked.update)
    for u in range(3):  # 4 critic steps per update: actor steps after critic steps 2 and 4
        before = state_g
        state_g, metrics_g = update_g(state_g, hp, jnp.int32(u))
        state_m, metrics_m = update_m(state_m, hp, jnp.int32(u))
        assert int(state_g.critic_steps) == 4 * (u + 1)
        for a, b in zip(jax.tree.leaves(state_g), jax.tree.leaves(state_m), strict=True):
            if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
                a, b = jax.random.key_data(a), jax.random.key_data(b)
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(float(metrics_g.actor_loss), float(metrics_m.actor_loss), rtol=1e-5)
        assert not np.array_equal(
            jax.tree.leaves(before.target_actor_params)[0], jax.tree.leaves(state_g.target_actor_params)[0]
        )


def test_td3_one_critic_step_per_update_moves_the_actor_every_other_update():
    config = parse(
        [
            "env=pendulum",
            "algo=td3",
            "num_envs=1",
            "total_timesteps=1024",
            "algo.num_steps=1",  # over the Pendulum preset's 8: one critic step per update
            "algo.learning_starts=64",
            "algo.hidden_sizes=[16,16]",
        ]
    )
    trainer = make_train(config)
    agent, hp = trainer.agent, trainer.hparams
    state = jax.jit(agent.init)(jax.random.key(0), hp)
    update = jax.jit(agent.update)
    for u in range(4):
        before = state
        state, _ = update(state, hp, jnp.int32(u))
        moved = not np.array_equal(jax.tree.leaves(before.actor_params)[0], jax.tree.leaves(state.actor_params)[0])
        critic_moved = not np.array_equal(
            jax.tree.leaves(before.critic_params)[0], jax.tree.leaves(state.critic_params)[0]
        )
        assert critic_moved and moved == (u % 2 == 1), u


def test_td3_deterministic_action_is_the_actor_mean_scaled_to_the_bounds():
    config = parse(["env=pendulum", "algo=td3", "num_envs=1", "total_timesteps=1024", "algo.learning_starts=64"])
    trainer = make_train(config)
    agent = trainer.agent
    state = jax.jit(agent.init)(jax.random.key(0), trainer.hparams)
    obs = jax.random.normal(jax.random.key(1), (8, 3))
    actor, _ = agent.network
    want = 2.0 * np.asarray(actor.apply(state.actor_params, obs))  # Pendulum: [−2, 2]
    np.testing.assert_allclose(np.asarray(agent.act(state, obs, jax.random.key(2))), want, rtol=1e-5, atol=1e-6)
