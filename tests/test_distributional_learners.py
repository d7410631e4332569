"""C51, QR-DQN and IQN (the DQN learner with a distributional head) against
float64 loops: one gradient step's loss and target on a batch with terminated,
truncated and running transitions, one-step and n-step windows, double and
plain bootstrap actions; the scalar head gives DQN's targets; the dueling
distributional head; and the settings a user can get wrong, through the CLI."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl.algos import dqn
from jaxrl.algos.qvalue import ValueHead, value_head
from jaxrl.nets import cosine_features
from jaxrl.nets.networks import MLP, ImplicitQuantileNetwork, QNetwork
from jaxrl.rl import optim
from tests.test_distributional import _project_loop  # Bellemare et al.'s Algorithm 1, float64

N_ACTIONS, OBS = 3, 4


def _batch(seed: int, batch: int, n: int):
    """Transitions ``[B]`` (n == 1) or windows ``[B, n]``: about a fifth end by
    termination and a fifth by truncation (done, not terminated)."""
    rng = np.random.default_rng(seed)
    shape = (batch,) if n == 1 else (batch, n)
    ends = rng.choice(3, size=shape, p=[0.6, 0.2, 0.2])  # 0 running, 1 terminated, 2 truncated
    return dqn.Transition(
        obs=jnp.asarray(rng.normal(size=(*shape, OBS)), jnp.float32),
        action=jnp.asarray(rng.integers(0, N_ACTIONS, size=shape), jnp.int32),
        reward=jnp.asarray(rng.normal(scale=2.0, size=shape), jnp.float32),
        terminated=jnp.asarray(ends == 1),
        done=jnp.asarray(ends > 0),
        next_obs=jnp.asarray(rng.normal(size=(*shape, OBS)), jnp.float32),
    )


def _setup(algo, seed: int = 0):
    head = value_head(algo)
    if head.kind == "implicit":
        network = ImplicitQuantileNetwork(N_ACTIONS, MLP((32,), "tanh"), algo.dueling, False, 16, algo.act_quantiles)
    else:
        network = QNetwork(N_ACTIONS, MLP((32,), "tanh"), algo.dueling, atoms=head.atoms)
    params = network.init(jax.random.key(seed), jnp.zeros((1, OBS)))
    # a target network that differs from the online one, so double and plain choices differ
    target = network.init(jax.random.key(seed + 1), jnp.zeros((1, OBS)))
    opt = optim.make(None)
    state = dqn.DQNState(
        params=params,
        target_params=target,
        opt_state=opt.init(params),
        buffer=None,
        env_state=None,
        obs=None,
        key=jax.random.key(0),
        epsilon=jnp.zeros(()),
        steps=jnp.zeros((), jnp.int32),
    )
    return head, network, state, opt


def _terms_loop(batch, gamma: float, scale: float):
    """(R, discount, index of the bootstrap step) per item, float64, one transition at a time."""
    reward, term, done = (np.asarray(x, np.float64) for x in (batch.reward, batch.terminated, batch.done))
    if reward.ndim == 1:
        return scale * reward, gamma * (1.0 - term), np.zeros(len(reward), int)
    rets, discounts, lasts = [], [], []
    for b in range(reward.shape[0]):
        ret, k = 0.0, 0
        for k in range(reward.shape[1]):
            ret += gamma**k * scale * reward[b, k]
            if done[b, k]:
                break
        rets.append(ret)
        discounts.append(gamma ** (k + 1) * (1.0 - term[b, k]))
        lasts.append(k)
    return np.array(rets), np.array(discounts), np.array(lasts)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _oracle_loss(head: ValueHead, network, state, batch, double: bool, gamma: float, scale: float, key=None) -> float:
    """The loss of one gradient step, from the networks' float64 outputs, item by
    item (IQN: at the levels ``key`` draws, the bootstrap action at the acting levels)."""
    return float(np.mean(_oracle_items(head, network, state, batch, double, gamma, scale, key)[0]))


def _oracle_items(head: ValueHead, network, state, batch, double, gamma, scale, key=None):
    """Each item's loss and surprise (what prioritized replay ranks by: the KL
    divergence of the prediction from the projected target, |y − Q|, or the
    item's quantile loss), float64 ``[B]`` each."""
    ret, discount, last = _terms_loop(batch, gamma, scale)
    first = batch if batch.reward.ndim == 1 else jax.tree.map(lambda x: x[:, 0], batch)
    next_obs = batch.next_obs if batch.reward.ndim == 1 else batch.next_obs[np.arange(len(last)), last]
    taus = next_taus = None
    if head.kind == "implicit":
        taus, next_taus = head.sample_levels(key, len(ret))

    forward = jax.jit(network.apply)

    def apply(params, obs, levels):
        return np.asarray(forward(params, obs) if levels is None else forward(params, obs, levels), float)

    out = apply(state.params, first.obs, taus)
    next_target = apply(state.target_params, next_obs, next_taus)
    if head.kind == "implicit":  # the bootstrap action: the mean over the evenly spaced acting levels
        next_online = apply(state.params if double else state.target_params, next_obs, None)
        double = True
    else:
        next_online = apply(state.params, next_obs, None)
    z = np.linspace(head.v_min, head.v_max, head.atoms) if head.kind == "categorical" else None
    losses, surprises = [], []
    for b in range(len(ret)):
        chooser = next_online[b] if double else next_target[b]
        if head.kind == "categorical":
            means = [float(_softmax(chooser[a]) @ z) for a in range(N_ACTIONS)]
        elif head.kind in ("quantile", "implicit"):
            means = [float(np.mean(chooser[a])) for a in range(N_ACTIONS)]
        else:
            means = list(chooser)
        best = int(np.argmax(means))
        taken = out[b, int(first.action[b])]
        if head.kind == "categorical":
            target = _project_loop(ret[b] + discount[b] * z, _softmax(next_target[b, best]), z)
            logp = taken - np.log(np.sum(np.exp(taken - taken.max()))) - taken.max()
            losses.append(-np.sum(target * logp))
            positive = target > 0
            surprises.append(np.sum(target[positive] * (np.log(target[positive]) - logp[positive])))
        elif head.kind in ("quantile", "implicit"):
            samples = ret[b] + discount[b] * next_target[b, best]
            if taus is None:
                levels = (2 * np.arange(1, head.atoms + 1) - 1) / (2 * head.atoms)
            else:
                levels = np.asarray(taus[b], np.float64)
            total = 0.0
            for i in range(head.atoms):
                for j in range(len(samples)):
                    u = samples[j] - taken[i]
                    if head.kappa == 0:  # the plain quantile loss
                        rho = abs(u)
                    elif abs(u) <= head.kappa:
                        rho = 0.5 * u * u / head.kappa
                    else:
                        rho = abs(u) - 0.5 * head.kappa
                    total += abs(levels[i] - (u < 0)) * rho / len(samples)
            losses.append(total)
            surprises.append(total)
        else:
            error = ret[b] + discount[b] * next_target[b, best] - taken
            losses.append(0.5 * error**2)
            surprises.append(abs(error))
    return np.array(losses), np.array(surprises)


CASES = [
    (dqn.C51Config(atoms=11, v_min=-5.0, v_max=5.0), 1, True),
    (dqn.C51Config(atoms=11, v_min=-5.0, v_max=5.0, n_step=3), 3, False),
    (dqn.C51Config(atoms=7, v_min=-2.0, v_max=8.0, dueling=True), 1, False),
    (dqn.QRDQNConfig(quantiles=8), 1, True),
    (dqn.QRDQNConfig(quantiles=5, kappa=0.5, n_step=3, dueling=True), 3, True),
    (dqn.QRDQNConfig(quantiles=6, kappa=0.0), 1, False),
    (dqn.DQNConfig(loss="mse", n_step=3), 3, True),
    (dqn.IQNConfig(quantiles=6, act_quantiles=5), 1, True),
    (dqn.IQNConfig(quantiles=4, act_quantiles=3, kappa=2.0, n_step=3, dueling=True), 3, False),
]


@pytest.mark.parametrize("algo,n,double", CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_one_gradient_steps_loss_equals_a_float64_loop(algo, n, double):
    algo = dataclasses.replace(algo, double=double)
    head, network, state, opt = _setup(algo)
    batch = _batch(n * 10 + int(double), 64, n)
    hp = SimpleNamespace(gamma=0.9, reward_scale=0.5, lr=1e-3, max_grad_norm=10.0, tau=1.0)
    key = jax.random.key(7)
    # one compiled step (run op by op, its few hundred ops would each be compiled alone)
    step = jax.jit(lambda state, batch, key: dqn.gradient_step(state, batch, hp, network, algo, opt, head, key))
    _, (loss, q, target, grad_norm, clipped) = step(state, batch, key)
    expected = _oracle_loss(head, network, state, batch, double, 0.9, 0.5, key)
    np.testing.assert_allclose(float(loss), expected, rtol=2e-5, atol=1e-6)
    assert np.isfinite(float(grad_norm)) and float(grad_norm) > 0
    if head.kind != "categorical":
        assert float(clipped) == 0.0


@pytest.mark.parametrize("case", [1, 4, 6], ids=["c51-3step", "qrdqn-3step", "dqn-mse-3step"])
def test_weighted_loss_and_surprise_equal_a_float64_loop(case):
    """Prioritized replay's pieces of a step: the importance-weighted mean of the
    items' losses, and each item's surprise before the step."""
    algo, n, double = CASES[case]
    algo = dataclasses.replace(algo, double=double)
    head, network, state, opt = _setup(algo)
    batch = _batch(40 + case, 64, n)
    hp = SimpleNamespace(gamma=0.9, reward_scale=0.5, lr=1e-3, max_grad_norm=10.0, tau=1.0)
    weights = np.random.default_rng(case).uniform(0.05, 1.0, size=64)
    _, stats = jax.jit(
        lambda state, batch, weights: dqn.gradient_step(
            state, batch, hp, network, algo, opt, head, None, weights, with_surprise=True
        )
    )(state, batch, jnp.asarray(weights, jnp.float32))
    losses, surprises = _oracle_items(head, network, state, batch, double, 0.9, 0.5)
    assert len(stats) == 6
    np.testing.assert_allclose(float(stats[0]), float(np.mean(weights * losses)), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(stats[5]), surprises, rtol=1e-4, atol=1e-5)
    assert np.all(np.asarray(stats[5]) >= -1e-6)


def test_the_scalar_head_gives_dqns_targets():
    """With no distribution, the step's mean target is dqn_targets' (the public piece)."""
    algo = dqn.DQNConfig(n_step=3)
    _, network, state, opt = _setup(algo)
    batch = _batch(5, 32, 3)
    hp = SimpleNamespace(gamma=0.97, reward_scale=1.0, lr=1e-3, max_grad_norm=10.0, tau=1.0)
    _, _, target, _, _ = jax.jit(lambda: dqn.gradient_step(state, batch, hp, network, algo, opt)[1])()
    next_obs = dqn.bootstrap_obs(batch)
    ys = dqn.dqn_targets(
        batch, network.apply(state.target_params, next_obs), network.apply(state.params, next_obs), 0.97
    )
    np.testing.assert_allclose(float(target), float(jnp.mean(ys)), rtol=1e-6)


def test_the_clipped_share_counts_target_mass_outside_the_support():
    head = ValueHead("categorical", 5, -1.0, 1.0)
    next_out = jnp.zeros((3, 5))  # uniform: each atom 1/5
    # item 0: r = 0.5, γ' = 1: atoms -0.5 … 1.5, one of five above 1; item 1: terminal, r = 3: all outside;
    # item 2: r = -1.5, γ' = 1: atoms -2.5 … -0.5, three of five below -1
    clipped = head.clipped(jnp.array([0.5, 3.0, -1.5]), jnp.array([1.0, 0.0, 1.0]), next_out)
    np.testing.assert_allclose(float(clipped), (1 / 5 + 1.0 + 3 / 5) / 3, rtol=1e-6)


def test_the_dueling_distributional_head_centres_advantages_per_atom():
    network = QNetwork(N_ACTIONS, MLP((8,), "tanh"), dueling=True, atoms=4)
    params = network.init(jax.random.key(0), jnp.zeros((1, OBS)))
    out = network.apply(params, jnp.ones((2, OBS)))
    assert out.shape == (2, N_ACTIONS, 4)
    # Q = V + A − mean_a A: the mean over actions is V, per atom
    inner = params["params"]
    x = jnp.tanh(jnp.ones((2, OBS)) @ inner["q_torso"]["Dense_0"]["kernel"] + inner["q_torso"]["Dense_0"]["bias"])
    v = x @ inner["value_head"]["kernel"] + inner["value_head"]["bias"]
    np.testing.assert_allclose(np.asarray(out.mean(axis=1)), np.asarray(v), atol=1e-5)


BAD = [
    (("algo=c51", "algo.v_min=10", "algo.v_max=10"), "algo.v_max=10"),
    (("algo=c51", "algo.atoms=1"), "algo.atoms=1"),
    (("algo=c51", "algo.loss=mse"), "algo.loss=mse"),
    (("algo=qrdqn", "algo.quantiles=0"), "algo.quantiles=0"),
    (("algo=qrdqn", "algo.kappa=-1"), "algo.kappa=-1"),
    (("algo=dqn", "algo.atoms=51"), "algo.atoms"),
    (("algo=iqn", "algo.act_quantiles=0"), "algo.act_quantiles=0"),
    (("env=pendulum", "algo=td3", "algo.critic=categorical", "algo.v_min=0", "algo.v_max=-1"), "algo.v_max=-1"),
    (("env=pendulum", "algo=td3", "algo.critic=quantile"), "algo.critic=quantile"),
    (("env=pendulum", "algo=td3", "algo.critic=categorical", "algo.atoms=1"), "algo.atoms=1"),
    (("env=pendulum", "algo=sac", "algo.critic=categorical", "algo.v_min=5", "algo.v_max=5"), "algo.v_max=5"),
]


def test_a_bad_support_stops_the_cli_in_one_line_with_exit_2(tmp_path):
    """As users run it: a subprocess, nothing written."""
    args, field = BAD[0]
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrl.train", "env=cartpole", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "fix:" in lines[0], proc.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args,field", BAD[1:])
def test_bad_distributional_settings_are_one_line_and_exit_2(args, field, tmp_path, capsys, monkeypatch):
    from jaxrl import train

    monkeypatch.chdir(tmp_path)
    assert train.main(["env=cartpole", *args]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "fix:" in lines[0], lines
    assert not (tmp_path / "runs").exists()


def _continuous_batch(seed: int, terminated_share: float, b: int = 32):
    """A replay batch of 3-d observations and 2-d actions in [−1, 1]; rewards × 3,
    so that some targets leave a ±5 support."""
    from jaxrl.algos.replay import Transition

    rng = np.random.default_rng(seed)
    batch = Transition(
        obs=jnp.asarray(rng.normal(size=(b, 3)), jnp.float32),
        action=jnp.asarray(rng.uniform(-1, 1, (b, 2)), jnp.float32),
        reward=jnp.asarray(rng.normal(size=b) * 3, jnp.float32),
        terminated=jnp.asarray(rng.uniform(size=b) < terminated_share),
        next_obs=jnp.asarray(rng.normal(size=(b, 3)), jnp.float32),
    )
    return rng, batch


@pytest.mark.parametrize("terminated", [False, True])
def test_td3s_categorical_critic_step_equals_a_float64_loop(terminated):
    """One categorical TD3 critic step (FastTD3's critic): the twin target
    distribution with the smaller mean at the smoothed target action, projected
    by Algorithm 1 (float64), cross-entropy summed over both critics; the
    clipped share; the actor ascends the first critic's mean."""
    from jaxrl.algos import td3
    from jaxrl.nets.networks import TwinCritic

    algo = td3.TD3Config(critic="categorical", atoms=21, v_min=-5.0, v_max=5.0, hidden_sizes=(16, 16))
    head = td3.critic_head(algo)
    actor, critic = td3.Actor(2, (16, 16)), TwinCritic((16, 16), atoms=21)
    rng, batch = _continuous_batch(3, 0.5 if terminated else 0.0)
    actor_params = actor.init(jax.random.key(0), batch.obs)
    critic_params = critic.init(jax.random.key(1), batch.obs, batch.action)
    target_critic = jax.tree.map(lambda x: x + 0.05, critic_params)  # another network than the online one
    opt = optim.make(None)
    state = SimpleNamespace(
        target_actor_params=actor_params,
        target_critic_params=target_critic,
        critic_params=critic_params,
        critic_opt=opt.init(critic_params),
        critic_steps=jnp.zeros((), jnp.int32),
    )
    state.replace = lambda **kw: SimpleNamespace(**{**vars(state), **kw})
    hp = SimpleNamespace(gamma=0.9, reward_scale=1.5, lr=1e-3, max_grad_norm=10.0, target_noise=0.2, noise_clip=0.5)
    noise = jnp.asarray(rng.normal(size=(32, 2)), jnp.float32)
    loss, q, _, clipped = jax.jit(lambda: td3.critic_step(state, batch, noise, hp, actor, critic, opt, head)[1])()

    # the oracle: float64 from the networks' outputs on
    z = np.linspace(-5.0, 5.0, 21)
    mean = np.asarray(actor.apply(actor_params, batch.next_obs), np.float64)
    next_action = np.clip(mean + np.clip(0.2 * np.asarray(noise, np.float64), -0.5, 0.5), -1.0, 1.0)
    next_logits = np.asarray(
        critic.apply(target_critic, batch.next_obs, jnp.asarray(next_action, jnp.float32)), np.float64
    )
    probs = _softmax(next_logits)  # [2, B, A]
    means = probs @ z
    picked = np.where((means[0] <= means[1])[:, None], probs[0], probs[1])
    discount = 0.9 * (1.0 - np.asarray(batch.terminated, np.float64))
    ret = 1.5 * np.asarray(batch.reward, np.float64)
    atoms = ret[:, None] + discount[:, None] * z
    target = _project_loop(atoms, picked, z)
    online = np.asarray(critic.apply(critic_params, batch.obs, batch.action), np.float64)
    log_p = online - online.max(-1, keepdims=True)
    log_p = log_p - np.log(np.exp(log_p).sum(-1, keepdims=True))
    want = sum(float(np.mean(-np.sum(target * log_p[i], axis=-1))) for i in range(2))
    assert float(loss) == pytest.approx(want, rel=1e-5)
    assert float(q) == pytest.approx(float(np.mean(_softmax(online) @ z)), rel=1e-5, abs=1e-6)
    outside = (atoms < z[0]) | (atoms > z[-1])
    share = float(np.mean(np.sum(picked * outside, axis=-1)))
    assert float(clipped) == pytest.approx(share, rel=1e-5, abs=1e-7) and share > 0

    state.actor_params, state.actor_opt = actor_params, opt.init(actor_params)
    state.replace = lambda **kw: SimpleNamespace(**{**vars(state), **kw})
    hp.tau = 0.005
    actor_loss = jax.jit(lambda: td3.actor_step(state, batch.obs, hp, actor, critic, opt, head)[1])()
    first = np.asarray(critic.apply(critic_params, batch.obs, actor.apply(actor_params, batch.obs)), np.float64)[0]
    assert float(actor_loss) == pytest.approx(-float(np.mean(_softmax(first) @ z)), rel=1e-5, abs=1e-6)


def test_sacs_categorical_critic_loss_equals_a_float64_loop():
    """SAC's categorical critics: the soft target ``r·scale + γ' (z − α log π(a'|s'))``
    under the twin target distribution with the smaller mean, projected by
    Algorithm 1 (float64), cross-entropy summed over both critics; the actor
    loss on the smaller of the critics' means."""
    from jaxrl.algos import sac
    from jaxrl.algos.qvalue import critic_head
    from jaxrl.envs.core import Box
    from jaxrl.nets.networks import TwinCritic

    algo = sac.SACConfig(critic="categorical", atoms=21, v_min=-5.0, v_max=5.0)
    head = critic_head(algo)
    space = Box(-np.ones(2, np.float32), np.ones(2, np.float32), (2,))
    actor, critic = sac.Actor(2, (16, 16)), TwinCritic((16, 16), atoms=21)
    rng, batch = _continuous_batch(4, 0.3)
    actor_params = actor.init(jax.random.key(0), batch.obs)
    critic_params = critic.init(jax.random.key(1), batch.obs, batch.action)
    target = jax.tree.map(lambda x: x - 0.05, critic_params)
    log_alpha = jnp.log(jnp.float32(0.3))
    hp = SimpleNamespace(gamma=0.9, reward_scale=1.5)
    noise = jnp.asarray(rng.normal(size=(32, 2)), jnp.float32)
    loss, (q, clipped) = jax.jit(
        lambda: sac.critic_loss(
            critic_params,
            target,
            actor_params,
            log_alpha,
            batch,
            None,
            hp,
            actor,
            critic,
            space,
            noise=noise,
            head=head,
        )
    )()

    next_action, next_logp, _ = sac._policy(actor, actor_params, batch.next_obs, space).from_noise(noise)
    z = np.linspace(-5.0, 5.0, 21)
    probs = _softmax(np.asarray(critic.apply(target, batch.next_obs, next_action), np.float64))  # [2, B, A]
    means = probs @ z
    picked = np.where((means[0] <= means[1])[:, None], probs[0], probs[1])
    discount = 0.9 * (1.0 - np.asarray(batch.terminated, np.float64))
    atoms = 1.5 * np.asarray(batch.reward, np.float64)[:, None] + discount[:, None] * (
        z - 0.3 * np.asarray(next_logp, np.float64)[:, None]
    )
    want_target = _project_loop(atoms, picked, z)
    online = np.asarray(critic.apply(critic_params, batch.obs, batch.action), np.float64)
    log_p = np.log(_softmax(online))
    want = sum(float(np.mean(-np.sum(want_target * log_p[i], axis=-1))) for i in range(2))
    assert float(loss) == pytest.approx(want, rel=1e-5)
    assert float(q) == pytest.approx(float(np.mean(_softmax(online) @ z)), rel=1e-5, abs=1e-6)
    outside = (atoms < z[0]) | (atoms > z[-1])
    assert float(clipped) == pytest.approx(float(np.mean(np.sum(picked * outside, -1))), rel=1e-5, abs=1e-7)

    a_loss, logp = jax.jit(
        lambda: sac.actor_loss(
            actor_params, critic_params, log_alpha, batch.obs, None, actor, critic, space, noise=noise, head=head
        )
    )()
    action, _, _ = sac._policy(actor, actor_params, batch.obs, space).from_noise(noise)
    qs = _softmax(np.asarray(critic.apply(critic_params, batch.obs, action), np.float64)) @ z  # [2, B]
    want_actor = np.mean(0.3 * np.asarray(logp, np.float64) - qs.min(axis=0))
    assert float(a_loss) == pytest.approx(float(want_actor), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("n", [1, 8, 64])
def test_iqn_level_features_equal_float64_cosines(n):
    """``cosine_features`` (argument reduced in turns, a Taylor polynomial) gives
    ``cos(π i τ)`` within 1e-5 of float64 for levels across [0, 1] (the ends, the
    acting midpoints and random draws), any leading shape."""
    rng = np.random.default_rng(0)
    taus = np.concatenate([[0.0, 1.0, 0.5, 1e-7, 1 - 1e-7], (2 * np.arange(1, 33) - 1) / 64, rng.random(400)])
    taus = taus.astype(np.float32).reshape(19, 23)
    got = np.asarray(cosine_features(jnp.asarray(taus), n), np.float64)
    want = np.cos(np.pi * np.arange(n) * taus.astype(np.float64)[..., None])
    assert got.shape == (19, 23, n)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
