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
import sys
from pathlib import Path

import pytest

from jaxrl import sweep
from jaxrl.core.errors import ConfigError
from jaxrl.run import launch, sweeping
from tests.helpers import PINS, REPO, shrink, user_env

# docs/cluster.md's commands (tests/test_readme.py's COMMANDS lists them for this module)
ONE = "python -m jaxrl.sweep env=cartpole seeds=8 num_envs=4,8 algo.lr=1e-3,3e-3"
SUBMITIT = f"{ONE} launcher=submitit_local"
SLURM = (
    f"{ONE} launcher=submitit_slurm launcher.partition=gpu launcher.gpus_per_job=1 launcher.timeout_min=120 "
    'launcher.setup="module load cuda"'
)
RAY = f"{ONE} launcher=ray launcher.address=auto"
RESUME = "python -m jaxrl.sweep resume=SWEEP_DIR"
ONE_GROUP = "python -m jaxrl.sweep resume=SWEEP_DIR groups=1 launcher=local"
CLUSTER_COMMANDS = (ONE, SUBMITIT, SLURM, RAY, RESUME, ONE_GROUP)
# a CI budget: 2 seeds, 16 updates, one evaluation; progress once per chunk, so
# that every sweep here (and each of its jobs) loads the two programs from the
# session's compilation cache instead of compiling them again
BUDGET = {
    "seeds": "2",
    "total_timesteps": "2048",
    "num_evals": "1",
    "eval.episodes": "2",
    "plots": "false",
    "progress": "chunk",
}

# A stand-in for SLURM on this machine: sbatch runs the batch file in the
# background (recording it), sacct reports its state, srun runs its command.
SBATCH = r"""#!/bin/bash
id=$(( (RANDOM << 15) | RANDOM ))
cp "$1" "$FAKE_SLURM/$id.sbatch"
(
  export SLURM_JOB_ID=$id SLURM_JOB_NUM_NODES=1 SLURM_JOB_NODELIST=localhost SLURM_NODEID=0 \
    SLURM_NTASKS=1 SLURM_PROCID=0 SLURM_LOCALID=0
  echo RUNNING > "$FAKE_SLURM/$id.state"
  bash "$1" && echo COMPLETED > "$FAKE_SLURM/$id.state" || echo FAILED > "$FAKE_SLURM/$id.state"
) > /dev/null 2>&1 &
echo "Submitted batch job $id"
"""
SACCT = r"""#!/bin/bash
echo "JobID|State|NodeList"
while [ $# -gt 0 ]; do
  if [ "$1" = "-j" ]; then
    id=$2; shift
    echo "$id|$(cat "$FAKE_SLURM/$id.state" 2>/dev/null || echo PENDING)|localhost"
  fi
  shift
done
"""
SRUN = r"""#!/bin/bash
while [[ "$1" == -* ]]; do case "$1" in --output|--error|-o|-e) shift 2;; *) shift;; esac; done
exec "$@"
"""


def report_of(sweep_dir: Path) -> dict:
    """report.json without the group directories' paths."""
    data = json.loads((sweep_dir / "report.json").read_text())
    for row in data["rows"]:
        row.pop("source", None)
    return data


def sweep_in(command: str, home: Path, name: str, env: dict | None = None, code: int = 0, **subs: str):
    """``command`` at the CI budget, its sweep directory ``home/name``."""
    for key, value in subs.items():
        command = command.replace(key, value)
    changes = {} if "resume=" in command else {**BUDGET, "run_dir": str(home / name)}
    proc = subprocess.run(
        shrink(command, changes), cwd=home, env=env or user_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == code, f"{command}\n{proc.stderr[-3000:]}"
    return proc


def copy_sweep(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    spec = (target / "sweep.json").read_text()
    (target / "sweep.json").write_text(spec.replace(str(source), str(target)))
    for name in ("report.json", "report.md", "report.csv"):
        (target / name).unlink(missing_ok=True)
    return target


@pytest.fixture(scope="module")
def one_process(home) -> Path:
    """The reference: both groups in this process, one after another."""
    proc = sweep_in(ONE, home, "local")
    assert "4 configurations × 2 seeds = 8 runs in 2 compiled program(s)" in proc.stderr
    assert "launcher=" not in proc.stderr and "IQM" in proc.stdout
    return home / "local"


@pytest.fixture(scope="module")
def submitit_sweep(home, one_process) -> Path:
    proc = sweep_in(SUBMITIT, home, "submitit")
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
        assert log.splitlines()[0].endswith(f"-m jaxrl.sweep resume={submitit_sweep} groups={g} launcher=local")
        assert "compiled in" in log
    for name in ("report.md", "report.csv"):
        assert (submitit_sweep / name).read_text().replace(str(submitit_sweep), "") == (
            (one_process / name).read_text().replace(str(one_process), "")
        )


def test_submitit_slurm_on_a_stand_in_cluster(one_process, home, tmp_path):
    """The docs' SLURM command: one sbatch file per group with the asked-for
    directives and setup, run by a stand-in for SLURM, the one-process report."""
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, text in {"sbatch": SBATCH, "sacct": SACCT, "srun": SRUN, "scancel": "#!/bin/bash\n"}.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {**user_env(), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_SLURM": str(state)}
    proc = sweep_in(SLURM, home, "slurm", env=env)
    assert len(re.findall(r"group \d: submitit_slurm job \d+", proc.stderr)) == 2
    batches = [p.read_text() for p in state.glob("*.sbatch")]
    assert len(batches) == 2
    for text in batches:
        for line in ("#SBATCH --partition=gpu", "#SBATCH --gpus-per-node=1", "#SBATCH --time=120", "module load cuda"):
            assert line in text, text
    assert report_of(home / "slurm") == report_of(one_process)


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # ray.init starts the runtime's processes
def test_run_on_ray_gives_the_one_process_report(ray_machine, one_process, home, monkeypatch):
    """docs/cluster.md's Python example, at the CI budget, on a local Ray
    cluster started and stopped here; each group is a Ray task."""
    import ray

    for name in PINS:  # the workers inherit the user's environment, not the test session's pins
        monkeypatch.delenv(name, raising=False)
    for name, value in user_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(home)
    page = (REPO / "docs" / "cluster.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) == 1
    original = '"seeds=8",'
    assert original in blocks[0]
    budget = ", ".join(f'"{k}={v}"' for k, v in {**BUDGET, "run_dir": str(home / "ray")}.items())
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        namespace: dict = {}
        exec(compile(blocks[0].replace(original, budget + ","), "docs/cluster.md", "exec"), namespace)
        assert ray.is_initialized()  # the caller's runtime is left running
    finally:
        ray.shutdown()
    result = namespace["result"]
    assert result["sweep_dir"] == str(home / "ray")
    assert report_of(home / "ray") == report_of(one_process)
    assert [r["label"] for r in result["report"]["rows"]] == [r["label"] for r in report_of(one_process)["rows"]]


def test_ray_joins_a_running_cluster(ray_machine, one_process, home):
    """The docs' ``launcher=ray launcher.address=auto`` on a cluster started
    with ``ray start --head`` (and stopped) here."""
    env = user_env()
    ray = str(Path(sys.executable).with_name("ray"))
    start = [ray, "start", "--head", "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"]
    started = subprocess.run(start, env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        proc = sweep_in(RAY, home, "ray-cluster", env=env)
    finally:
        subprocess.run([ray, "stop", "--force"], env=env, capture_output=True, timeout=120)
    assert len(re.findall(r"group \d: ray task \w+", proc.stderr)) == 2
    assert "Started a local Ray instance" not in proc.stderr
    assert report_of(home / "ray-cluster") == report_of(one_process)


def test_a_failed_group_is_named_and_relaunched_alone(ray_machine, submitit_sweep, one_process, home):
    """Group 1's checkpoint is damaged: ``resume=`` re-launches it alone on the
    recorded launcher, its job fails and is named with its log; group 0 is not
    run again. With the damage removed, ``resume=`` on a Ray cluster the CLI
    starts and stops runs group 1 alone and gives the report."""
    broken = copy_sweep(submitit_sweep, home / "broken")
    (broken / "group-1" / "summary.json").unlink()
    for path in (broken / "group-1" / "checkpoints").rglob("*"):
        if path.is_file():
            path.write_text("damaged")
    summary0 = (broken / "group-0" / "summary.json").stat().st_mtime_ns

    proc = sweep_in(RESUME, home, "broken", code=1, SWEEP_DIR=str(broken))
    assert "group 0: done" in proc.stderr and "launcher=submitit_local: 1 job(s)" in proc.stderr
    failed = [line for line in proc.stderr.splitlines() if line.startswith("failed: group 1 ")]
    assert len(failed) == 1, proc.stderr[-3000:]
    assert "num_envs=8 lr=0.001, num_envs=8 lr=0.003" in failed[0] and "holds no intact checkpoint" in failed[0]
    assert f"log: {broken / 'jobs' / 'group-1.log'}" in failed[0]
    assert f"re-launch the unfinished groups: python -m jaxrl.sweep resume={broken}" in proc.stderr
    assert not (broken / "report.json").exists()

    shutil.rmtree(broken / "group-1")
    proc = sweep_in(f"{RESUME} launcher=ray launcher.cpus_per_job=1", home, "broken", SWEEP_DIR=str(broken))
    assert "launcher=ray: 1 job(s)" in proc.stderr and re.search(r"group 1: ray task \w+", proc.stderr)
    assert (broken / "group-0" / "summary.json").stat().st_mtime_ns == summary0  # not run again
    assert report_of(broken) == report_of(one_process)


def test_groups_runs_only_the_listed_groups_and_leaves_the_report(one_process, home):
    """``groups=`` (each job's own command) trains those groups in this process;
    the report waits for ``resume=`` without them."""
    part = copy_sweep(one_process, home / "part")
    mtime = (part / "group-0" / "summary.json").stat().st_mtime_ns
    shutil.rmtree(part / "group-1")
    proc = sweep_in(ONE_GROUP, home, "part", SWEEP_DIR=str(part))
    assert "2 of 2 groups done" in proc.stderr
    assert f"every group is done: python -m jaxrl.sweep resume={part} writes the report" in proc.stderr
    assert (part / "group-0" / "summary.json").stat().st_mtime_ns == mtime
    assert not (part / "report.json").exists()
    proc = sweep_in(RESUME, home, "part", SWEEP_DIR=str(part))
    assert "group 0: done" in proc.stderr and "group 1: done" in proc.stderr and "IQM" in proc.stdout
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
    # from this checkout, the command installs the extra from it (the index's jaxrl would replace it)
    assert f"launcher=ray: needs ray, which is not installed; fix: pip install -e '{REPO}[ray]'" in err
    assert os.listdir(one_process).count("jobs") == 0


@pytest.mark.parametrize("text", ["{not json", '{"argv": "env=cartpole"}', "[]"])
def test_a_damaged_sweep_json_is_one_line_and_exit_2(text, tmp_path, capsys):
    (tmp_path / "sweep.json").write_text(text)
    assert sweep.main([f"resume={tmp_path}", "launcher=submitit_local"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"resume={tmp_path}: holds an unreadable sweep.json" in err, err
    assert sorted(os.listdir(tmp_path)) == ["sweep.json"]
