"""The W&B logger, in this process: an offline run is written.

The docs' after-training commands (evaluate, render, export, load_policy,
logger=tensorboard) run in the CLI's default layout in tests/test_readme.py;
their bad input in tests/test_bad_input.py.
"""

import os

import pytest

import jaxrl
from jaxrl import train
from tests.helpers import CARTPOLE_TINY


def test_wandb_offline_run_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "run"
    args = ["env=cartpole", *CARTPOLE_TINY, "seeds=2", "progress=false", "plots=false", "logger=wandb"]
    assert train.main([*args, f"run_dir={run_dir}"]) == 0
    runs = [p for p in (run_dir / "wandb").iterdir() if p.name.startswith("offline-run-")]
    assert len(runs) == 1
    files = list(runs[0].glob("*.wandb"))
    assert files and files[0].stat().st_size > 1000
    assert os.path.isfile(run_dir / "summary.json")


def test_load_policy_of_a_missing_run_is_a_config_error(tmp_path):
    with pytest.raises(jaxrl.ConfigError, match="does not exist"):
        jaxrl.load_policy(str(tmp_path / "nope"))


@pytest.mark.parametrize("name", ["ppo", "sac"])
def test_every_declared_metric_reaches_the_dashboards(name):
    """Per-update records (train runs) and strided chunk records (sweeps) both
    carry every metric the algorithm declares, and the TensorBoard / W&B
    scalars hold one curve per member for each."""
    from collections import namedtuple

    import numpy as np

    from jaxrl import algos
    from jaxrl.run import logs, records

    algorithm = algos.get(name)
    Metrics = namedtuple("Metrics", ("loop", *algorithm.metrics))
    rng = np.random.default_rng(0)
    loop = algos.LoopMetrics(*(rng.uniform(1, 2, (2, 3)).astype(np.float32) for _ in algos.LOOP_METRICS))
    metrics = Metrics(loop, **{f: rng.uniform(1, 2, (2, 3)).astype(np.float32) for f in algorithm.metrics})
    members = ["seed_0", "seed_1"]
    record = records.update_records(metrics, chunk=0, first_update=0, steps_per_update=8)[0].to_json()
    tags = set(logs.scalars(record, members, algorithm.metrics))
    assert {f"train/{m}/seed_1" for m in algorithm.metrics} <= tags, sorted(tags)
    strided = {"type": "eval", "eval_return": [1.0, 2.0], "eval_length": [3, 4]}
    strided.update(records.chunk_training_stats(metrics, algorithm.metrics))
    tags = set(logs.scalars(strided, members, algorithm.metrics))
    assert {f"train/{m}/seed_0" for m in algorithm.metrics} <= tags and "eval/return_iqm" in tags
