"""Recurrent PPO against plain loops: the sequence loss and its gradients, the
rollout's carry resets at episode ends (terminations and truncations), no
leak across envs or seeds."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs
from jaxrl.algos import actor_critic as ac
from jaxrl.algos import ppo
from jaxrl.algos.ppo import PPOConfig

T, M = 6, 4


def setup(network: str, num_steps: int = T, num_envs: int = M, max_steps: int | None = None):
    algo = PPOConfig(network=network, rnn_size=8, hidden_sizes=(16,), num_steps=num_steps, num_minibatches=1)
    env = envs.make("cartpole")
    env_params = env.default_params
    if max_steps is not None:
        env_params = envs.with_params(env, max_steps_in_episode=max_steps)
    net = ac.make_network(algo, env, perf=False)
    hp = ppo.HParams.from_config(algo)
    state = ac.init_state(jax.random.key(0), hp, env, env_params, net, num_envs)
    return algo, env, env_params, net, hp, state


def loop_features(net, params, carry, obs, reset):
    """Per env, per step, in Python: zero the carry where an episode begins, one torso step."""
    out = [[None] * obs.shape[1] for _ in range(obs.shape[0])]
    for m in range(obs.shape[1]):
        h = carry[m]
        for t in range(obs.shape[0]):
            h = jnp.where(reset[t, m], jnp.zeros_like(h), h)
            h, f = net.apply(params, h[None], obs[t, m][None], None, method="step")
            h, out[t][m] = h[0], f[0]
    return jnp.stack([jnp.stack(row) for row in out])


def loop_loss(params, net, seq: ac.SequenceBatch, clip_eps=0.2, vf_coef=0.5, ent_coef=0.01):
    """PPO's clipped loss written out from per-step logits and values of the plain loop."""
    features = loop_features(net, params, seq.carry, seq.batch.obs, seq.reset)
    logits = net.apply(params, features, method="policy_from")
    value = net.apply(params, features, method="value_from")
    logp_all = jax.nn.log_softmax(logits)
    logp = jnp.take_along_axis(logp_all, seq.batch.action[..., None], -1)[..., 0]
    entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, -1)
    b = seq.batch
    adv = (b.advantage - b.advantage.mean()) / (b.advantage.std() + 1e-8)
    ratio = jnp.exp(logp - b.log_prob)
    policy = -jnp.mean(jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip_eps, 1 + clip_eps) * adv))
    clipped = b.value + jnp.clip(value - b.value, -clip_eps, clip_eps)
    value_loss = 0.5 * jnp.mean(jnp.maximum((value - b.target) ** 2, (clipped - b.target) ** 2))
    return policy + vf_coef * value_loss - ent_coef * jnp.mean(entropy)


@pytest.mark.parametrize("network", ["gru", "lru"])
def test_sequence_loss_and_gradients_equal_a_plain_loop(network):
    algo, env, _, net, hp, state = setup(network)
    keys = jax.random.split(jax.random.key(1), 8)
    reset = jax.random.bernoulli(keys[0], 0.3, (T, M)).at[0].set(False)
    batch = ac.Batch(
        obs=jax.random.normal(keys[1], (T, M, 4)),
        action=jax.random.randint(keys[2], (T, M), 0, 2),
        log_prob=-jax.random.uniform(keys[3], (T, M), minval=0.3, maxval=1.0),
        value=jax.random.normal(keys[4], (T, M)),
        advantage=jax.random.normal(keys[5], (T, M)),
        target=jax.random.normal(keys[6], (T, M)),
    )
    seq = ac.SequenceBatch(batch, jax.random.normal(keys[7], (M, net.carry_size)), reset)
    (loss, _), grads = jax.jit(jax.value_and_grad(lambda p: ppo.ppo_loss(p, net, seq, hp), has_aux=True))(state.params)
    ref_loss, ref_grads = jax.value_and_grad(loop_loss)(
        state.params, net, seq, float(hp.clip_eps), float(hp.vf_coef), float(hp.ent_coef)
    )
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-5, atol=1e-6)
    flat, ref_flat = jax.tree.leaves(grads), jax.tree.leaves(ref_grads)
    assert len(flat) == len(ref_flat) > 4
    for g, r in zip(flat, ref_flat, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-6)
    # the loss sees the resets: without them it differs
    no_reset = seq._replace(reset=jnp.zeros_like(reset))
    assert abs(float(ppo.ppo_loss(state.params, net, no_reset, hp)[0]) - float(loss)) > 1e-5


def test_rollout_resets_the_carry_at_every_episode_end_and_never_across_envs_or_seeds():
    # 60 steps with a 16-step time limit: truncations, and CartPole's terminations
    algo, env, env_params, net, hp, state = setup("gru", num_steps=60, max_steps=16)
    rollout = jax.jit(lambda s: ac.rollout_recurrent(s, env, env_params, net, algo))
    state, _ = rollout(state)  # the second rollout starts mid-episode from a non-zero carry
    start_carry = state.carry
    assert float(jnp.abs(start_carry).max()) > 0
    after, traj = rollout(state)
    assert bool(traj.truncated.any()) and bool((traj.terminated & ~traj.truncated).any())
    done = np.asarray(traj.terminated | traj.truncated)
    reset = np.concatenate([np.zeros_like(done[:1]), done[:-1]])
    features = loop_features(net, state.params, start_carry, traj.obs, reset)
    logits = net.apply(state.params, features, method="policy_from")
    logp = jnp.take_along_axis(jax.nn.log_softmax(logits), traj.action[..., None], -1)[..., 0]
    np.testing.assert_allclose(traj.log_prob, logp, atol=1e-5)
    np.testing.assert_allclose(traj.value, net.apply(state.params, features, method="value_from"), atol=1e-5)
    # a reset carry is zero after the last step that ended an episode
    last_done = done[-1]
    assert np.all(np.asarray(after.carry)[last_done] == 0) and np.all(np.abs(np.asarray(after.carry)[~last_done]) > 0)
    # two seeds vmapped: each equals its own rollout
    other = ac.init_state(jax.random.key(5), hp, env, env_params, net, M)
    other, _ = rollout(other)
    both = jax.tree.map(lambda a, b: jnp.stack([a, b]), state, other)
    _, trajs = jax.jit(jax.vmap(lambda s: ac.rollout_recurrent(s, env, env_params, net, algo)))(both)
    _, traj_other = rollout(other)
    np.testing.assert_allclose(trajs.log_prob[0], traj.log_prob, atol=1e-5)
    np.testing.assert_allclose(trajs.log_prob[1], traj_other.log_prob, atol=1e-5)


def test_truncation_bootstraps_from_the_pre_reset_carry():
    algo, env, env_params, net, hp, state = setup("gru", num_steps=20, max_steps=5)
    rollout = jax.jit(lambda s: ac.rollout_recurrent(s, env, env_params, net, algo))
    state, _ = rollout(state)
    start = state.carry
    state, traj = rollout(state)
    done = np.asarray(traj.terminated | traj.truncated)
    reset = np.concatenate([np.zeros_like(done[:1]), done[:-1]])
    t, m = map(int, np.argwhere(np.asarray(traj.truncated & ~traj.terminated))[0])
    h = start[m : m + 1]
    for s in range(t + 1):  # the carry after s_t, by hand
        h = jnp.where(reset[s, m], 0.0, h)
        h, _ = net.apply(state.params, h, traj.obs[s, m][None], None, method="step")
    _, f = net.apply(state.params, h, traj.final_obs[t, m][None], None, method="step")
    expected = net.apply(state.params, f, method="value_from")[0]
    np.testing.assert_allclose(traj.next_value[t, m], expected, atol=1e-5)
    # and not V(s_{t+1}) of the reset env's first observation
    assert abs(float(traj.next_value[t, m]) - float(traj.value[t + 1, m])) > 1e-6
