"""Sweeps on cluster engines: ``launcher=submitit_local`` and a local Ray
cluster run a 2-group sweep and give the same report as running the groups in
one process; a failed group is named with its log and re-launched alone by
``resume=``.

Every sweep here runs the way a user runs it: through the CLI (or
:func:`jaxrl.sweep.run_on_ray`) in the CLI's default device layout, so the
jobs and the one-process reference compile the same programs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from jaxrl import sweep
from jaxrl.core.errors import ConfigError
from jaxrl.run import launch, sweeping
from tests.test_readme import PINS, run, shrink, user_env

# two static groups (num_envs) × two learning rates × two seeds, a CI budget
SWEEP = (
    "python -m jaxrl.sweep env=cartpole seeds=2 num_envs=4,8 algo.lr=1e-3,3e-3 "
    "total_timesteps=2048 num_evals=1 eval.episodes=2 plots=false"
)
ARGV = SWEEP.split()[3:]


def report_of(sweep_dir: Path) -> dict:
    """report.json without the group directories' paths."""
    data = json.loads((sweep_dir / "report.json").read_text())
    for row in data["rows"]:
        row.pop("source", None)
    return data


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("launchers")


@pytest.fixture(scope="module")
def one_process(home) -> Path:
    """The reference: both groups in this machine's one process, one after another."""
    proc = run(SWEEP + f" run_dir={home / 'local'}", home)
    assert "4 configurations × 2 seeds = 8 runs in 2 compiled program(s)" in proc.stderr
    return home / "local"


@pytest.fixture(scope="module")
def submitit_sweep(home, one_process) -> Path:
    proc = run(SWEEP + f" run_dir={home / 'submitit'} launcher=submitit_local", home)
    assert "launcher=submitit_local: 2 job(s), one per group" in proc.stderr
    assert re.search(r"group 0: submitit_local job \d+", proc.stderr) and "group 1: done" in proc.stderr
    assert "IQM" in proc.stdout
    return home / "submitit"


def test_submitit_local_gives_the_one_process_report(submitit_sweep, one_process):
    assert report_of(submitit_sweep) == report_of(one_process)
    spec = json.loads((submitit_sweep / "sweep.json").read_text())
    assert spec["launcher"] == ["name=submitit_local"] and len(spec["groups"]) == 2
    for g in (0, 1):
        log = (submitit_sweep / "jobs" / f"group-{g}.log").read_text()
        assert f"groups={g} launcher=local" in log.splitlines()[0]
        assert "compiled in" in log
    for name in ("report.md", "report.csv"):
        assert (submitit_sweep / name).read_text().replace(str(submitit_sweep), "") == (
            (one_process / name).read_text().replace(str(one_process), "")
        )


def test_run_on_ray_gives_the_one_process_report(one_process, home, monkeypatch):
    """A local Ray cluster, started and stopped here; each group is a Ray task."""
    import ray

    for name in PINS:  # the workers inherit the user's environment, not the test session's pins
        monkeypatch.delenv(name, raising=False)
    for name, value in user_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(home)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = sweep.run_on_ray([*ARGV, f"run_dir={home / 'ray'}"], cpus_per_job=1)
        assert ray.is_initialized()  # the caller's runtime is left running
    finally:
        ray.shutdown()
    assert result["sweep_dir"] == str(home / "ray")
    assert report_of(home / "ray") == report_of(one_process)
    assert {r["label"] for r in result["report"]["rows"]} == {r["label"] for r in report_of(one_process)["rows"]}


def test_a_failed_group_is_named_and_relaunched_alone(submitit_sweep, one_process, home):
    """Group 1's checkpoint is damaged: its job fails and is named with its log;
    group 0 is not run again. With the damage removed, ``resume=`` on a Ray
    cluster the CLI starts and stops runs group 1 alone and gives the report."""
    broken = home / "broken"
    shutil.copytree(submitit_sweep, broken)
    spec = json.loads((broken / "sweep.json").read_text())
    (broken / "sweep.json").write_text(json.dumps(spec).replace(str(submitit_sweep), str(broken)))
    (broken / "group-1" / "summary.json").unlink()
    for name in ("report.json", "report.md", "report.csv"):
        (broken / name).unlink()
    for path in (broken / "group-1" / "checkpoints").rglob("*"):
        if path.is_file():
            path.write_text("damaged")
    summary0 = (broken / "group-0" / "summary.json").stat().st_mtime_ns

    proc = subprocess.run(
        shrink(f"python -m jaxrl.sweep resume={broken}", None),
        cwd=home,
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "group 0: done" in proc.stderr and "1 job(s), one per group" in proc.stderr
    failed = [line for line in proc.stderr.splitlines() if line.startswith("failed: group 1 ")]
    assert len(failed) == 1, proc.stderr[-3000:]
    assert "num_envs=8 lr=0.001, num_envs=8 lr=0.003" in failed[0] and "holds no intact checkpoint" in failed[0]
    assert f"log: {broken / 'jobs' / 'group-1.log'}" in failed[0]
    assert f"python -m jaxrl.sweep resume={broken}" in proc.stderr
    assert not (broken / "report.json").exists()

    shutil.rmtree(broken / "group-1")
    proc = run(f"python -m jaxrl.sweep resume={broken} launcher=ray launcher.cpus_per_job=1", home)
    assert "launcher=ray: 1 job(s)" in proc.stderr and re.search(r"group 1: ray task \w+", proc.stderr)
    assert (broken / "group-0" / "summary.json").stat().st_mtime_ns == summary0  # not run again
    assert report_of(broken) == report_of(one_process)


def test_groups_runs_only_the_listed_groups_and_leaves_the_report(one_process, home):
    """``groups=`` (each job's own command) trains those groups in this process."""
    part = home / "part"
    shutil.copytree(one_process, part)
    spec = json.loads((part / "sweep.json").read_text())
    (part / "sweep.json").write_text(json.dumps(spec).replace(str(one_process), str(part)))
    (part / "report.json").unlink()
    mtime = (part / "group-1" / "summary.json").stat().st_mtime_ns
    shutil.rmtree(part / "group-0")
    proc = run(f"python -m jaxrl.sweep resume={part} groups=0", home)
    assert "2 of 2 groups done" in proc.stderr and f"python -m jaxrl.sweep resume={part} writes the report" in (
        proc.stderr
    )
    assert (part / "group-1" / "summary.json").stat().st_mtime_ns == mtime
    assert not (part / "report.json").exists()
    run(f"python -m jaxrl.sweep resume={part}", home)
    assert report_of(part) == report_of(one_process)


def test_max_members_splits_a_group_into_whole_configurations():
    argv = ["env=cartpole", "seeds=2", "algo.lr=1e-3,2e-3,3e-3", "num_envs=4,8"]
    assert sweeping.plan(argv).groups == [[0, 2, 4], [1, 3, 5]]  # configurations in grid order, lr first
    assert sweeping.plan([*argv, "sweep.max_members=4"]).groups == [[0, 2], [4], [1, 3], [5]]
    assert sweeping.plan([*argv, "sweep.max_members=5"]).groups == [[0, 2], [4], [1, 3], [5]]
    with pytest.raises(ConfigError, match=r"sweep\.max_members=1: is below the 2 seeds of one configuration"):
        sweeping.plan([*argv, "sweep.max_members=1"])


def test_launcher_settings_parse_and_hydra_spellings():
    rest, settings, groups = launch.split(
        ["env=cartpole", "hydra/launcher=submitit_slurm", "hydra.launcher.partition=gpu", "launcher.gpus_per_job=1"]
    )
    assert rest == ["env=cartpole"] and groups is None
    config = launch.parse(settings)
    assert (config.name, config.partition, config.gpus_per_job) == ("submitit_slurm", "gpu", 1)
    assert launch.overrides_of(config) == ["name=submitit_slurm", "gpus_per_job=1", "partition=gpu"]
    assert launch.split(["resume=x", "groups=3,1"])[2] == [1, 3]


BAD = [
    (["launcher=slurm"], "launcher=slurm: must be one of local | submitit_local | submitit_slurm | ray"),
    (["launcher=submitit_slurm", "launcher.partiton=gpu"], "launcher.partiton=gpu: unknown launcher key"),
    (["launcher=ray", "launcher.partition=gpu"], "launcher.partition=gpu: is a SLURM setting; launcher=ray"),
    (["launcher=submitit_local", "launcher.address=auto"], "launcher.address=auto: is a Ray setting"),
    (["launcher=ray", "launcher.parallel=-1"], "launcher.parallel=-1: must be ≥ 0"),
    (["launcher=ray", "launcher.gpus_per_job=one"], "launcher.gpus_per_job=one: must be an integer"),
    (["groups=1"], "groups=1: selects groups of an existing sweep; fix: add resume=SWEEP_DIR"),
    (["sweep.max_members=-4"], "sweep.max_members=-4: must be ≥ 0"),
]


@pytest.mark.parametrize("extra, message", BAD, ids=[b[1].split(":")[0] for b in BAD])
def test_bad_launcher_input_is_one_line_and_exit_2(extra, message, tmp_path, capsys):
    run_dir = tmp_path / "sweep"
    code = sweep.main(["env=cartpole", "seeds=2", "algo.lr=1e-3,3e-3", f"run_dir={run_dir}", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert message in err, err
    assert not run_dir.exists()


def test_a_group_that_is_not_in_the_sweep_and_a_missing_engine(one_process, monkeypatch, capsys):
    assert sweep.main([f"resume={one_process}", "groups=2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "groups=2: is not a group of this sweep (0 … 1)" in err and len(err.splitlines()) == 1
    real = launch.importlib.util.find_spec
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: None if name == "ray" else real(name))
    assert sweep.main([f"resume={one_process}", "launcher=ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert "launcher=ray: needs ray, which is not installed; fix: pip install 'jaxrl[ray]'" in err
    assert os.listdir(one_process).count("jobs") == 0
