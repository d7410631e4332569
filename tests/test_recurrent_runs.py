"""Recurrent and CNN policies through the run machinery: resume equals the
uninterrupted run bit for bit, sweeps and PBT, envs split over devices
(parallel=data) agree with one device."""

import json

import pytest

from jaxrl import sweep, train
from jaxrl.run import training
from jaxrl.run.overrides import resolve
from tests.helpers import data_parallel_matches_one_device, records

GRU = [
    "env=cartpole-pomdp",
    "algo.network=gru",
    "algo.rnn_size=16",
    "algo.hidden_sizes=[16]",
    "seeds=2",
    "num_envs=4",
    "total_timesteps=3072",
    "num_evals=3",
    "eval.episodes=2",
    "algo.num_steps=32",
    "algo.num_minibatches=2",
    "algo.update_epochs=2",
    "plots=false",
    "progress=false",
]
CNN = [
    "env=Breakout-MinAtar",
    "algo.hidden_sizes=[16]",
    "algo.conv_channels=[4]",
    "seeds=2",
    "num_envs=4",
    "total_timesteps=1536",
    "num_evals=3",
    "eval.episodes=1",
    "eval.max_steps=200",
    "algo.num_steps=32",
    "algo.num_minibatches=2",
    "algo.update_epochs=1",
    "plots=false",
    "progress=false",
]


@pytest.mark.parametrize("args", [GRU, CNN], ids=["gru", "cnn"])
def test_resume_equals_uninterrupted(args, tmp_path):
    full, parted = tmp_path / "full", tmp_path / "parted"
    assert train.main([*args, f"run_dir={full}"]) == 0
    config = resolve([*args, f"run_dir={parted}"])
    assert training.run(config, stop_after_chunks=1) == 0
    assert train.main([f"resume={parted}"]) == 0
    a = json.loads((full / "summary.json").read_text())
    b = json.loads((parted / "summary.json").read_text())
    assert a["final_eval_return"] == b["final_eval_return"]
    assert records(full) == records(parted)


def test_a_recurrent_sweep_and_pbt(tmp_path):
    sweep_dir = tmp_path / "sweep"
    assert sweep.main([*GRU, "algo.lr=1e-3,3e-3", f"run_dir={sweep_dir}"]) == 0
    assert len(json.loads((sweep_dir / "report.json").read_text())["rows"]) == 2
    pbt_dir = tmp_path / "pbt"
    argv = [*GRU, "pbt.population=4", "pbt.interval=4", "pbt.hparams=[lr,ent_coef]", f"run_dir={pbt_dir}"]
    assert train.main(argv) == 0
    summary = json.loads((pbt_dir / "summary.json").read_text())
    assert set(summary["pbt"]["best_trajectory"][0]["hparams"]) == {"lr", "ent_coef"}


def test_data_parallel_recurrent_matches_one_device(tmp_path):
    """parallel=data over 2 XLA:CPU devices splits the envs (and the learner's
    whole-sequence minibatches) across devices: every per-update metric within
    1e-5 relative + 1e-6 absolute of the one-device run."""
    args = [*GRU, "seeds=1", "checkpoint=false"]
    data_parallel_matches_one_device(args, tmp_path)
