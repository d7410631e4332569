"""The W&B logger, in this process: an offline run is written.

The README's after-training commands (evaluate, render, export, load_policy,
logger=tensorboard) run in the CLI's default layout in tests/test_readme.py;
their bad input in tests/test_bad_input.py.
"""

import os

import pytest

import jaxrl
from jaxrl import train
from tests.configs import CARTPOLE_TINY


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
