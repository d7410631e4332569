"""Continuous control: tanh-Gaussian, replay buffer, SAC, brax adapter.

SAC on Pendulum and PPO on brax's inverted_pendulum learn at CI budgets in
tests/test_readme.py, as the docs' commands.
"""

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs, make_train, parse, validate
from jaxrl.rl import buffers
from jaxrl.rl.distributions import TanhGaussian, tanh_log_det
from jaxrl.trainer.loop import make_batched, seed_keys
from tests.toy_envs import ControlParams, QuadraticCost

has_brax = importlib.util.find_spec("brax") is not None


# --- tanh-Gaussian ------------------------------------------------------------


def reference_log_prob(u, mean, log_std, low, high):
    """float64 change of variables: a = low + (tanh u + 1)/2 (high − low)."""
    u, mean, log_std = (np.asarray(x, np.float64) for x in (u, mean, log_std))
    std = np.exp(log_std)
    gauss = -0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
    jac = np.log(1.0 - np.tanh(u) ** 2) + np.log((np.asarray(high, np.float64) - np.asarray(low, np.float64)) / 2)
    return np.sum(gauss - jac, axis=-1)


def test_tanh_gaussian_log_prob_matches_float64_and_distrax():
    key_m, key_s, key_u = jax.random.split(jax.random.key(0), 3)
    mean = jax.random.normal(key_m, (32, 3))
    log_std = jax.random.normal(key_s, (32, 3)) * 0.3
    low, high = jnp.array([-2.0, 0.0, -1.0]), jnp.array([2.0, 1.0, 1.0])
    dist = TanhGaussian(mean, log_std, low, high)
    u = mean + jnp.exp(log_std) * jax.random.normal(key_u, (32, 3))
    ours = np.asarray(dist.log_prob_pre_tanh(u))
    np.testing.assert_allclose(ours, reference_log_prob(u, mean, log_std, low, high), rtol=1e-4, atol=1e-4)

    distrax = pytest.importorskip("distrax")
    scale = (high - low) / 2
    bijector = distrax.Chain([distrax.ScalarAffine(shift=low + scale, scale=scale), distrax.Tanh()])
    ref = distrax.Transformed(distrax.MultivariateNormalDiag(mean, jnp.exp(log_std)), distrax.Block(bijector, 1))
    actions = dist.squash(u)
    np.testing.assert_allclose(np.asarray(actions), np.asarray(bijector.forward(u)), rtol=1e-6, atol=1e-6)
    inner = (jnp.abs(u) < 3).all(-1)  # distrax inverts the tanh: compare where that is well conditioned
    np.testing.assert_allclose(ours[inner], np.asarray(ref.log_prob(actions))[inner], rtol=1e-3, atol=1e-3)


def test_tanh_log_det_finite_with_finite_gradients_at_saturation():
    u = jnp.array([[-20.0, 20.0, 0.0]])
    value = tanh_log_det(u)[0]
    exact = np.sum([2 * (np.log(2) + 20 - np.log1p(np.exp(40))), 2 * (np.log(2) - 20 - np.log1p(np.exp(-40))), 0.0])
    assert np.isfinite(float(value)) and float(value) == pytest.approx(exact, rel=1e-6)
    naive = jnp.sum(jnp.log(1 - jnp.tanh(u) ** 2))
    assert not np.isfinite(float(naive))  # what the stable form avoids
    dist = TanhGaussian(jnp.zeros((1, 3)), jnp.zeros((1, 3)), -jnp.ones(3), jnp.ones(3))
    grad = jax.grad(lambda m: dist._replace(mean=m).log_prob_pre_tanh(u).sum())(jnp.zeros((1, 3)))
    assert np.all(np.isfinite(np.asarray(grad)))
    grad_u = jax.grad(lambda x: dist.log_prob_pre_tanh(x).sum())(u)
    assert np.all(np.isfinite(np.asarray(grad_u)))


# --- replay buffer --------------------------------------------------------------


def test_replay_buffer_wraps_around_and_samples_written_slots_only():
    example = {"x": jnp.zeros((2,)), "i": jnp.zeros((), jnp.int32)}
    buf = buffers.init(example, capacity=5)
    add = jax.jit(buffers.add)
    buf = add(buf, {"x": jnp.ones((3, 2)), "i": jnp.arange(1, 4)})
    assert int(buf.size) == 3 and int(buf.position) == 3
    drawn = np.asarray(jax.jit(buffers.sample, static_argnums=2)(buf, jax.random.key(0), 2000)["i"])
    assert set(drawn) == {1, 2, 3}  # never the empty slots (0)
    buf = add(buf, {"x": jnp.ones((4, 2)), "i": jnp.arange(4, 8)})  # 7 items into 5 slots
    assert int(buf.size) == 5 and int(buf.position) == 2
    np.testing.assert_array_equal(np.asarray(buf.data["i"]), [6, 7, 3, 4, 5])  # oldest (1, 2) overwritten
    drawn = np.asarray(jax.jit(buffers.sample, static_argnums=2)(buf, jax.random.key(1), 5000)["i"])
    assert set(drawn) == {3, 4, 5, 6, 7}
    counts = np.bincount(drawn, minlength=8)[3:]
    assert counts.min() > 800  # uniform


def test_replay_buffer_add_larger_than_capacity_equals_adding_one_by_one():
    example = {"i": jnp.zeros((), jnp.int32)}
    start = jax.jit(buffers.add)(buffers.init(example, capacity=4), {"i": jnp.arange(100, 103)})
    at_once = buffers.add(start, {"i": jnp.arange(1, 11)})  # 10 items into 4 slots
    one_by_one = start
    for i in range(1, 11):
        one_by_one = buffers.add(one_by_one, {"i": jnp.array([i])})
    np.testing.assert_array_equal(np.asarray(at_once.data["i"]), np.asarray(one_by_one.data["i"]))
    assert (int(at_once.position), int(at_once.size)) == (int(one_by_one.position), int(one_by_one.size)) == (1, 4)
    # the write is one scatter of at most `capacity` items at distinct slots
    # (XLA leaves a scatter with repeated indices free to apply them in any order)
    jaxpr = jax.make_jaxpr(buffers.add)(start, {"i": jnp.arange(1, 11)})
    scatters = [e for e in jaxpr.jaxpr.eqns if e.primitive.name.startswith("scatter")]
    assert [e.invars[2].aval.shape for e in scatters] == [(4,)]


def test_tanh_gaussian_from_noise_against_float64_and_sample_and_log_prob():
    mean, log_std, low, high = jnp.array([[0.3, -1.0]]), jnp.array([[-0.5, 0.2]]), -jnp.ones(2), 2 * jnp.ones(2)
    dist = TanhGaussian(mean, log_std, low, high)
    key = jax.random.key(3)
    noise = jax.random.normal(key, (1, 2))
    action, logp, u = dist.from_noise(noise)
    ref_u = np.asarray(mean, np.float64) + np.exp(np.asarray(log_std, np.float64)) * np.asarray(noise, np.float64)
    np.testing.assert_allclose(np.asarray(u), ref_u, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(action), -1.0 + (np.tanh(ref_u) + 1.0) * 1.5, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(logp), reference_log_prob(ref_u, mean, log_std, low, high), rtol=1e-5)
    for a, b in zip(dist.sample_and_log_prob(key), dist.from_noise(noise), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# --- SAC ------------------------------------------------------------------------


def test_sac_warmup_fills_the_buffer_and_the_observation_statistics_with_the_same_steps():
    """The random-action warm-up: ``learning_starts`` rounded up to whole steps
    of all envs in the buffer, actions uniform in [-1, 1], and (with
    ``normalize_obs``) running statistics of exactly the stored observations."""
    config = validate(
        parse(["env=pendulum", "algo=sac", "num_envs=3", "algo.learning_starts=100", "algo.normalize_obs=true"])
    )
    state = jax.jit(make_train(config).init)(jax.random.key(5), make_train(config).hparams).agent
    size = int(state.buffer.size)
    assert size == 102 and int(state.buffer.position) == 102
    obs = np.asarray(state.buffer.data.obs[:size], np.float64)
    action = np.asarray(state.buffer.data.action[:size])
    assert np.all(np.abs(action) <= 1.0) and action.std() > 0.4  # uniform on [-1, 1]: std 0.577
    stats = state.obs_stats
    np.testing.assert_allclose(float(stats.count) + float(stats.count_err), size + 1e-4, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(stats.mean), obs.mean(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(stats.var), obs.var(0), rtol=1e-3, atol=1e-4)


def _sac_metrics(cost, steps=4000):
    config = validate(
        parse(
            [
                "env=pendulum",
                "algo=sac",
                "seeds=2",
                "num_envs=4",
                f"total_timesteps={steps}",
                "num_evals=1",
                "eval.episodes=1",
                "algo.num_steps=8",
                "algo.hidden_sizes=[32,32]",
                "algo.learning_starts=256",
                "algo.batch_size=128",
                "algo.lr=1e-3",
                "algo.alpha_lr=3e-3",
                "algo.gamma=0.9",
            ]
        )
    )
    trainer = make_train(config, env=QuadraticCost(), env_params=ControlParams(cost=cost))
    init_b, chunk_b = make_batched(trainer)
    states = jax.jit(init_b)(seed_keys(config), trainer.hparams)
    _, metrics = jax.jit(chunk_b)(states, trainer.hparams)
    return np.asarray(metrics.updates.entropy), np.asarray(metrics.updates.alpha)


def test_sac_temperature_drives_entropy_to_its_target():
    """Target entropy −|A| = −1. With zero reward the policy is free: its
    entropy rises to at least the target and α falls; with a cost on the
    action the policy wants to narrow, and α holds its entropy at the target."""
    entropy, alpha = _sac_metrics(cost=0.0)
    assert np.all(entropy[:, -10:].mean(axis=1) > -1.0)
    assert np.all(alpha[:, -1] < 0.5 * alpha[:, 0])
    entropy, alpha = _sac_metrics(cost=10.0, steps=8000)
    np.testing.assert_allclose(entropy[:, -20:].mean(axis=1), -1.0, atol=0.25)


def _sac_parts(batch_size=32):
    from jaxrl.algos import sac
    from jaxrl.envs.core import Box
    from jaxrl.nets import TwinCritic

    actor, critic = sac.Actor(1, (16, 16)), TwinCritic((16, 16))
    space = Box(low=np.array([-2.0], np.float32), high=np.array([2.0], np.float32), shape=(1,))
    keys = jax.random.split(jax.random.key(0), 8)
    obs, next_obs = jax.random.normal(keys[0], (2, batch_size, 3))
    batch = sac.Transition(
        obs=obs,
        action=jax.random.uniform(keys[1], (batch_size, 1), minval=-1.0, maxval=1.0),
        reward=jax.random.normal(keys[2], (batch_size,)),
        terminated=jax.random.bernoulli(keys[3], 0.3, (batch_size,)),
        next_obs=next_obs,
    )
    actor_params = actor.init(keys[4], obs)
    critic_params = critic.init(keys[5], obs, batch.action)
    target_params = jax.tree.map(lambda x: x + 0.1, critic_params)
    return sac, actor, critic, space, batch, actor_params, critic_params, target_params, keys[6]


def _np_policy(actor, params, obs, noise):
    """float64 pre-tanh sample and log-density of a = tanh(u) in [-1, 1]."""
    mean, log_std = (np.asarray(x, np.float64) for x in actor.apply(params, obs))
    u = mean + np.exp(log_std) * np.asarray(noise, np.float64)
    gauss = -0.5 * ((u - mean) / np.exp(log_std)) ** 2 - log_std - 0.5 * np.log(2 * np.pi)
    return np.tanh(u), np.sum(gauss - np.log(1.0 - np.tanh(u) ** 2), axis=-1)


def test_sac_losses_equal_a_float64_hand_computation():
    sac, actor, critic, space, batch, actor_params, critic_params, target_params, key = _sac_parts()
    hp = sac.HParams.from_config(validate(parse(["env=pendulum", "algo=sac", "algo.gamma=0.9"])).algo)
    noise = jax.random.normal(key, (2, 32, 1))
    log_alpha = jnp.float32(np.log(0.3))

    loss, _ = sac.critic_loss(
        critic_params, target_params, actor_params, log_alpha, batch, None, hp, actor, critic, space, noise=noise[0]
    )
    next_a, next_logp = _np_policy(actor, actor_params, batch.next_obs, noise[0])
    next_q = np.min(np.asarray(critic.apply(target_params, batch.next_obs, jnp.asarray(next_a, jnp.float32))), 0)
    not_done = 1.0 - np.asarray(batch.terminated, np.float64)
    y = np.asarray(batch.reward) + 0.9 * not_done * (next_q - 0.3 * next_logp)
    q = np.asarray(critic.apply(critic_params, batch.obs, batch.action), np.float64)
    np.testing.assert_allclose(float(loss), 0.5 * np.sum(np.mean((q - y) ** 2, axis=-1)), rtol=1e-4)

    loss, logp = sac.actor_loss(
        actor_params, critic_params, log_alpha, batch.obs, None, actor, critic, space, noise=noise[1]
    )
    a, ref_logp = _np_policy(actor, actor_params, batch.obs, noise[1])
    q = np.min(np.asarray(critic.apply(critic_params, batch.obs, jnp.asarray(a, jnp.float32))), 0)
    np.testing.assert_allclose(np.asarray(logp), ref_logp, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(float(loss), np.mean(0.3 * ref_logp - q), rtol=1e-4, atol=1e-5)


# n-step windows of 3 steps: no end; terminated at 0; truncated at 1 (done, bootstraps);
# terminated at 2; truncated at 0 and terminated at 1 (the window stops at its first end)
WINDOW_DONE = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0, 0, 0]], bool)
WINDOW_TERMINATED = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0]], bool)


def _windows(key, n_obs=3, dim=1):
    """Six n-step windows ``[6, 3, ...]`` (:data:`WINDOW_DONE`) and, from a float64
    loop, each one's collapsed transition: ``(obs_0, a_0, Σ_{k≤m} γᵏ r_k, terminated_m,
    next_obs_m)`` with its ``γᵐ⁺¹`` (``m``: the first end, else the last step)."""
    from jaxrl.algos import replay

    k = jax.random.split(key, 4)
    obs = jax.random.normal(k[0], (6, 3, n_obs))
    next_obs = jax.random.normal(k[1], (6, 3, n_obs))
    action = jax.random.uniform(k[2], (6, 3, dim), minval=-1.0, maxval=1.0)
    reward = jax.random.normal(k[3], (6, 3))
    window = replay.WindowTransition(
        obs, action, reward, jnp.asarray(WINDOW_TERMINATED), next_obs, jnp.asarray(WINDOW_DONE)
    )
    return window, np.asarray(reward, np.float64), np.asarray(next_obs)


def _collapsed(window, reward, next_obs, gamma, scale):
    rows, gammas = [], []
    for b in range(reward.shape[0]):
        m = next((t for t in range(3) if WINDOW_DONE[b, t]), 2)
        rows.append(
            (sum(gamma**t * scale * reward[b, t] for t in range(m + 1)), WINDOW_TERMINATED[b, m], next_obs[b, m])
        )
        gammas.append(gamma ** (m + 1))
    ret, terminated, boot = (np.asarray(x) for x in zip(*rows, strict=True))
    from jaxrl.algos import replay

    one_step = replay.Transition(
        window.obs[:, 0], window.action[:, 0], jnp.asarray(ret, jnp.float32), jnp.asarray(terminated), jnp.asarray(boot)
    )
    return one_step, jnp.asarray(gammas, jnp.float32)


def test_n_step_sac_critic_loss_equals_one_step_on_the_float64_collapsed_windows():
    """SAC's n-step critic loss on windows equals its one-step loss (checked against
    a float64 hand computation above) on each window collapsed by a float64 loop:
    the discounted reward sum up to the first episode end, that step's termination
    and next observation, and ``γᵐ⁺¹`` as the bootstrap's discount."""
    sac, actor, critic, space, _, actor_params, critic_params, target_params, key = _sac_parts()
    hp = sac.HParams.from_config(validate(parse(["env=pendulum", "algo=sac", "algo.gamma=0.9"])).algo)
    hp = hp.replace(reward_scale=jnp.float32(0.5))
    window, reward, next_obs = _windows(jax.random.key(3))
    one_step, gammas = _collapsed(window, reward, next_obs, 0.9, 0.5)
    noise = jax.random.normal(key, (6, 1))
    log_alpha = jnp.float32(np.log(0.3))
    args = (critic_params, target_params, actor_params, log_alpha)
    got, _ = sac.critic_loss(*args, window, None, hp, actor, critic, space, noise=noise)
    flat_hp = hp.replace(gamma=gammas, reward_scale=jnp.float32(1.0))  # the sums are already scaled
    want, _ = sac.critic_loss(*args, one_step, None, flat_hp, actor, critic, space, noise=noise)
    np.testing.assert_allclose(float(got), float(want), rtol=1e-5)


def test_n_step_td3_targets_equal_one_step_on_the_float64_collapsed_windows():
    """TD3's n-step targets (scalar and categorical critics) equal its one-step
    targets (tested on hand-computed numbers) on the float64-collapsed windows."""
    from jaxrl.algos import qvalue, td3

    hp = td3.HParams.from_config(td3.TD3Config(gamma=0.9, reward_scale=2.0))
    window, reward, next_obs = _windows(jax.random.key(4))
    one_step, gammas = _collapsed(window, reward, next_obs, 0.9, 2.0)
    flat_hp = hp.replace(gamma=gammas, reward_scale=jnp.float32(1.0))
    mean = jax.random.uniform(jax.random.key(5), (6, 1), minval=-1.0, maxval=1.0)
    noise = jax.random.normal(jax.random.key(6), (6, 1))

    def critic(obs, action):  # twin critics that read the bootstrap observation
        return jnp.stack([obs.sum(-1) + 2.0 * action[:, 0], 3.0 * action[:, 0] - obs[:, 0]])

    got = td3.td3_targets(window, mean, noise, critic, hp)
    np.testing.assert_allclose(
        np.asarray(got), np.asarray(td3.td3_targets(one_step, mean, noise, critic, flat_hp)), rtol=1e-5
    )
    head = qvalue.ValueHead("categorical", 11, -10.0, 10.0)

    def logits(obs, action):  # [2, B, atoms]
        z = jnp.linspace(-1.0, 1.0, 11)
        return jnp.stack([obs.sum(-1)[:, None] * z, action[:, :1] * z])

    got, clipped = td3.categorical_td3_targets(window, mean, noise, logits, hp, head)
    want, clipped_one = td3.categorical_td3_targets(one_step, mean, noise, logits, flat_hp, head)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(float(clipped), float(clipped_one), rtol=1e-5)


@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_n_step_learners_store_episode_ends_and_sample_whole_windows(algo):
    """``algo.n_step=3``: the buffer holds whole steps of every env with their
    episode ends, each update samples 3-step windows of one env, and the losses
    stay finite over updates that cross Pendulum's time limit."""
    config = parse(
        [
            "env=pendulum",
            f"algo={algo}",
            "num_envs=4",
            "total_timesteps=4096",
            "algo.n_step=3",
            "algo.buffer_size=1001",  # rounded up to whole steps of the 4 envs
            "algo.learning_starts=256",
            "algo.hidden_sizes=[16,16]",
        ]
    )
    trainer = make_train(validate(config))
    agent, hp = trainer.agent, trainer.hparams
    state = jax.jit(agent.init)(jax.random.key(0), hp)
    assert state.buffer.capacity == 1004 and hasattr(state.buffer.data, "done")
    update = jax.jit(agent.update)
    for u in range(80):  # 256 + 80·4·num_steps env steps: past the 200-step time limit
        state, metrics = update(state, hp, jnp.int32(u))
    assert bool(np.asarray(state.buffer.data.done).any())
    assert np.isfinite(float(metrics.loss)) and np.isfinite(float(metrics.actor_loss)), metrics


def test_sac_gradient_step_from_noise_equals_from_its_key():
    """The update's bulk-drawn noise path is the key path with the same draws."""
    from jaxrl.rl import normalize, optim

    sac, actor, critic, space, batch, actor_params, critic_params, target_params, key = _sac_parts()
    hp = sac.HParams.from_config(validate(parse(["env=pendulum", "algo=sac"])).algo)
    state = sac.SACState(
        actor_params=actor_params,
        critic_params=critic_params,
        target_params=target_params,
        log_alpha=jnp.float32(0.0),
        actor_opt=optim.init(actor_params),
        critic_opt=optim.init(critic_params),
        alpha_opt=optim.init(jnp.float32(0.0)),
        buffer=None,
        obs_stats=normalize.init((3,)),
        env_state=None,
        obs=None,
        key=key,
    )
    key_critic, key_actor = jax.random.split(key)
    noise = jnp.stack([jax.random.normal(k, (32, 1)) for k in (key_critic, key_actor)])
    step = jax.jit(sac.gradient_step, static_argnums=(4, 5, 6))
    by_key = step(state, batch, key, hp, actor, critic, space)
    by_noise = jax.jit(lambda s, b, n: sac.gradient_step(s, b, None, hp, actor, critic, space, noise=n))(
        state, batch, noise
    )
    (state_k, metrics_k), (state_n, metrics_n) = by_key, by_noise
    for a, b in zip(
        jax.tree.leaves((state_k.replace(key=None), metrics_k)),
        jax.tree.leaves((state_n.replace(key=None), metrics_n)),
        strict=True,
    ):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)


def test_sac_rejects_discrete_envs(capsys):
    from jaxrl import train

    assert train.main(["env=cartpole", "algo=sac"]) == 2
    assert "needs continuous actions" in capsys.readouterr().err


def test_ppo_tanh_stores_pre_tanh_actions_and_clips_nothing():
    config = validate(
        parse(
            [
                "env=pendulum",
                "seeds=1",
                "num_envs=4",
                "total_timesteps=512",
                "algo.num_steps=64",
                "algo.num_minibatches=2",
            ]
        )
    )
    trainer = make_train(config)
    from jaxrl.algos import actor_critic as ppo

    state = trainer.init(jax.random.key(0), trainer.hparams)
    _, traj = jax.jit(
        lambda s: ppo.rollout(s.agent, trainer.env, trainer.env.default_params, trainer.agent.network, config.algo)
    )(state)
    u = np.asarray(traj.action)
    assert u.shape == (64, 4, 1) and np.abs(u).max() > 1.0  # pre-tanh samples, not bounded actions
    policy_out, _ = trainer.agent.network.apply(state.agent.params, traj.obs)
    dist = ppo.distribution(trainer.agent.network, state.agent.params, policy_out)
    np.testing.assert_allclose(
        np.asarray(ppo.log_prob(dist, traj.action)), np.asarray(traj.log_prob), rtol=1e-5, atol=1e-5
    )
    a = np.asarray(ppo.env_action(traj.action, trainer.agent.network, trainer.env))
    # low + (tanh u + 1)(high − low)/2 loses ~1 ulp of 2 to cancellation near a = 0
    assert np.all(np.abs(a) < 2.0) and np.allclose(a, 2.0 * np.tanh(u), rtol=1e-5, atol=1e-6)


# --- brax -----------------------------------------------------------------------


@pytest.mark.skipif(not has_brax, reason="brax extra not installed")
def test_brax_adapter_truncation_final_obs_and_fresh_resets():
    env = envs.make("inverted_pendulum", episode_length=5)
    state, obs = env.reset(jax.random.key(0))
    step = jax.jit(env.step)
    seen = [np.asarray(obs)]
    outs = []
    for i in range(11):
        state, out = step(jax.random.key(100 + i), state, jnp.zeros((1,)))
        outs.append(out)
        seen.append(np.asarray(out.obs))
    truncated = [bool(o.truncated) for o in outs]
    assert truncated == [False, False, False, False, True, False, False, False, False, True, False]
    assert env.truncation_period() == 5  # the gap PPO's rollout relies on
    assert not any(bool(o.terminated) for o in outs)
    boundary = outs[4]
    assert not np.allclose(np.asarray(boundary.obs), np.asarray(boundary.final_obs))  # reset obs ≠ final obs
    for o in outs[:4]:
        np.testing.assert_array_equal(np.asarray(o.obs), np.asarray(o.final_obs))
    assert float(boundary.episode_return) == pytest.approx(sum(float(o.reward) for o in outs[:5]))
    # each episode starts from its own random state (brax's AutoResetWrapper reuses the first)
    assert not np.allclose(seen[0], seen[5]) and not np.allclose(seen[5], seen[10])


@pytest.mark.skipif(not has_brax, reason="brax extra not installed")
def test_brax_termination_is_not_truncation():
    env = envs.make("inverted_pendulum", episode_length=1000)
    state, _ = env.reset(jax.random.key(1))
    step = jax.jit(env.step)
    for i in range(200):  # push hard one way: the pole falls and the episode terminates
        state, out = step(jax.random.key(i), state, jnp.ones((1,)))
        if bool(out.terminated):
            break
    assert bool(out.terminated) and not bool(out.truncated)
    assert abs(float(out.final_obs[1])) > 0.2  # the pole angle that ended it


def test_import_jaxrl_does_not_import_brax():
    import subprocess
    import sys

    code = "import sys, jaxrl; jaxrl.envs.names(); print('brax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr[-2000:]


def test_missing_brax_names_the_extra(monkeypatch, capsys):
    from jaxrl import train

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "brax" else real(name, *a))
    assert train.main(["env=ant"]) == 2
    err = capsys.readouterr().err
    assert "[brax]'" in err and len(err.strip().splitlines()) == 1
