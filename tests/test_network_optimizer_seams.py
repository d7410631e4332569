"""Networks and optimizers plug in: a user's flax torso and optax optimizer
through ``make_train``, a registered torso through the CLI, and the optimizer
steps against optax computed by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxrl
from jaxrl import evaluate, parse, train, validate
from jaxrl.algos import ppo
from jaxrl.nets import networks
from jaxrl.rl import optim
from tests.helpers import CARTPOLE_TINY


class LayerNormTorso(nn.Module):
    """A torso jaxrl does not ship: ``[..., d] → [..., width]``."""

    width: int = 16

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return nn.relu(nn.LayerNorm()(nn.Dense(self.width)(x)))


def _layer_norm_torso(algo, obs_shape):
    return LayerNormTorso(width=algo.hidden_sizes[-1])


@pytest.fixture(scope="module")
def registered():
    networks.register_torso("test_layernorm", _layer_norm_torso, replace=True)
    yield "test_layernorm"
    networks._TORSOS.pop("test_layernorm", None)


def _one_chunk(trainer, seeds=2, hp=None):
    keys = jax.vmap(jax.random.key)(jnp.arange(seeds, dtype=jnp.uint32))
    hp = trainer.hparams if hp is None else hp
    axis = None if hp is trainer.hparams else 0
    states = jax.jit(jax.vmap(trainer.init, (0, axis)))(keys, hp)
    return jax.jit(jax.vmap(trainer.train_chunk, (0, axis)))(states, hp)


def test_a_user_torso_and_optax_adamw_train_ppo():
    config = validate(parse(["env=cartpole", *CARTPOLE_TINY]))
    trainer = jaxrl.make_train(config, network=LayerNormTorso(), optimizer=optax.adamw)
    states, metrics = _one_chunk(trainer)
    params = states.agent.params["params"]
    # the user's torso, copied for actor and critic, each with its own parameters
    assert set(params["actor_torso"]) == {"Dense_0", "LayerNorm_0"} == set(params["critic_torso"])
    assert params["policy_head"]["kernel"].shape == (2, 16, 2)
    assert not np.allclose(params["actor_torso"]["Dense_0"]["kernel"], params["critic_torso"]["Dense_0"]["kernel"])
    # adamw's state (per leaf, with weight decay), not jaxrl's raveled default
    adam = [s for s in jax.tree.leaves(states.agent.opt_state, is_leaf=lambda s: hasattr(s, "mu"))]
    assert any(hasattr(s, "mu") and isinstance(s.mu, dict) for s in adam)
    assert bool(np.all(np.asarray(metrics.updates.loop.finite)))


def test_a_user_optimizer_still_takes_the_traced_learning_rate():
    config = validate(parse(["env=cartpole", *CARTPOLE_TINY, "algo.lr_schedule=constant"]))
    trainer = jaxrl.make_train(config, optimizer=lambda lr: optax.sgd(lr, momentum=0.9))
    hp = jax.tree.map(lambda x: jnp.broadcast_to(x, (2,)), trainer.hparams).replace(lr=jnp.array([0.0, 1e-2]))
    keys = jnp.stack([jax.random.key(0)] * 2)
    states = jax.jit(jax.vmap(trainer.init))(keys, hp)
    after, metrics = jax.jit(jax.vmap(trainer.update))(states, hp)
    before_leaves, after_leaves = jax.tree.leaves(states.agent.params), jax.tree.leaves(after.agent.params)
    # lr = 0 leaves the parameters where they were; lr = 1e-2 moves them
    assert all(np.array_equal(b[0], a[0]) for b, a in zip(before_leaves, after_leaves, strict=True))
    assert any(not np.allclose(b[1], a[1]) for b, a in zip(before_leaves, after_leaves, strict=True))
    np.testing.assert_allclose(np.asarray(metrics.lr), [0.0, 1e-2])


def test_one_ppo_step_with_adamw_equals_optax_by_hand():
    config = validate(parse(["env=cartpole", *CARTPOLE_TINY]))
    trainer = jaxrl.make_train(config, network=LayerNormTorso())
    agent, hp, algo = trainer.agent, trainer.hparams, config.algo
    state = agent.init(jax.random.key(0), hp)
    prepared = agent.phases[1][1](state, hp)  # the rollout, then its advantages
    batch = jax.tree.map(lambda x: x[:64], prepared.batch)
    lr, max_norm = jnp.float32(3e-3), jnp.float32(0.05)  # a bound that clips
    hp = hp.replace(max_grad_norm=max_norm)
    optimizer = optim.make(lambda lr: optax.adamw(lr, weight_decay=0.1))
    opt_state = optimizer.init(state.params)
    out = ppo.sgd_step(state.params, opt_state, lr, batch, hp, agent.network, algo, optimizer=optimizer)
    # by hand: optax's own clip and adamw on the loss's gradient
    grads = jax.grad(lambda p: ppo.ppo_loss(p, agent.network, batch, hp, clip_value=algo.clip_value)[0])(state.params)
    oracle = optax.chain(optax.clip_by_global_norm(max_norm), optax.adamw(lr, weight_decay=0.1))
    updates, _ = oracle.update(grads, oracle.init(state.params), state.params)
    want = optax.apply_updates(state.params, updates)
    assert float(optax.tree.norm(grads)) > 0.05  # the clip was active
    np.testing.assert_allclose(float(out.grad_norm), float(optax.tree.norm(grads)), rtol=1e-5)
    for got, ref in zip(jax.tree.leaves(out.params), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=2e-5, atol=1e-7)


def test_sac_takes_a_user_torso_for_actor_and_both_critics():
    config = validate(
        parse(["env=pendulum", "algo=sac", "num_envs=4", "total_timesteps=512", "algo.learning_starts=256"])
    )
    trainer = jaxrl.make_train(config, network=LayerNormTorso(width=8), optimizer=optax.adam)
    state = jax.jit(trainer.init)(jax.random.key(0), trainer.hparams)
    actor, critic = state.agent.actor_params["params"], state.agent.critic_params["params"]
    assert "actor_torso" in actor and {"q0_torso", "q1_torso"} <= set(critic)
    assert critic["q0_torso"]["Dense_0"]["kernel"].shape == (3 + 1, 8)  # [obs, action] in
    state, metrics = jax.jit(trainer.update)(state, trainer.hparams)
    assert bool(metrics.loop.finite)


def test_a_registered_torso_is_chosen_by_name_from_the_cli(registered, tmp_path, capsys):
    run_dir = tmp_path / "run"
    args = ["env=cartpole", *CARTPOLE_TINY, "seeds=2", f"algo.network={registered}", f"run_dir={run_dir}"]
    assert train.main(args) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "network: test_layernorm" in (run_dir / "config.yaml").read_text()
    assert evaluate.main([str(run_dir)]) == 0  # rebuilt from the config, in this process's registry
    result = json.loads((run_dir / "evaluation.json").read_text())
    assert [s["mean"] for s in result["seeds"]] == summary["final_eval_return"]
    policy = jaxrl.load_policy(str(run_dir), seed=0)
    assert policy(np.zeros((3, 4), np.float32), jax.random.key(0)).shape == (3,)


def test_an_unknown_network_is_one_line_and_exit_2(tmp_path, capsys):
    assert train.main(["env=cartpole", "algo.network=resnet9000", f"run_dir={tmp_path / 'r'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert re.search(r"algo\.network=resnet9000: must be one of auto, mlp.*register_torso", err)
    assert not (tmp_path / "r").exists()


def test_bad_seams_are_refused():
    with pytest.raises(TypeError, match="optax.GradientTransformation or a function"):
        optim.make(0.001)
    with pytest.raises(ValueError, match="registered already"):
        networks.register_torso("mlp", _layer_norm_torso)
    assert networks.torso_names()[:2] == ["auto", "mlp"]


def test_the_research_page_seams_block_runs():
    """docs/research.md's own flax torso and optax optimizer, at a small budget,
    with what the page's first block defines (tests/test_docs.py runs the page)."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "research.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", page, flags=re.S) if "optimizer=optax.adamw" in b)
    assert "network=Torso()" in block and 'config = jaxrl.config_for("cartpole")' in page
    namespace: dict = {"jax": jax, "jaxrl": jaxrl, "config": jaxrl.config_for("cartpole", *CARTPOLE_TINY)}
    exec(compile(block, "docs/research.md", "exec"), namespace)
    assert "LayerNorm_0" in namespace["state"].agent.params["params"]["actor_torso"]
    assert "LayerNorm_0" in namespace["state"].agent.params["params"]["critic_torso"]
