"""Env runners on Ray (``actor=ray``): the actor–learner pipeline with its
actors as Ray actors, on a local two-node Ray cluster
(``ray.cluster_utils.Cluster``) that the runs join with ``actor.address``.

The Ray pipeline shares everything but transport with the thread pipeline:
lock-step runs of both give the same learner records, number for number. The
docs' command learns CartPole on a local Ray runtime; on the cluster, a runner
whose process is killed mid-run is replaced and the run finishes with the
drop counted; SIGINT leaves no runner alive; an env that raises or hangs in
a runner is the run's one line; bad input is one line and exit 2 before anything is
written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, run, run_dir_of, user_env
from tests.ray_lock import ray_lock
from tests.test_readme import COMMANDS

ray = pytest.importorskip("ray")

DOCS = "python -m jaxrl.train env=gymnasium:CartPole-v1 seeds=4 actor=ray actor.runners=2"
DOCS_CLUSTER = (
    "python -m jaxrl.train env=gymnasium:CartPole-v1 seeds=4 actor=ray actor.runners=2 "
    "actor.address=auto actor.strategy=SPREAD"
)
TOY = ["env.module=tests.toy_host_envs", "seeds=2", "num_envs=2", "algo.num_steps=16", "eval.episodes=2"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A two-node Ray cluster on this machine (2 CPUs per node, ``.address``); this process is connected to it."""
    from ray.cluster_utils import Cluster

    with ray_lock(tmp_path_factory):
        nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
        try:
            nodes.add_node(num_cpus=2)
            nodes.wait_for_nodes()
            ray.init(address=nodes.address, log_to_driver=False, logging_level="ERROR")
            yield nodes
        finally:
            ray.shutdown()
            nodes.shutdown()


def _cli(args: list[str], cwd: Path, module: str = "jaxrl.train", **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**user_env(), "PYTHONPATH": str(REPO)},
        **kwargs,
    )


def _runner_pids() -> dict[str, int]:
    from jaxrl.actors.ray_runners import NAMESPACE, live_runners

    return {name: ray.get(ray.get_actor(name, namespace=NAMESPACE).pid.remote()) for name in live_runners()}


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_docs_command_learns_cartpole_on_two_runners(ray_machine, home):
    """``python -m jaxrl.train env=gymnasium:CartPole-v1 seeds=4 actor=ray
    actor.runners=2`` (a local Ray runtime the run starts and stops) at a CI
    budget: ≥ 475 on at least 3 of 4 seeds, and the table reports the runners."""
    proc = run(DOCS, home, COMMANDS[DOCS])
    summary = json.loads((run_dir_of(proc) / "summary.json").read_text())
    finals = summary["final_eval_return"]
    assert len(finals) == 4 and sum(r >= 475 for r in finals) >= 3, finals
    pipeline = summary["pipeline"]
    assert pipeline["runners_replaced"] == 0 and pipeline["trajectories_dropped"] == 0, pipeline
    assert pipeline["fetch_s_per_runner"] > 0 and pipeline["lag_max"] <= 1, pipeline
    assert "2 Ray env runner(s)" in proc.stderr and "on a local Ray runtime" in proc.stderr
    assert "Ray env runners per update: parameter broadcast" in proc.stdout and "verdict:" in proc.stdout


def test_a_killed_runner_is_replaced_and_the_drop_counted(cluster, home):
    """The docs' cluster command (on the two-node cluster; runners spread one per
    node): runner 0's process is killed mid-run; a new runner takes its bundle,
    its trajectory is dropped, the run finishes and learns CartPole (every seed
    far above random play at 40k env steps: which trajectories the actors' timing
    drops varies from run to run, so the bar is loose; the docs command's test holds
    the tight one), no runner is left."""
    args = ["env=gymnasium:CartPole-v1", "seeds=4", "actor=ray", "actor.runners=2", f"actor.address={cluster.address}"]
    args += ["actor.strategy=SPREAD", "total_timesteps=40000", "num_evals=8", "eval.episodes=4", "plots=false"]
    proc = _cli(args, home)
    for line in proc.stderr:
        if line.startswith("chunk 2/"):
            break
    pids = _runner_pids()
    assert len(pids) == 2, pids
    killed = sorted(pids)[0]
    os.kill(pids[killed], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert "runner 0 died (ActorDiedError)" in err and "Traceback" not in err, err[-3000:]
    run_dir = run_dir_of(subprocess.CompletedProcess([], 0, out, err))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["pipeline"]["runners_replaced"] == 1 and summary["pipeline"]["trajectories_dropped"] == 1
    assert "1 runner(s) replaced (1 trajectories dropped)" in out
    updates = [r for r in _records(run_dir) if r["type"] == "update"]
    assert [r["update"] for r in updates] == list(range(1, summary["num_updates"] + 1))  # none skipped
    assert sum(r["pipeline"]["replaced"] for r in updates) == 1
    finals = summary["final_eval_return"]  # learned on the two-node cluster despite the loss (random play ≈ 22;
    assert min(finals) >= 150, finals  # seen: 391, 363, 500, 500 and runs with 3 of 4 at 500)
    assert _runner_pids() == {}
    # after training, as for any run: evaluate the seeds' policies on fresh episodes
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrl.evaluate", str(run_dir), "episodes=2"],
        capture_output=True,
        text=True,
        cwd=home,
        env=user_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads((run_dir / "evaluation.json").read_text())
    assert [s["seed"] for s in result["seeds"]] == [0, 1, 2, 3] and all(len(s["returns"]) == 2 for s in result["seeds"])


def test_a_lost_node_is_replaced_on_the_nodes_left(cluster, home, tmp_path):
    """The node of runner 1 (runners spread one per node) leaves the cluster mid-run:
    Ray re-places its bundle on the head, where a new runner takes over; then the node comes back."""
    worker = [node for node in cluster.list_all_nodes() if not node.head][0]
    args = ["env=gymnasium:CartPole-v1", "seeds=2", "actor=ray", f"actor.address={cluster.address}"]
    args += ["actor.strategy=SPREAD", "total_timesteps=20000", "num_evals=4", "eval.episodes=2"]
    proc = _cli([*args, f"run_dir={tmp_path / 'run'}", "plots=false"], home)
    try:
        for line in proc.stderr:
            if line.startswith("chunk 1/"):
                break
        cluster.remove_node(worker)
        out, err = proc.communicate(timeout=300)
    finally:
        cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
    assert proc.returncode == 0, err[-3000:]
    assert "died (ActorDiedError)" in err and "Traceback" not in err, err[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["pipeline"]["runners_replaced"] >= 1 and len(summary["final_eval_return"]) == 2


def test_sigint_stops_every_runner_and_keeps_the_checkpoint(cluster, home, tmp_path):
    args = [
        "env=gymnasium:JaxrlSlow-v0",
        *TOY,
        "actor=ray",
        f"actor.address={cluster.address}",
        "total_timesteps=100000",
    ]
    proc = _cli([*args, "num_evals=1000", f"run_dir={tmp_path / 'run'}", "plots=false"], home)
    for line in proc.stderr:
        if line.startswith("chunk 2/"):
            break
    assert len(_runner_pids()) == 2
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    assert "last checkpoint: chunk" in err and "Traceback" not in err
    assert os.listdir(tmp_path / "run" / "checkpoints")
    assert _runner_pids() == {}


def test_lock_step_runs_on_threads_and_on_ray_runners_are_the_same(cluster, home, tmp_path):
    """With ``actor.sync=true`` the same two actors — threads of the learner's
    process, or Ray runners in processes of their own — collect the same steps:
    the learner's records are equal number for number (times aside)."""
    base = ["env=gymnasium:CartPole-v1", "seeds=2", "actor.sync=true", "total_timesteps=4096", "num_evals=2"]
    base += ["eval.episodes=2", "plots=false"]
    rows = {}
    for name, kind in (("threads", ["actor.threads=2"]), ("ray", ["actor=ray", f"actor.address={cluster.address}"])):
        proc = _cli([*base, *kind, f"run_dir={tmp_path / name}"], home)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        rows[name] = [
            {k: v for k, v in r.items() if k not in ("pipeline", "chunk_time_s", "env_steps_per_s")}
            for r in _records(tmp_path / name)
        ]
    assert len(rows["ray"]) == len(rows["threads"]) > 8 and rows["ray"] == rows["threads"]


def test_a_lock_step_sweep_on_ray_runners_equals_it_on_threads(cluster, home, tmp_path):
    """A host sweep (2 configurations × 2 seeds in one learner) in lock step:
    its group's records are the same with the actors as Ray runners as with
    threads (the runners step every member's envs and act for every member)."""
    base = ["env=gymnasium:CartPole-v1", "seeds=2", "algo.lr=1e-3,3e-3", "actor.sync=true", "total_timesteps=2048"]
    base += ["num_evals=2", "eval.episodes=2", "plots=false"]
    rows = {}
    for name, kind in (("threads", ["actor.threads=2"]), ("ray", ["actor=ray", f"actor.address={cluster.address}"])):
        proc = _cli([*base, *kind, f"run_dir={tmp_path / name}"], home, module="jaxrl.sweep")
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        rows[name] = [
            {k: v for k, v in r.items() if k not in ("pipeline", "chunk_time_s", "env_steps_per_s")}
            for r in _records(tmp_path / name / "group-0")
        ]
    assert len(rows["ray"]) == len(rows["threads"]) > 4 and rows["ray"] == rows["threads"]
    assert len(rows["ray"][-1]["eval_return"]) == 4


def test_an_env_that_raises_in_a_runner_is_one_line(cluster, home, tmp_path):
    args = [
        "env=gymnasium:JaxrlRaises-v0",
        *TOY,
        "actor=ray",
        f"actor.address={cluster.address}",
        "total_timesteps=2048",
    ]
    proc = _cli([*args, "num_evals=4", f"run_dir={tmp_path / 'run'}", "plots=false"], home)
    _, err = proc.communicate(timeout=300)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(lines) == 1, err[-3000:]
    assert "gymnasium:JaxrlRaises-v0: seed 0" in lines[0] and "in runner 0" in lines[0], lines[0]
    assert "RuntimeError: the simulator lost its state" in lines[0] and "Traceback" not in err
    assert _runner_pids() == {}


def test_a_hung_env_in_a_runner_is_stopped_by_the_watchdog(cluster, home, tmp_path):
    args = [
        "env=gymnasium:JaxrlHangs-v0",
        *TOY,
        "actor=ray",
        f"actor.address={cluster.address}",
        "total_timesteps=2048",
    ]
    proc = _cli([*args, "num_evals=4", "actor.timeout_s=2", f"run_dir={tmp_path / 'run'}", "plots=false"], home)
    _, err = proc.communicate(timeout=300)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(lines) == 1, err[-3000:]
    assert "actor.timeout_s: an env step of runner" in lines[0] and "has not returned" in lines[0], lines[0]
    assert "last checkpoint: chunk" in lines[0] and "Traceback" not in err
    assert _runner_pids() == {}


@pytest.mark.parametrize(
    "args, field",
    [
        (["actor.runners=0"], "actor.runners=0: must be a positive integer"),
        (["actor.runners=3"], "actor.runners=3: must divide num_envs=8"),
        (["actor=rays"], "actor=rays: must be threads or ray"),
        (["actor.strategy=FAR"], "actor.strategy=FAR: must be one of PACK, SPREAD"),
        (["actor.address=127.0.0.1:1"], "actor.address=127.0.0.1:1: is unreachable"),
        (["actor.address=nowhere"], "actor.address=nowhere: must be auto or HOST:PORT"),
        (["actor.cpus_per_runner=3", "CLUSTER"], "actor.runners=2: × actor.cpus_per_runner=3 asks for 6 CPUs and"),
        (["actor.strategy=STRICT_SPREAD", "actor.runners=4", "CLUSTER"], "actor.strategy=STRICT_SPREAD: puts each"),
        (["env=cartpole"], "actor=ray: steps host envs"),
    ],
)
def test_bad_ray_input_exits_2_with_one_line_and_writes_nothing(cluster, tmp_path, args, field):
    address = [f"actor.address={cluster.address}"] if "CLUSTER" in args else []
    args = [a for a in args if a != "CLUSTER"]
    env = [] if any(a.startswith("env=") for a in args) else ["env=gymnasium:CartPole-v1"]
    proc = _cli([*env, "actor=ray", *args, *address, f"runs_root={tmp_path / 'runs'}"], tmp_path)
    _, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {field}"), err[-3000:]
    assert not (tmp_path / "runs").exists()


def test_ray_not_installed_is_one_line_naming_the_extra(tmp_path):
    code = (
        "import sys; sys.modules['ray'] = None; from jaxrl import train; "
        "sys.exit(train.main(['env=gymnasium:CartPole-v1', 'actor=ray', "
        f"'runs_root={tmp_path / 'runs'}']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=user_env(), timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: actor=ray: needs ray, which is not installed") and "[ray]" in lines[0]
    assert not (tmp_path / "runs").exists()
