"""The fast off-policy recipe's pieces (docs/distributional.md): AdamW against
optax's own, LayerNorm critics of their own widths, TD3's per-env exploration
noise scales (FastTD3's), and named presets (``preset=fast``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxrl.core.errors import ConfigError
from jaxrl.rl import optim
from jaxrl.run.overrides import parse


def _tree(key: jax.Array) -> dict:
    k1, k2 = jax.random.split(key)
    return {"w": jax.random.normal(k1, (3, 4)), "b": jax.random.normal(k2, (4,))}


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_the_default_optimizer_with_weight_decay_is_optax_adamw(weight_decay):
    """Ten steps of jaxrl's flattened chain (clip off) against ``optax.adamw``
    (``weight_decay=0``: ``optax.adam``) on the same gradients."""
    params = ours = _tree(jax.random.key(0))
    lr = 3e-3
    reference = optax.adamw(lr, weight_decay=weight_decay) if weight_decay else optax.adam(lr)
    ref_state = reference.init(params)
    tx = optim.make(None, weight_decay=weight_decay)
    state = tx.init(ours)
    for step in range(10):
        grads = _tree(jax.random.key(step + 1))
        updates, ref_state = reference.update(grads, ref_state, params)
        params = optax.apply_updates(params, updates)
        ours, state, _ = optim.apply(ours, grads, state, jnp.float32(lr), jnp.float32(1e10), optimizer=tx)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    if weight_decay:  # the decay moved the parameters: without it they differ
        plain = _tree(jax.random.key(0))
        plain_state = optim.make(None).init(plain)
        for step in range(10):
            plain, plain_state, _ = optim.apply(
                plain, _tree(jax.random.key(step + 1)), plain_state, jnp.float32(lr), jnp.float32(1e10)
            )
        assert not np.allclose(np.asarray(plain["w"]), np.asarray(ours["w"]))


def test_weight_decay_refuses_a_passed_optimizer():
    with pytest.raises(ValueError, match="optax.adamw"):
        optim.make(optax.sgd(0.1), weight_decay=0.1)


def _td3(*overrides: str):
    from jaxrl import envs
    from jaxrl.algos import td3

    config = parse(["env=pendulum", "algo=td3", "num_envs=6", "algo.hidden_sizes=[16,16]", *overrides])
    agent = td3.make_agent(config.algo, envs.from_config(config), config.num_envs, 10)
    return config, agent, td3.HParams.from_config(config.algo)


def test_critics_take_their_own_widths_and_layer_norm():
    config, agent, hp = _td3("algo.critic_hidden_sizes=[24,8]", "algo.norm=layer_norm", "algo.learning_starts=6")
    state = jax.jit(agent.init)(jax.random.key(0), hp)
    shapes = {jax.tree_util.keystr(p): x.shape for p, x in jax.tree_util.tree_leaves_with_path(state.critic_params)}
    kernels = sorted(s for k, s in shapes.items() if k.endswith("['kernel']"))
    assert kernels == sorted([(4, 24), (24, 8), (8, 1)] * 2), kernels  # [obs 3 + action 1] → 24 → 8 → 1, twice
    assert sum("LayerNorm" in k for k in shapes) == 2 * 2 * 2  # scale and bias of 2 layers in each twin
    actor = {jax.tree_util.keystr(p): x.shape for p, x in jax.tree_util.tree_leaves_with_path(state.actor_params)}
    assert not any("LayerNorm" in k for k in actor) and (3, 16) in actor.values()


def test_per_env_noise_scales_are_redrawn_when_an_env_s_episode_ends_and_scale_its_noise():
    """Each env keeps its σ until its episode ends (Pendulum: 200 steps), then draws
    a new one in ``[noise_min, exploration_noise]``; the stored actions' spread
    around ``μ(s)`` follows each env's own σ."""
    config, agent, hp = _td3(
        "algo.noise_scales=per_env",
        "algo.noise_min=0.01",
        "algo.exploration_noise=0.2",
        "algo.num_steps=40",
        "algo.learning_starts=6",
    )
    state = jax.jit(agent.init)(jax.random.key(3), hp)
    collect = jax.jit(agent.collect)
    first = np.asarray(state.exploration_noise)
    assert first.shape == (6,) and np.all((first >= 0.01) & (first <= 0.2)) and len(np.unique(first)) == 6
    seen = 1  # the warm-up's one step per env
    for u in range(6):
        before = np.asarray(state.exploration_noise)
        state, steps = collect(state, hp, jnp.int32(u))
        seen += 40
        after = np.asarray(state.exploration_noise)
        ended = np.asarray(steps.done).any(axis=0)
        assert ended.all() == (seen // 200 > (seen - 40) // 200), (u, ended)  # all envs end together here
        np.testing.assert_array_equal(after[~ended], before[~ended])
        assert np.all(after[ended] != before[ended]) and np.all((after >= 0.01) & (after <= 0.2))
        if not ended.any():  # the actions of these 40 steps: μ(s) + σ_env · n, clipped
            obs = np.asarray(steps.seen_obs)  # [T, N, 3]
            mean = np.asarray(agent.network[0].apply(state.actor_params, jnp.asarray(obs)))[..., 0]
            action = np.asarray(steps.items.action).reshape(40, 6)
            inside = np.abs(mean) < 0.5
            spread = np.array([np.std((action - mean)[:, e][inside[:, e]]) for e in range(6)])
            np.testing.assert_allclose(spread, before, rtol=0.35)


def test_a_named_preset_keeps_the_env_preset_s_keys_it_does_not_set(monkeypatch):
    from types import SimpleNamespace

    from jaxrl.run import overrides

    presets = {"Pendulum-v1": {"num_envs": 4, "num_evals": 3}, "Pendulum-v1@mine": {"num_envs": 16}}
    monkeypatch.setattr(overrides, "get", lambda algo: SimpleNamespace(presets=presets))
    assert overrides._preset("td3", "Pendulum-v1", "mine") == {"num_envs": 16, "num_evals": 3}
    assert overrides._preset("td3", "Pendulum-v1", "default") == {"num_envs": 4, "num_evals": 3}


def test_named_presets_layer_over_the_env_preset_and_the_user_wins():
    from jaxrl.algos.presets import load_presets

    fast = load_presets("td3")["Pendulum-v1@fast"]
    config = parse(["env=pendulum", "algo=td3", "preset=fast"])
    assert config.preset == "fast" and config.num_envs == fast["num_envs"]
    assert config.algo.noise_scales == "per_env" and config.algo.critic == fast["algo.critic"]
    assert config.total_timesteps == fast.get("total_timesteps", load_presets("td3")["Pendulum-v1"]["total_timesteps"])
    mine = parse(["env=pendulum", "algo=td3", "preset=fast", "num_envs=8"])
    assert mine.num_envs == 8 and mine.algo.batch_size == config.algo.batch_size
    with pytest.raises(ConfigError, match="preset=fast"):
        parse(["env=pendulum", "algo=td3", "preset=slow"])
    with pytest.raises(ConfigError, match="drop preset="):
        parse(["env=cartpole", "algo=ppo", "preset=fast"])


def test_sacs_fast_preset_takes_fastsacs_settings_over_the_pendulum_preset():
    from jaxrl.algos.presets import load_presets

    fast = load_presets("sac")["Pendulum-v1@fast"]
    config = parse(["env=pendulum", "algo=sac", "preset=fast"])
    assert config.num_envs == 32 and config.algo.critic == "categorical" and config.algo.norm == "layer_norm"
    assert config.algo.init_alpha == fast["algo.init_alpha"] == 0.001 and config.algo.target_entropy_scale == 0.0
    assert config.algo.log_std_max == 0.0 and config.algo.weight_decay == 0.001
    step = parse(["env=playground:CheetahRun", "algo=sac", "preset=fast"])
    assert round(step.algo.utd * step.num_envs * step.algo.num_steps) == 8  # FastSAC's 8 critic steps per step
    assert step.algo.critic_hidden_sizes == (768, 768, 768) and step.algo.gamma == 0.97
    assert step.algo.policy_delay == 4 and config.algo.policy_delay == 1


def test_td3s_playground_presets_take_fasttd3s_n_step_returns_where_it_does():
    """FastTD3's DM Control setting (CheetahRun) learns from 3-step returns, its
    Playground default (HumanoidWalk) from 1-step ones; both presets validate (a
    first update with whole windows, a buffer that holds them)."""
    from jaxrl import validate

    cheetah = validate(parse(["env=playground:CheetahRun", "algo=td3", "preset=fast"]))
    humanoid = validate(parse(["env=playground:HumanoidWalk", "algo=td3", "preset=fast"]))
    assert (cheetah.algo.n_step, humanoid.algo.n_step) == (3, 1)
    assert cheetah.algo.noise_min == cheetah.algo.target_noise == 0.1 and cheetah.algo.v_max == 35
