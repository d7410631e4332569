"""PPO pieces on hand-computed numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.algos import actor_critic as ac
from jaxrl.algos import ppo
from jaxrl.algos.actor_critic import ADAM_EPS
from jaxrl.algos.onpolicy import explained_variance
from jaxrl.algos.ppo import PPOConfig
from jaxrl.perf import shuffle
from jaxrl.rl import optim


def hparams(**kw):
    return ppo.HParams.from_config(PPOConfig(**kw))


def init_optimizer(params):
    return optim.init(params, ADAM_EPS)


def make_batch(old_log_prob, value, advantage, target):
    n = len(advantage)
    return ppo.Batch(
        obs=jnp.zeros((n, 1)),
        action=jnp.zeros((n,), jnp.int32),
        log_prob=jnp.asarray(old_log_prob, jnp.float32),
        value=jnp.asarray(value, jnp.float32),
        advantage=jnp.asarray(advantage, jnp.float32),
        target=jnp.asarray(target, jnp.float32),
    )


def test_loss_hand_computed():
    # ratios: e^{0.5}≈1.6487 (A=+1: clipped to 1.2), e^{-0.5}≈0.6065 (A=−1: clipped to 0.8 → min picks −0.8),
    # 1.0 (A=+2)
    old = [0.0, 0.0, 0.0]
    new = jnp.array([0.5, -0.5, 0.0])
    adv = [1.0, -1.0, 2.0]
    batch = make_batch(old, value=[0.0, 1.0, 2.0], advantage=adv, target=[1.0, 1.0, 0.0])
    hp = hparams(clip_eps=0.2, vf_coef=0.5, ent_coef=0.01)
    entropy = jnp.array([1.0, 2.0, 3.0])
    value = jnp.array([0.5, 1.5, 1.0])
    loss, m = ppo.loss_from_outputs(new, entropy, value, batch, hp, clip_value=False, normalize_advantages=False)
    r = np.exp([0.5, -0.5, 0.0])
    surrogate = [min(r[0] * 1, 1.2 * 1), min(r[1] * -1, 0.8 * -1), min(1.0 * 2, 1.0 * 2)]
    policy = -np.mean(surrogate)
    value_loss = 0.5 * np.mean([(0.5 - 1) ** 2, (1.5 - 1) ** 2, (1.0 - 0) ** 2])
    total = policy + 0.5 * value_loss - 0.01 * 2.0
    assert float(m.policy) == pytest.approx(policy, rel=1e-6)
    assert float(m.value) == pytest.approx(value_loss, rel=1e-6)
    assert float(m.entropy) == pytest.approx(2.0)
    assert float(loss) == pytest.approx(total, rel=1e-6)
    assert float(m.clip_frac) == pytest.approx(2 / 3)
    kl = np.mean((r - 1) - np.log(r))
    assert float(m.approx_kl) == pytest.approx(kl, rel=1e-5)


def test_value_clipping_hand_computed():
    # old value 0, new value 1, target 1, ε=0.2: clipped value 0.2 → error (0.2−1)²=0.64 > 0 → 0.5·0.64
    batch = make_batch([0.0], value=[0.0], advantage=[0.0], target=[1.0])
    hp = hparams(clip_eps=0.2)
    _, m = ppo.loss_from_outputs(
        jnp.zeros(1), jnp.zeros(1), jnp.ones(1), batch, hp, clip_value=True, normalize_advantages=False
    )
    assert float(m.value) == pytest.approx(0.5 * 0.64, rel=1e-6)
    _, m = ppo.loss_from_outputs(
        jnp.zeros(1), jnp.zeros(1), jnp.ones(1), batch, hp, clip_value=False, normalize_advantages=False
    )
    assert float(m.value) == pytest.approx(0.0, abs=1e-7)


def test_advantage_normalization_per_minibatch():
    batch = make_batch([0.0, 0.0], value=[0, 0], advantage=[3.0, 5.0], target=[0, 0])
    hp = hparams(clip_eps=10.0, ent_coef=0.0, vf_coef=0.0)
    # ratio 1 → policy loss = −mean(normalized advantages) = 0
    loss, _ = ppo.loss_from_outputs(jnp.zeros(2), jnp.zeros(2), jnp.zeros(2), batch, hp, normalize_advantages=True)
    assert float(loss) == pytest.approx(0.0, abs=1e-6)
    loss, _ = ppo.loss_from_outputs(jnp.zeros(2), jnp.zeros(2), jnp.zeros(2), batch, hp, normalize_advantages=False)
    assert float(loss) == pytest.approx(-4.0)


def _tiny_network():
    from jaxrl.nets.networks import ActorCritic

    return ActorCritic(action_dim=3, discrete=True, hidden_sizes=(8,), perf=True)  # the XLA:CPU shuffle, as below


def test_sgd_step_clips_global_norm_and_applies_lr():
    net = _tiny_network()
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))
    batch = ppo.Batch(
        obs=jax.random.normal(jax.random.PRNGKey(1), (16, 4)),
        action=jnp.arange(16) % 3,
        log_prob=jnp.full((16,), -1.0),
        value=jnp.zeros(16),
        advantage=jax.random.normal(jax.random.PRNGKey(2), (16,)) * 100,
        target=jnp.full((16,), 100.0),
    )
    algo = PPOConfig(lr_schedule="constant")
    hp = hparams(max_grad_norm=0.5)
    out = ppo.sgd_step(params, init_optimizer(params), jnp.float32(1e-3), batch, hp, net, algo)
    assert float(out.grad_norm) > 0.5  # the raw gradient was large
    # First Adam step moves every parameter by ≈ lr·sign(g) (bias-corrected m/√v = ±1).
    deltas = jax.tree.map(lambda a, b: jnp.abs(a - b), out.params, params)
    flat = jnp.concatenate([d.ravel() for d in jax.tree.leaves(deltas)])
    assert float(flat.max()) == pytest.approx(1e-3, rel=1e-2)
    # the learning rate is not touched outside lr_schedule=adaptive
    assert float(out.lr) == pytest.approx(1e-3)


@pytest.mark.parametrize("normalize", [True, False])
def test_learn_equals_a_plain_loop_over_shuffled_minibatches(normalize):
    """``sgd_epochs`` against a Python loop: per epoch the key split and the
    permutation, each minibatch's rows gathered with NumPy, its advantages
    normalized over those rows, then one ``sgd_step`` — same rows, same order."""
    net, n, n_mb, epochs = _tiny_network(), 24, 3, 2
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))
    ks = jax.random.split(jax.random.PRNGKey(5), 4)
    batch = ppo.Batch(
        obs=jax.random.normal(ks[0], (n, 4)),
        action=jax.random.randint(ks[1], (n,), 0, 3),
        log_prob=jnp.full((n,), -1.1),
        value=jax.random.normal(ks[2], (n,)),
        advantage=jax.random.normal(ks[3], (n,)) * 3.0 + 1.0,
        target=jnp.linspace(-1.0, 2.0, n),
    )
    algo = PPOConfig(update_epochs=epochs, num_minibatches=n_mb, lr_schedule="constant", normalize_advantages=normalize)
    hp, lr, key = hparams(), jnp.float32(3e-3), jax.random.key(11)
    opt = init_optimizer(params)
    out = jax.jit(lambda p, o, b, k: ppo.sgd_epochs(p, o, lr, b, k, hp, net, algo))(params, opt, batch, key)

    step = jax.jit(lambda p, o, mb: ppo.sgd_step(p, o, lr, mb, hp, net, algo, advantages_normalized=True))
    host = jax.tree.map(np.asarray, batch)
    p, o, sums = params, opt, []
    for _ in range(epochs):
        key, key_perm = jax.random.split(key)
        perm = np.asarray(shuffle.permutation(key_perm, n))
        for rows in perm.reshape(n_mb, n // n_mb):
            mb = jax.tree.map(lambda x: x[rows], host)  # noqa: B023
            adv = mb.advantage
            if normalize:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            r = step(p, o, mb._replace(advantage=adv))
            p, o = r.params, r.opt_state
            sums.append([*map(float, r.metrics), float(r.grad_norm)])
    for a, b in zip(jax.tree.leaves(out.params), jax.tree.leaves(p), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    means = np.mean(sums, axis=0)
    np.testing.assert_allclose([*map(float, out.metrics), float(out.grad_norm)], means, rtol=1e-4, atol=1e-6)
    assert not np.allclose(np.asarray(jax.tree.leaves(out.params)[0]), np.asarray(jax.tree.leaves(params)[0]))


@pytest.mark.parametrize(
    "kl, lr, expected",
    [
        (0.05, 1e-3, 1e-3 / 1.5),
        (0.001, 1e-3, 1e-3 * 1.5),
        (0.01, 1e-3, 1e-3),
        (0.001, 9e-3, 1e-2),  # kept ≤ max_lr
        (0.05, 1.2e-6, 1e-6),  # kept ≥ min_lr
    ],
)
def test_adaptive_lr_rule(kl, lr, expected, monkeypatch):
    """rl_games rule: ÷1.5 above 2·target, ×1.5 below target/2, else unchanged."""
    net = _tiny_network()
    params = net.init(jax.random.PRNGKey(0), jnp.zeros((1, 4)))
    metrics = ppo.LossMetrics(*(jnp.float32(0.0),) * 4, jnp.float32(kl), jnp.float32(0.0))
    monkeypatch.setattr(ppo, "ppo_loss", lambda params, *a, **k: (jnp.sum(jax.tree.leaves(params)[0]) * 0.0, metrics))
    batch = ppo.Batch(
        jnp.zeros((2, 4)), jnp.zeros(2, jnp.int32), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2), jnp.zeros(2)
    )
    algo = PPOConfig(lr_schedule="adaptive")
    hp = hparams(target_kl=0.01, min_lr=1e-6, max_lr=1e-2)
    out = ppo.sgd_step(params, init_optimizer(params), jnp.float32(lr), batch, hp, net, algo)
    assert float(out.lr) == pytest.approx(expected, rel=1e-5)


def test_explained_variance():
    targets = jnp.array([1.0, 2.0, 3.0, 4.0])
    assert float(explained_variance(targets, targets)) == pytest.approx(1.0)
    assert float(explained_variance(jnp.zeros(4) + targets.mean(), targets)) == pytest.approx(0.0, abs=1e-6)
    assert float(explained_variance(jnp.zeros(4), jnp.ones(4))) == 0.0


def _small_cartpole():
    """Config and trainer of a one-seed CartPole run: 3 envs × 32 steps, normalized observations."""
    from jaxrl import parse, validate
    from jaxrl.trainer.loop import make_train

    config = validate(
        parse(
            [
                "env=cartpole",
                "seeds=1",
                "num_envs=3",
                "total_timesteps=96",
                "algo.num_steps=32",
                "algo.normalize_obs=true",
            ]
        )
    )
    return config, make_train(config)


@pytest.mark.parametrize("limit", [4, 5])
def test_rollout_next_values_match_a_full_pass_over_final_obs(limit):
    """With a known time limit the rollout computes V(final_obs) only at the
    truncations (⌈T/P⌉ slots per env) and reuses V(s_{t+1}) elsewhere: the
    result must equal V(final_obs) of every step (oracle: one pass over all
    of them), wherever GAE uses it (not terminated)."""
    config, trainer = _small_cartpole()
    params = trainer.env.default_params.replace(max_steps_in_episode=limit)
    assert trainer.env.truncation_period(params) == limit  # so the rollout takes the compact path
    state = trainer.init(jax.random.key(1), trainer.hparams).agent
    network = trainer.agent.network
    state, traj = jax.jit(lambda s: ac.rollout(s, trainer.env, params, network, config.algo))(state)
    truncated, terminated = np.asarray(traj.truncated), np.asarray(traj.terminated)
    if limit == 4:  # as many truncations as slots (⌈32/4⌉): every slot used
        assert truncated.sum(axis=0).max() == 8
    else:  # some env's last step did not end an episode: its value is V(s_T)
        assert not (truncated[-1] | terminated[-1]).all()
    oracle = ac.value_of(
        state,
        network.apply(state.params, ac.prepare_obs(state, traj.final_obs, config.algo), method="value"),
        config.algo,
    )
    used = ~terminated
    np.testing.assert_allclose(np.asarray(traj.next_value)[used], np.asarray(oracle)[used], rtol=1e-5, atol=1e-5)
    # and the compact path is what ran: without a period the rollout gives the same numbers
    full = jax.jit(lambda s: ac.rollout(s, _NoPeriod(trainer.env), params, network, config.algo))(
        trainer.init(jax.random.key(1), trainer.hparams).agent
    )[1]
    np.testing.assert_allclose(
        np.asarray(full.next_value)[used], np.asarray(traj.next_value)[used], rtol=1e-5, atol=1e-5
    )


def test_rollout_log_probs_are_the_behaviour_policys():
    """The log-probs are computed after the loop from the stacked logits: they
    must equal log softmax(π(s_t))[a_t] of the acting parameters and
    normalizer on the stored observations (oracle: numpy, float64)."""
    config, trainer = _small_cartpole()
    state = trainer.init(jax.random.key(2), trainer.hparams).agent
    network = trainer.agent.network
    _, traj = jax.jit(lambda s: ac.rollout(s, trainer.env, trainer.env.default_params, network, config.algo))(state)
    logits = np.asarray(
        network.apply(state.params, ac.prepare_obs(state, traj.obs, config.algo), method="policy"), np.float64
    )
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    action = np.asarray(traj.action)
    assert len(np.unique(action)) == 2  # both actions sampled
    expected = np.take_along_axis(log_softmax, action[..., None], axis=-1)[..., 0]
    np.testing.assert_allclose(np.asarray(traj.log_prob), expected, rtol=1e-5, atol=1e-6)


class _NoPeriod:
    """An env that does not declare its truncation period (forces the full pass)."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def truncation_period(self, params=None):
        return None
