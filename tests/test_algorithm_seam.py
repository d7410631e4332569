"""An algorithm from outside the package, through every tool, with no edit to the library.

The algorithm below lives only in this file: a linear softmax policy trained
by plain policy gradient on reward-to-go. It is registered with
``jaxrl.algos.register`` and then trained, swept (2 points), evolved (PBT),
stopped and resumed (bitwise), evaluated and exported through the same CLI
functions users call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import jaxrl
from jaxrl import algos, evaluate, export, sweep, train
from jaxrl.core.errors import ConfigError
from jaxrl.run import training


@dataclass(frozen=True)
class LinearPGConfig:
    name: str = "linear_pg"
    num_steps: int = 32
    lr: float = 0.05
    gamma: float = 0.98
    TRACED: ClassVar[tuple[str, ...]] = ("lr", "gamma")


@struct.dataclass
class LinearPGHParams:
    lr: jax.Array
    gamma: jax.Array

    @classmethod
    def from_config(cls, algo: LinearPGConfig) -> LinearPGHParams:
        return cls(jnp.float32(algo.lr), jnp.float32(algo.gamma))


@struct.dataclass
class LinearPGState:
    params: Any  # {"w": [obs, n], "b": [n]}
    env_state: Any  # [N]
    obs: jax.Array  # [N, obs]
    key: jax.Array


class LinearPGMetrics(NamedTuple):
    episode_return_sum: jax.Array
    episode_length_sum: jax.Array
    episodes: jax.Array
    finite: jax.Array
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

    def update(state, hp, update_idx):
        def body(carry, key):
            env_state, obs = carry
            key_act, key_env = jax.random.split(key)
            action = jax.random.categorical(key_act, logits(state.params, obs))
            env_state, out = step(jax.random.split(key_env, num_envs), env_state, action, env_params)
            return (env_state, out.obs), (obs, action, out.reward, out.done, out.episode_return, out.episode_length)

        key, key_roll = jax.random.split(state.key)
        (env_state, obs), (o, a, r, d, ep_ret, ep_len) = jax.lax.scan(
            body, (state.env_state, state.obs), jax.random.split(key_roll, algo.num_steps)
        )

        def to_go(g, x):
            r_t, d_t = x
            g = r_t + hp.gamma * g * (1.0 - d_t)
            return g, g

        _, returns = jax.lax.scan(to_go, jnp.zeros(num_envs), (r, d.astype(jnp.float32)), reverse=True)
        advantage = returns - returns.mean()

        def loss_fn(params):
            logp = jax.nn.log_softmax(logits(params, o))
            taken = jnp.take_along_axis(logp, a[..., None], axis=-1)[..., 0]
            return -jnp.mean(taken * advantage)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        norm = jnp.sqrt(sum(jnp.sum(g**2) for g in jax.tree.leaves(grads)))
        params = jax.tree.map(lambda p, g: p - hp.lr * g, state.params, grads)
        done = d.astype(jnp.float32)
        metrics = LinearPGMetrics(
            episode_return_sum=jnp.sum(ep_ret * done),
            episode_length_sum=jnp.sum(ep_len * done),
            episodes=jnp.sum(d.astype(jnp.int32)),
            finite=jnp.isfinite(loss) & jnp.isfinite(norm),
            loss=loss,
            grad_norm=norm,
        )
        return LinearPGState(params, env_state, obs, key), metrics

    def act(state, obs, key):
        return jnp.argmax(logits(state.params, obs), axis=-1)

    def sample(state, obs, key):
        return jax.random.categorical(key, logits(state.params, obs))

    return algos.Agent(init, update, act, sample, None, num_envs * algo.num_steps)


def _validate(config) -> None:
    if config.algo.num_steps < 2:
        raise ConfigError("algo.num_steps", config.algo.num_steps, "must be ≥ 2", "pass algo.num_steps=32")


LINEAR_PG = algos.Algorithm(
    name="linear_pg",
    config=LinearPGConfig,
    hparams=LinearPGHParams,
    make_agent=make_linear_pg,
    metrics=("loss", "grad_norm"),
    actions=("discrete",),
    presets={"CartPole-v1": {"num_envs": 8, "total_timesteps": 8192, "num_evals": 2}},
    validate=_validate,
    pbt_bounds={"lr": (1e-3, 1.0, True)},
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
        algos.Algorithm("linear_pg", LinearPGConfig, LinearPGHParams, make_linear_pg, metrics=("episodes",))
    with pytest.raises(TypeError, match="untraced"):
        algos.Algorithm(
            "linear_pg", LinearPGConfig, LinearPGHParams, make_linear_pg, metrics=(), pbt_bounds={"x": (0, 1, False)}
        )
    with pytest.raises(ValueError, match="registered already"):
        algos.register(algos.Algorithm("ppo", jaxrl.PPOConfig, LinearPGHParams, make_linear_pg, metrics=()))
    assert "linear_pg" in algos.names() and algos.get("linear_pg") is LINEAR_PG


def test_train_resume_evaluate_export(tmp_path, capsys):
    full, parted = tmp_path / "full", tmp_path / "parted"
    assert train.main([*ARGS, f"run_dir={full}"]) == 0  # the preset: 8192 steps, 2 chunks
    summary = json.loads((full / "summary.json").read_text())
    assert summary["algo"] == "linear_pg" and summary["total_timesteps"] == 8192
    updates = [r for r in _records(full) if r["type"] == "update"]
    assert {"loss", "grad_norm"} <= set(updates[0]) and len(updates) == 8192 // 256
    assert summary["mean"] > 25  # random play: ≈ 22; a linear policy gradient learns a little in 8k steps
    # stop after one chunk, resume: the same bits as the uninterrupted run
    assert training.run(training.resolve([*ARGS, f"run_dir={parted}"]), stop_after_chunks=1) == 0
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
    leaves = [params[f"p{i:04d}"] for i in range(len(params.files))]
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
