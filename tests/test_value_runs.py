"""PQN, DQN (with its distributional heads, C51, QR-DQN and IQN) and TD3 through the
run machinery: resume equals the uninterrupted run bit for bit, sweeps and PBT
over their traced hyperparameters, PQN's envs
split over devices (parallel=data) agree with one device.

The docs' commands for them (learning at CI budgets, then evaluate, export
and load_policy) are in tests/test_value_readme.py.
"""

import json

import numpy as np
import pytest

from jaxrl import sweep, train
from jaxrl.run import training
from jaxrl.run.overrides import resolve
from tests.helpers import data_parallel_matches_one_device, records

COMMON = ["seeds=2", "num_evals=3", "eval.episodes=2", "plots=false", "progress=false", "algo.hidden_sizes=[16]"]
PQN = [
    "env=cartpole",
    "algo=pqn",
    "num_envs=4",
    "total_timesteps=1536",
    "algo.num_steps=16",
    "algo.num_minibatches=2",
    "algo.update_epochs=2",
    *COMMON,
]
DQN = [
    "env=cartpole",
    "algo=dqn",
    "num_envs=4",
    "total_timesteps=1536",
    "algo.learning_starts=256",
    "algo.batch_size=32",
    "algo.buffer_size=1024",
    "algo.n_step=3",
    "algo.dueling=true",
    "algo.target_update_interval=4",
    "algo.tau=1",
    *COMMON,
]
TD3 = [
    "env=pendulum",
    "algo=td3",
    "num_envs=2",
    "total_timesteps=1200",
    "algo.learning_starts=400",
    "algo.num_steps=4",
    "algo.batch_size=32",
    "algo.buffer_size=1024",
    *COMMON,
]
# the distributional heads: DQN's run with a small support / few quantiles
C51 = ["algo=c51", "algo.atoms=11", "algo.v_min=0", "algo.v_max=50", *(a for a in DQN if a != "algo=dqn")]
QRDQN = ["algo=qrdqn", "algo.quantiles=8", *(a for a in DQN if a != "algo=dqn")]
IQN = [
    "algo=iqn",
    "algo.quantiles=4",
    "algo.act_quantiles=4",
    "algo.embedding_dim=8",
    *(a for a in DQN if a != "algo=dqn"),
]
# Rainbow: C51's run with its own parts at their defaults (3-step windows, noisy
# dueling head, prioritized replay)
RAINBOW = ["algo=rainbow", *(a for a in C51 if a not in ("algo=c51", "algo.n_step=3", "algo.dueling=true"))]
RUNS = {"pqn": PQN, "dqn": DQN, "td3": TD3, "c51": C51, "qrdqn": QRDQN, "iqn": IQN, "rainbow": RAINBOW}


@pytest.mark.parametrize("algo", list(RUNS))
def test_resume_equals_uninterrupted(algo, tmp_path):
    """A run stopped after its first chunk and resumed writes the same metrics
    (every update and evaluation record) and final returns as one that never
    stopped: the replay buffer, target network, ε and noise state all travel."""
    args = RUNS[algo]
    full, parted = tmp_path / "full", tmp_path / "parted"
    assert train.main([*args, f"run_dir={full}"]) == 0
    config = resolve([*args, f"run_dir={parted}"])
    assert training.run(config, stop_after_chunks=1) == 0
    assert train.main([f"resume={parted}"]) == 0
    a = json.loads((full / "summary.json").read_text())
    b = json.loads((parted / "summary.json").read_text())
    assert a["final_eval_return"] == b["final_eval_return"]
    written = records(full)
    assert written == records(parted)
    from jaxrl import algos

    update = next(r for r in written if r["type"] == "update")
    assert set(algos.get(algo).metrics) <= set(update)
    assert all(np.isfinite(update[m]).all() for m in algos.get(algo).metrics)


# a grid sweep for PQN (TD3's is the docs' noise sweep, tests/test_value_readme.py;
# DQN's traced hyperparameters are vmapped by its PBT run)
SWEEPS = {"pqn": ["algo.q_lambda=0.5,0.9"]}
PBT = {
    "pqn": "[lr,q_lambda]",
    "dqn": "[lr,tau]",
    "td3": "[exploration_noise,target_noise]",
    # C51's, QR-DQN's and IQN's traced fields are a subset of Rainbow's (one learner)
    "rainbow": "[lr,priority_exponent,priority_weight]",
}


@pytest.mark.parametrize("algo", list(PBT))
def test_sweep_and_pbt(algo, tmp_path):
    args = [a for a in RUNS[algo] if not a.startswith("seeds=")]
    if algo in SWEEPS:
        sweep_dir = tmp_path / "sweep"
        assert sweep.main([*args, "seeds=2", *SWEEPS[algo], f"run_dir={sweep_dir}"]) == 0
        rows = json.loads((sweep_dir / "report.json").read_text())["rows"]
        assert len(rows) == 2
    pbt_dir = tmp_path / "pbt"
    # a PBT step every 8 updates: 40 of them in the run (each chunk also writes a checkpoint, ≈ 0.1 s)
    argv = [*args, "pbt.population=4", "pbt.interval=8", f"pbt.hparams={PBT[algo]}", f"run_dir={pbt_dir}"]
    assert train.main(argv) == 0
    summary = json.loads((pbt_dir / "summary.json").read_text())
    assert set(summary["pbt"]["best_trajectory"][0]["hparams"]) == set(PBT[algo].strip("[]").split(","))


def test_pqn_data_parallel_matches_one_device(tmp_path):
    """parallel=data over 2 XLA:CPU devices splits PQN's envs (and each
    minibatch's gradient) across devices: every per-update metric within 1e-5
    relative + 1e-6 absolute of the one-device run."""
    args = [*[a for a in PQN if not a.startswith("seeds=")], "seeds=1", "checkpoint=false"]
    data_parallel_matches_one_device(args, tmp_path)


def test_a_rainbow_run_acts_on_its_mean_weights_after_training(tmp_path):
    """Evaluation, load_policy and export act greedily on the noisy layers' mean
    weights (no noise is drawn), while training explored under noise (σ moved
    from its initial σ0/√in and is reported)."""
    import jax

    import jaxrl
    from jaxrl import export
    from jaxrl.run.policy import open_run

    run_dir = tmp_path / "rainbow"
    assert train.main([*RAINBOW, f"run_dir={run_dir}"]) == 0
    update = next(r for r in records(run_dir) if r["type"] == "update")
    assert all(0 < s for s in update["sigma"]) and all(0.4 <= b <= 1.0 for b in update["beta"])
    obs = jax.random.uniform(jax.random.key(0), (32, 4), minval=-0.5, maxval=0.5)
    act = jaxrl.load_policy(str(run_dir), seed=0)
    actions = np.asarray(act(obs, jax.random.key(1)))
    np.testing.assert_array_equal(actions, np.asarray(act(obs, jax.random.key(2))))
    trained = open_run(str(run_dir))
    state = jax.tree.map(lambda x: x[0], trained.carry.states.agent)
    logits = np.asarray(trained.trainer.agent.network.apply(state.params, obs), np.float64)  # [32, 2, atoms]
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    np.testing.assert_array_equal(actions, np.argmax(probs @ np.linspace(0.0, 50.0, 11), axis=-1))
    assert export.main([str(run_dir), "seed=0", f"out={tmp_path / 'out'}"]) == 0
    exported = jax.export.deserialize((tmp_path / "out" / "policy.jaxexport").read_bytes())
    params = np.load(tmp_path / "out" / "params.npz")
    leaves = [params[n] for n in json.loads((tmp_path / "out" / "policy.json").read_text())["params"]]
    np.testing.assert_array_equal(np.asarray(exported.call(leaves, obs, np.zeros(2, np.uint32))), actions)


def test_an_iqn_run_loads_and_exports_its_greedy_policy(tmp_path):
    """load_policy acts greedily on the mean over the evenly spaced acting levels
    (deterministic), and the exported artifact acts as load_policy does."""
    import jax

    import jaxrl
    from jaxrl import export
    from jaxrl.run.policy import open_run

    run_dir = tmp_path / "iqn"
    assert train.main([*IQN, f"run_dir={run_dir}"]) == 0
    obs = jax.random.uniform(jax.random.key(0), (32, 4), minval=-0.5, maxval=0.5)
    act = jaxrl.load_policy(str(run_dir), seed=1)
    actions = np.asarray(act(obs, jax.random.key(1)))
    np.testing.assert_array_equal(actions, np.asarray(act(obs, jax.random.key(2))))  # no level is drawn
    trained = open_run(str(run_dir))
    state = jax.tree.map(lambda x: x[1], trained.carry.states.agent)
    quantiles = np.asarray(trained.trainer.agent.network.apply(state.params, obs))  # [32, 2, act_quantiles]
    assert quantiles.shape == (32, 2, 4)
    np.testing.assert_array_equal(actions, np.argmax(quantiles.mean(-1), axis=-1))
    assert export.main([str(run_dir), "seed=1", f"out={tmp_path / 'out'}"]) == 0
    exported = jax.export.deserialize((tmp_path / "out" / "policy.jaxexport").read_bytes())
    params = np.load(tmp_path / "out" / "params.npz")
    leaves = [params[n] for n in json.loads((tmp_path / "out" / "policy.json").read_text())["params"]]
    np.testing.assert_array_equal(np.asarray(exported.call(leaves, obs, np.zeros(2, np.uint32))), actions)
