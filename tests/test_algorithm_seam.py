"""An algorithm from outside the package, through every tool, with no edit to the library.

The algorithm below lives only in this file: a linear softmax policy trained
by plain policy gradient on reward-to-go. It is registered with
``jaxrl.algos.register`` and then trained, swept (2 points), evolved (PBT),
stopped and resumed (bitwise), evaluated and exported through the same CLI
functions users call. Its ``learn`` also runs on a batch collected by a plain
Python loop outside the compiled program (the seam a host-side actor feeds).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxrl
from jaxrl import algos, evaluate, export, sweep, train
from jaxrl.core.errors import ConfigError
from jaxrl.run import training
from jaxrl.run.checkpoint import keys_to_data


@dataclass(frozen=True)
class LinearPGConfig:
    name: str = "linear_pg"
    num_steps: int = 32
    lr: float = algos.traced(0.05, pbt=(1e-3, 1.0, True))
    gamma: float = algos.traced(0.98)


@struct.dataclass
class LinearPGState:
    params: Any  # {"w": [obs, n], "b": [n]}
    env_state: Any  # [N]
    obs: jax.Array  # [N, obs]
    key: jax.Array


class Steps(NamedTuple):
    """What linear_pg learns from: ``T`` steps of ``N`` envs."""

    obs: jax.Array  # [T, N, obs]
    action: jax.Array  # [T, N]
    reward: jax.Array  # [T, N]
    done: jax.Array  # [T, N]
    episode_return: jax.Array  # [T, N]
    episode_length: jax.Array  # [T, N]


class LinearPGMetrics(NamedTuple):
    loop: algos.LoopMetrics
    loss: jax.Array
    grad_norm: jax.Array


def make_linear_pg(algo: LinearPGConfig, env: Any, num_envs: int, num_updates: int, env_params: Any = None) -> Any:
    n, dim = env.action_space.n, int(np.prod(env.obs_shape))
    env_params = env.default_params if env_params is None else env_params
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def logits(params, obs):
        return obs.reshape(obs.shape[: obs.ndim - len(env.obs_shape)] + (dim,)) @ params["w"] + params["b"]

    def init(key, hp):
        key_env, key = jax.random.split(key)
        env_state, obs = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_env, num_envs), env_params)
        params = {"w": jnp.zeros((dim, n)), "b": jnp.zeros((n,))}
        return LinearPGState(params, env_state, obs, key)

    def collect(state, hp, update_idx):
        def body(carry, key):
            env_state, obs = carry
            key_act, key_env = jax.random.split(key)
            action = jax.random.categorical(key_act, logits(state.params, obs))
            env_state, out = step(jax.random.split(key_env, num_envs), env_state, action, env_params)
            return (env_state, out.obs), Steps(
                obs, action, out.reward, out.done, out.episode_return, out.episode_length
            )

        key, key_roll = jax.random.split(state.key)
        (env_state, obs), steps = jax.lax.scan(
            body, (state.env_state, state.obs), jax.random.split(key_roll, algo.num_steps)
        )
        return LinearPGState(state.params, env_state, obs, key), steps

    def learn(state, batch, hp, update_idx):
        def to_go(g, x):
            r_t, d_t = x
            g = r_t + hp.gamma * g * (1.0 - d_t)
            return g, g

        done = batch.done.astype(jnp.float32)
        _, returns = jax.lax.scan(to_go, jnp.zeros(batch.reward.shape[1]), (batch.reward, done), reverse=True)
        advantage = returns - returns.mean()

        def loss_fn(params):
            logp = jax.nn.log_softmax(logits(params, batch.obs))
            taken = jnp.take_along_axis(logp, batch.action[..., None], axis=-1)[..., 0]
            return -jnp.mean(taken * advantage)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        norm = jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree.leaves(grads)))
        params = jax.tree.map(lambda p, g: p - hp.lr * g, state.params, grads)
        finite = jnp.isfinite(loss) & jnp.isfinite(norm)
        loop = algos.LoopMetrics.of(batch.done, batch.episode_return, batch.episode_length, finite)
        return state.replace(params=params), LinearPGMetrics(loop, loss, norm)

    def act(state, obs, key):
        return jnp.argmax(logits(state.params, obs), axis=-1)

    def sample(state, obs, key):
        return jax.random.categorical(key, logits(state.params, obs))

    return algos.Agent(init, collect, learn, act, sample, None, num_envs * algo.num_steps)


def _validate(config) -> None:
    if config.algo.num_steps < 2:
        raise ConfigError("algo.num_steps", config.algo.num_steps, "must be ≥ 2", "pass algo.num_steps=32")


LINEAR_PG = algos.Algorithm(
    name="linear_pg",
    config=LinearPGConfig,
    make_agent=make_linear_pg,
    metrics=algos.own_metrics(LinearPGMetrics),
    actions=("discrete",),
    presets={"CartPole-v1": {"num_envs": 8, "total_timesteps": 8192, "num_evals": 2}},
    validate=_validate,
)

ARGS = ["env=cartpole", "algo=linear_pg", "seeds=2", "eval.episodes=4", "progress=false", "plots=false"]


@pytest.fixture(scope="module", autouse=True)
def registered():
    algos.register(LINEAR_PG, replace=True)
    yield
    algos.unregister("linear_pg")


def _records(run_dir):
    with open(run_dir / "metrics.jsonl") as f:
        return [
            {k: v for k, v in json.loads(line).items() if k not in ("chunk_time_s", "env_steps_per_s")} for line in f
        ]


def test_the_contract_is_checked_when_an_algorithm_is_declared():
    with pytest.raises(TypeError, match="loop's own"):
        algos.Algorithm("linear_pg", LinearPGConfig, make_linear_pg, metrics=("episodes",))
    with pytest.raises(TypeError, match="lo < hi"):
        algos.traced(0.1, pbt=(1.0, 0.0, False))
    with pytest.raises(ValueError, match="registered already"):
        algos.register(algos.Algorithm("ppo", jaxrl.ppo.PPOConfig, make_linear_pg, metrics=()))
    assert "linear_pg" in algos.names() and algos.get("linear_pg") is LINEAR_PG
    # each hyperparameter is declared once: traced, PBT bounds and the HParams pytree follow
    assert LINEAR_PG.traced == ("lr", "gamma") and LINEAR_PG.pbt_bounds == {"lr": (1e-3, 1.0, True)}
    hp = algos.HParams.from_config(LinearPGConfig(lr=0.1))
    assert hp.names == ("lr", "gamma") and float(hp.lr) == pytest.approx(0.1) and hp.lr.dtype == jnp.float32
    assert [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(hp)[0]] == [".lr", ".gamma"]


def test_learn_takes_a_batch_collected_outside_the_compiled_loop():
    """The seam a host-side actor feeds: steps collected by a Python loop (one
    jitted env step and one jitted action at a time, arrays handed over as
    numpy) go through ``learn`` alone; the same steps collected in-program give
    the same update bit for bit."""
    config = jaxrl.config_for("cartpole", algo="linear_pg", num_envs=4)
    trainer = jaxrl.make_train(config)
    agent, env, hp = trainer.agent, trainer.env, trainer.hparams
    state = jax.jit(agent.init)(jax.random.key(0), hp)
    in_program, batch = jax.jit(agent.collect)(state, hp, jnp.int32(0))

    # a host actor: the envs stepped one step at a time from Python
    step_env = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    act = jax.jit(lambda s, obs, key: agent.sample(s, obs, key))
    env_state, obs, rows = state.env_state, np.asarray(state.obs), []
    for t in range(config.algo.num_steps):
        key_act, key_env = jax.random.split(jax.random.fold_in(jax.random.key(1), t))
        action = act(state, obs, key_act)
        env_state, out = step_env(jax.random.split(key_env, 4), env_state, action, env.default_params)
        rows.append([obs, action, out.reward, out.done, out.episode_return, out.episode_length])
        obs = np.asarray(out.obs)
    host = Steps(*(np.stack([np.asarray(r[i]) for r in rows]) for i in range(6)))
    assert host.obs.shape == (32, 4, 4) and host.done.any()
    learned, metrics = jax.jit(agent.learn)(state, host, hp, jnp.int32(0))
    assert bool(metrics.loop.finite) and int(metrics.loop.episodes) == int(host.done.sum())
    assert not np.allclose(np.asarray(learned.params["w"]), np.asarray(state.params["w"]))

    # the in-program batch, taken to the host and handed back: learn == the fused update
    from_host = jax.tree.map(np.asarray, batch)
    learned, metrics = jax.jit(agent.learn)(in_program, from_host, hp, jnp.int32(0))
    fused, fused_metrics = jax.jit(agent.update)(state, hp, jnp.int32(0))
    got, want = keys_to_data((learned, metrics)), keys_to_data((fused, fused_metrics))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_train_resume_evaluate_export(tmp_path, capsys):
    full, parted = tmp_path / "full", tmp_path / "parted"
    assert train.main([*ARGS, f"run_dir={full}"]) == 0  # the preset: 8192 steps, 2 chunks
    summary = json.loads((full / "summary.json").read_text())
    assert summary["algo"] == "linear_pg" and summary["total_timesteps"] == 8192
    updates = [r for r in _records(full) if r["type"] == "update"]
    assert {"loss", "grad_norm"} <= set(updates[0]) and len(updates) == 8192 // 256
    assert summary["mean"] > 25  # random play: ≈ 22; a linear policy gradient learns a little in 8k steps
    # stop after one chunk, resume: the same bits as the uninterrupted run
    assert training.run(jaxrl.config_for("cartpole", *ARGS[1:], f"run_dir={parted}"), stop_after_chunks=1) == 0
    assert train.main([f"resume={parted}"]) == 0
    assert _records(parted) == _records(full)
    # evaluate replays the final evaluation; export runs without jaxrl's algorithm code
    capsys.readouterr()
    assert evaluate.main([str(full)]) == 0
    result = json.loads((full / "evaluation.json").read_text())
    assert [s["mean"] for s in result["seeds"]] == summary["final_eval_return"]
    assert export.main([str(full), "seed=1", f"out={tmp_path / 'exported'}"]) == 0
    exported = jax.export.deserialize((tmp_path / "exported" / "policy.jaxexport").read_bytes())
    params = np.load(tmp_path / "exported" / "params.npz")
    leaves = [params[n] for n in json.loads((tmp_path / "exported" / "policy.json").read_text())["params"]]
    obs = np.asarray(jax.random.uniform(jax.random.key(0), (5, 4), minval=-0.2, maxval=0.2))
    want = jaxrl.load_policy(str(full), seed=1)(obs, jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(exported.call(leaves, obs, np.zeros(2, np.uint32))), np.asarray(want))


def test_a_two_point_sweep_and_pbt(tmp_path, capsys):
    sweep_dir = tmp_path / "sweep"
    assert sweep.main([*ARGS, "algo.lr=0.01,0.1", f"run_dir={sweep_dir}"]) == 0
    report = json.loads((sweep_dir / "report.json").read_text())
    assert len(report["rows"]) == 2
    evals = [r for r in _records(sweep_dir / "group-0") if r["type"] == "eval"]
    assert {"loss", "grad_norm"} <= set(evals[0])  # strided records carry the declared metrics
    pbt_dir = tmp_path / "pbt"
    assert train.main([*ARGS, "pbt.population=4", "pbt.interval=8", "pbt.hparams=[lr]", f"run_dir={pbt_dir}"]) == 0
    summary = json.loads((pbt_dir / "summary.json").read_text())
    assert set(summary["pbt"]["best_trajectory"][0]["hparams"]) == {"lr"}
    evals = [r for r in _records(pbt_dir) if r["type"] == "eval"]
    lrs = np.asarray([r["hparams"]["lr"] for r in evals])
    assert np.all((lrs >= 1e-3) & (lrs <= 1.0))  # the algorithm's own PBT bounds


def test_its_validation_and_declarations_reach_the_cli(capsys):
    assert train.main([*ARGS, "algo.num_steps=1"]) == 2
    assert "algo.num_steps=1: must be ≥ 2" in capsys.readouterr().err
    assert train.main(["env=pendulum", "algo=linear_pg"]) == 2  # it declared discrete actions only
    assert "needs discrete actions and Pendulum-v1 has continuous ones" in capsys.readouterr().err
    assert train.main([*ARGS, "pbt.population=4", "pbt.hparams=[gamma]"]) == 2
    assert "'gamma' cannot evolve in linear_pg" in capsys.readouterr().err
    assert train.main([*ARGS, "parallel=data"]) == 2
    assert "which linear_pg does not support" in capsys.readouterr().err


def test_unregister_removes_only_what_register_added():
    with pytest.raises(ValueError, match="built in"):
        algos.unregister("ppo")
    with pytest.raises(KeyError):
        algos.unregister("no_such_algo")
    assert "ppo" in algos.names()
