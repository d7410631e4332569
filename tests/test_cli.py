"""The CLI end to end: resume == uninterrupted, bad and damaged checkpoints.

The run directory and summary.json of the docs' commands: tests/test_readme.py.
"""

import json
import os

import numpy as np
import pytest

from jaxrl import train
from jaxrl.run import training
from jaxrl.run.overrides import resolve
from jaxrl.run.rundir import write_config

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
TIMING = {"chunk_time_s", "env_steps_per_s"}


def _records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f]


def test_resume_equals_uninterrupted(tmp_path):
    full, parted = tmp_path / "full", tmp_path / "parted"
    assert train.main([*SMALL, f"run_dir={full}", "plots=false", "progress=false"]) == 0
    config = resolve([*SMALL, f"run_dir={parted}", "plots=false", "progress=false"])
    assert training.run(config, stop_after_chunks=1) == 0
    assert not (parted / "summary.json").exists()
    assert train.main([f"resume={parted}"]) == 0
    a = json.loads((full / "summary.json").read_text())
    b = json.loads((parted / "summary.json").read_text())
    assert a["final_eval_return"] == b["final_eval_return"]
    assert _records(full) == _records(parted)
    # the final checkpoints hold bitwise-equal states
    import jax

    from jaxrl.run.checkpoint import keys_to_data
    from jaxrl.run.policy import open_run

    a, b = open_run(str(full)), open_run(str(parted))
    sa, ma, sb, mb = a.carry, a.meta, b.carry, b.meta
    assert ma["chunk"] == mb["chunk"] == 3
    for x, y in zip(jax.tree.leaves(keys_to_data(sa)), jax.tree.leaves(keys_to_data(sb)), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_resume_refuses_changed_settings(tmp_path, capsys):
    run_dir = tmp_path / "run"
    config = resolve([*SMALL, f"run_dir={run_dir}", "plots=false", "progress=false"])
    assert training.run(config, stop_after_chunks=1) == 0
    capsys.readouterr()
    assert train.main([f"resume={run_dir}", "algo.lr=0.1"]) == 2
    err = capsys.readouterr().err
    assert "algo.lr=0.1" in err and "resuming" in err


def _damage(checkpoint_dir, how: str) -> None:
    files = [p for p in (checkpoint_dir / "state").rglob("*") if p.is_file()]
    assert files
    for p in files:
        if how == "truncate":
            p.write_bytes(p.read_bytes()[: max(0, p.stat().st_size // 3)])
        else:
            p.unlink()


@pytest.mark.parametrize("damage, reason", [("truncate", "damaged"), ("delete_state", "missing")])
def test_corrupt_checkpoint_gives_exit_2(tmp_path, capsys, damage, reason):
    run_dir = tmp_path / "run"
    config = resolve([*SMALL, f"run_dir={run_dir}", "plots=false", "progress=false"])
    assert training.run(config, stop_after_chunks=1) == 0
    _damage(run_dir / "checkpoints" / "1", damage)
    capsys.readouterr()
    assert train.main([f"resume={run_dir}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no intact checkpoint" in err[0] and "resume=" in err[0], err
    assert f"checkpoint 1: {'its files are' if damage == 'truncate' else 'files of it are'} {reason}" in err[0], err


def test_damaged_newest_checkpoint_falls_back_to_an_intact_one(tmp_path, capsys):
    """resume= and evaluate use the newest intact checkpoint and say which in
    one line; the resumed run still equals an uninterrupted one (the same
    layout); the damaged checkpoint is moved aside."""
    from jaxrl import evaluate

    full, parted = tmp_path / "full", tmp_path / "parted"
    assert train.main([*SMALL, f"run_dir={full}", "plots=false", "progress=false"]) == 0
    config = resolve([*SMALL, f"run_dir={parted}", "plots=false", "progress=false"])
    assert training.run(config, stop_after_chunks=2) == 0
    _damage(parted / "checkpoints" / "2", "truncate")
    capsys.readouterr()
    assert evaluate.main([str(parted)]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and "checkpoint 2: its files are damaged" in warned[0], warned
    assert "using checkpoint 1 (2.05k env steps per member, 2.05k fewer)" in warned[0], warned
    assert train.main([f"resume={parted}"]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and "using checkpoint 1" in warned[0] and "damaged" in warned[0], warned
    assert (parted / "checkpoints" / "damaged" / "2").is_dir()
    assert _records(full) == _records(parted)
    a = json.loads((full / "summary.json").read_text())
    b = json.loads((parted / "summary.json").read_text())
    assert a["final_eval_return"] == b["final_eval_return"]
    for chunk in ("2", "3"):  # both damaged now: nothing intact is left
        _damage(full / "checkpoints" / chunk, "delete_state")
    assert evaluate.main([str(full)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "no intact checkpoint (checkpoint 3: files of it are missing (state/_METADATA); checkpoint 2:" in err[0]
    ), err


def test_missing_checkpoint_gives_exit_2(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = resolve([*SMALL, f"run_dir={run_dir}"])
    write_config(str(run_dir / "config.yaml"), config)
    assert train.main([f"resume={run_dir}"]) == 2
    assert "no complete checkpoint" in capsys.readouterr().err


def test_help_with_overrides_prints_the_resolved_config(capsys):
    """``--help env=NAME …``: the config those overrides run (the env's preset,
    then the overrides), without training; a bad env is the usual one line."""
    import yaml

    from jaxrl import config_for
    from jaxrl.run.overrides import to_dict

    assert train.main(["--help", "env=cartpole", "seeds=4", "algo.lr=1e-3"]) == 0
    out = capsys.readouterr().out
    shown = yaml.safe_load(out)
    assert shown == to_dict(config_for("cartpole", "seeds=4", "algo.lr=1e-3"))
    assert shown["algo"]["num_steps"] == 32 and shown["num_envs"] == 8  # the CartPole preset, not the defaults
    assert train.main(["--help", "env=cartpol"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: env=cartpol: unknown environment") and err.count("\n") == 1


def test_budgets_round_up_one_way_and_the_bar_counts_the_warm_up(capsys):
    """A budget is rounded up to whole rollouts and chunks (never down), the
    run says so, and the live line's steps are the header's (warm-up included)."""
    from jaxrl import config_for, make_train
    from jaxrl.run.logs import LiveProgress, format_count

    for env, steps in (("acrobot", 20000), ("cartpole", 200000), ("pendulum", 20000)):
        config = config_for(env, f"total_timesteps={steps}", **({"algo": "sac"} if env == "pendulum" else {}))
        trainer = make_train(config)
        assert trainer.total_env_steps >= steps, (env, trainer.total_env_steps)
        assert (
            trainer.total_env_steps - steps
            < trainer.chunk_updates * trainer.steps_per_update + trainer.steps_per_update
        )
    bar = LiveProgress(trainer.num_updates, trainer.steps_per_update, 1, warmup_steps=trainer.warmup_steps)
    assert trainer.warmup_steps > 0  # SAC's learning_starts
    bar.update = trainer.num_updates
    done = format_count(trainer.total_env_steps)
    assert f"{done}/{done} steps/seed" in bar.line()


def test_a_rounded_budget_is_said(tmp_path, capsys):
    args = [a for a in SMALL if not a.startswith("total_timesteps=")]
    assert train.main([*args, "total_timesteps=6000", f"run_dir={tmp_path}", "plots=false", "checkpoint=false"]) == 0
    err = capsys.readouterr().err
    # 4 envs × 32 steps a rollout, 3 chunks: 47 updates round up to 3 × 16
    assert "total_timesteps=6000 rounds up to 6144 env steps per seed: 3 chunks × 16 updates × 128 steps" in err


def test_every_command_prints_a_usage_line(capsys):
    from jaxrl import evaluate, export, report, sweep

    for module in (train, sweep, evaluate, export, report):
        assert module.main(["--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: python -m {module.__name__}") and "``" not in out, module.__name__
