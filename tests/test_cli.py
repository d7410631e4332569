"""The CLI end to end: run directory, summary, resume == uninterrupted, bad checkpoints."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from jaxrl import train

SMALL = [
    "env=cartpole",
    "seeds=2",
    "num_envs=4",
    "total_timesteps=6144",
    "num_evals=3",
    "eval.episodes=2",
    "algo.num_steps=32",
    "algo.num_minibatches=2",
    "algo.update_epochs=2",
]
SUMMARY_FIELDS = {
    "env",
    "algo",
    "seeds",
    "total_timesteps",
    "final_eval_return",
    "mean",
    "median",
    "iqm",
    "ci95",
    "solved_fraction",
    "compile_time_s",
    "train_time_s",
    "env_steps_per_s",
}
TIMING = {"chunk_time_s", "env_steps_per_s"}


def _records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f]


def test_cli_smoke_subprocess(tmp_path):
    run_dir = tmp_path / "run"
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.getcwd())
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrl.train", *SMALL, f"run_dir={run_dir}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"run directory: {run_dir}" in proc.stderr
    assert "IQM" in proc.stdout and "solved" in proc.stdout
    assert "return mean" in proc.stderr  # live progress from inside the program
    for name in ("config.yaml", "metrics.jsonl", "summary.json", "curves.png"):
        assert (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0, name
    assert any((run_dir / "checkpoints").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert SUMMARY_FIELDS <= set(summary)
    assert summary["seeds"] == [0, 1] and len(summary["final_eval_return"]) == 2
    assert summary["total_timesteps"] == 6144
    lo, hi = summary["ci95"]
    assert lo <= summary["iqm"] <= hi
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["num_envs"] == 4 and config["algo"]["num_steps"] == 32
    updates = [r for r in _records(run_dir) if r["type"] == "update"]
    assert len(updates) == 6144 // 128 and len(updates[0]["episode_return"]) == 2


def test_resume_equals_uninterrupted(tmp_path):
    full, parted = tmp_path / "full", tmp_path / "parted"
    assert train.main([*SMALL, f"run_dir={full}", "plots=false", "progress=false"]) == 0
    config = train.resolve([*SMALL, f"run_dir={parted}", "plots=false", "progress=false"])
    assert train.run(config, stop_after_chunks=1) == 0
    assert not (parted / "summary.json").exists()
    assert train.main([f"resume={parted}"]) == 0
    a = json.loads((full / "summary.json").read_text())
    b = json.loads((parted / "summary.json").read_text())
    assert a["final_eval_return"] == b["final_eval_return"]
    assert _records(full) == _records(parted)
    # the final checkpoints hold bitwise-equal states
    import jax

    from jaxrl import driver, envs
    from jaxrl.checkpoint import keys_to_data

    env = envs.make("cartpole")
    sa, ma = driver.load_carry(train.job_for(config, str(full), True), env)
    sb, mb = driver.load_carry(train.job_for(config, str(parted), True), env)
    assert ma["chunk"] == mb["chunk"] == 3
    for x, y in zip(jax.tree.leaves(keys_to_data(sa)), jax.tree.leaves(keys_to_data(sb)), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_resume_refuses_changed_settings(tmp_path, capsys):
    run_dir = tmp_path / "run"
    config = train.resolve([*SMALL, f"run_dir={run_dir}", "plots=false", "progress=false"])
    assert train.run(config, stop_after_chunks=1) == 0
    capsys.readouterr()
    assert train.main([f"resume={run_dir}", "algo.lr=0.1"]) == 2
    err = capsys.readouterr().err
    assert "algo.lr=0.1" in err and "resuming" in err


@pytest.mark.parametrize("damage", ["truncate", "delete_state"])
def test_corrupt_checkpoint_gives_exit_2(tmp_path, capsys, damage):
    run_dir = tmp_path / "run"
    config = train.resolve([*SMALL, f"run_dir={run_dir}", "plots=false", "progress=false"])
    assert train.run(config, stop_after_chunks=1) == 0
    state_dir = run_dir / "checkpoints" / "1" / "state"
    files = [p for p in state_dir.rglob("*") if p.is_file()]
    assert files
    if damage == "truncate":
        for p in files:
            p.write_bytes(p.read_bytes()[: max(0, p.stat().st_size // 3)])
    else:
        for p in files:
            p.unlink()
    capsys.readouterr()
    assert train.main([f"resume={run_dir}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoint" in err[0] and "resume=" in err[0], err


def test_missing_checkpoint_gives_exit_2(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = train.resolve([*SMALL, f"run_dir={run_dir}"])
    train._write_config(str(run_dir / "config.yaml"), config)
    assert train.main([f"resume={run_dir}"]) == 2
    assert "no complete checkpoint" in capsys.readouterr().err
