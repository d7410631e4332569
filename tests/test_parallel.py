"""Devices and hosts: sharded seeds, data parallelism, two processes.

Simulated devices need XLA_FLAGS before jax starts, so every run here is a
subprocess of ``python -m jaxrl.train``.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers import CARTPOLE_TINY

TINY = ["env=cartpole", *CARTPOLE_TINY, "plots=false", "progress=false"]
TIMING = {"chunk_time_s", "env_steps_per_s"}


def _env(devices: int) -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.getcwd())
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}" if devices > 1 else ""
    return env


def _train(args, devices=1, timeout=300, env=None):
    return subprocess.run(
        [sys.executable, "-m", "jaxrl.train", *args],
        capture_output=True,
        text=True,
        env=_env(devices) if env is None else env,
        timeout=timeout,
    )


def _records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f]


def test_cli_splits_the_cpu_into_one_device_per_core(tmp_path):
    """Without XLA_FLAGS, the CLI exposes JAXRL_CPU_DEVICES (default: the usable
    cores) XLA:CPU devices and shards the members over as many as divide them
    (the even split of the default, unpinned, is what tests/test_readme.py's
    runs check)."""
    env = _env(1)
    env["JAXRL_CPU_DEVICES"] = "2"
    args = [*TINY, "checkpoint=false"]
    proc = _train([*args, "seeds=3", f"run_dir={tmp_path / 'odd'}"], env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(1 device)" in proc.stderr  # 3 members do not split over 2 cores: one device, no error


def test_cli_runs_a_small_one_seed_program_on_one_cpu_thread(tmp_path):
    """Unset, the CLI gives a one-seed run with few envs a one-thread XLA:CPU
    pool (and says so); the pool changes the speed, never the numbers."""
    env = {k: v for k, v in _env(1).items() if k not in ("PJRT_NPROC", "NPROC", "JAXRL_CPU_THREADS")}
    env["JAXRL_CPU_DEVICES"] = "2"
    args = [*TINY, "checkpoint=false", "seeds=1"]
    # the CLI's main, then what XLA was started with: the pool size and no device split
    probe = (
        "import json, os, sys\nfrom jaxrl import train\ncode = train.main(sys.argv[1:])\nimport jax\n"
        "print(json.dumps({'PJRT_NPROC': os.environ.get('PJRT_NPROC'), 'devices': jax.device_count()}))\n"
        "sys.exit(code)"
    )
    auto = subprocess.run(
        [sys.executable, "-c", probe, *args, f"run_dir={tmp_path / 'auto'}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert auto.returncode == 0, auto.stderr[-2000:]
    assert "(1 device, 1 CPU thread)" in auto.stderr
    assert json.loads(auto.stdout.strip().splitlines()[-1]) == {"PJRT_NPROC": "1", "devices": 1}
    assert json.loads((tmp_path / "auto" / "summary.json").read_text())["cpu_threads"] == 1
    two = _train([*args, f"run_dir={tmp_path / 'two'}"], env={**env, "JAXRL_CPU_THREADS": "2"})
    assert two.returncode == 0, two.stderr[-2000:]
    assert "(1 device, 2 CPU threads)" in two.stderr
    assert _records(tmp_path / "auto") == _records(tmp_path / "two")


@pytest.mark.parametrize(
    "members, envs, one_device, setting, want",
    [
        (1, 4, True, None, 1),
        (1, 64, True, None, 1),
        (1, 65, True, None, None),  # a larger program uses the cores
        (2, 4, True, None, None),  # members are sharded over per-core devices
        (1, 4, False, None, None),  # parallel=data / several processes
        (16, 2048, True, "3", 3),  # an explicit count always wins
        (1, 4, True, "auto", 1),
    ],
)
def test_cpu_thread_count_for_a_job(members, envs, one_device, setting, want, monkeypatch):
    from jaxrl.perf import platform

    monkeypatch.delenv("JAXRL_CPU_THREADS", raising=False)
    if setting is not None:
        monkeypatch.setenv("JAXRL_CPU_THREADS", setting)
    monkeypatch.setattr(platform, "_accelerator_plugin_installed", lambda: False)
    assert platform.cpu_threads_for(members, envs, one_device) == want
    monkeypatch.setattr(platform, "_accelerator_plugin_installed", lambda: True)
    assert platform.cpu_threads_for(members, envs, one_device) == (want if setting not in (None, "auto") else None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_data_parallel_matches_one_device_with_all_envs(tmp_path):
    """parallel=data on 4 devices × 4 envs vs one device with 16 envs: the same
    program partitioned by XLA, so only reduction order differs. Stated
    tolerance: every per-update metric within 1e-5 relative + 1e-6 absolute."""
    args = [*TINY, "seeds=2", "num_envs=16", "checkpoint=false"]
    one = _train([*args, f"run_dir={tmp_path / 'one'}"], devices=1)
    four = _train([*args, "parallel=data", f"run_dir={tmp_path / 'four'}"], devices=4)
    assert one.returncode == 0, one.stderr[-2000:]
    assert four.returncode == 0, four.stderr[-2000:]
    assert "4 devices, envs split" in four.stderr
    a, b = _records(tmp_path / "one"), _records(tmp_path / "four")
    assert len(a) == len(b)
    for ra, rb in zip(a, b, strict=True):
        assert ra.keys() == rb.keys()
        for key in ra:
            if key == "type":
                continue
            np.testing.assert_allclose(
                np.asarray(rb[key], float), np.asarray(ra[key], float), rtol=1e-5, atol=1e-6, err_msg=key
            )


def test_layouts_shard_the_right_axes():
    """seeds: every leaf with a member axis over the device axis; data: the env
    axis of the env fields only, everything else replicated."""
    import jax
    from jax.sharding import PartitionSpec as P

    from jaxrl import parse, validate
    from jaxrl.run import parallel, program
    from jaxrl.run.spec import prepare

    config = validate(parse([*TINY, "seeds=2"]))
    abstract = program.build(prepare(config, "/unused", layout=False)).abstract
    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]), (parallel.AXIS,))
    seeds = parallel.carry_shardings(parallel.Plan(mesh, "seeds"), abstract)
    data = parallel.carry_shardings(parallel.Plan(mesh, "data"), abstract, ("env_state", "obs", "discounted_return"))
    assert seeds.states.agent.params["params"]["actor_torso"]["Dense_0"]["kernel"].spec == P(parallel.AXIS)
    assert seeds.hparams.lr.spec == P(parallel.AXIS) and seeds.pbt_key.spec == P()
    assert data.states.agent.obs.spec == P(None, parallel.AXIS)
    assert all(s.spec == P(None, parallel.AXIS) for s in jax.tree.leaves(data.states.agent.env_state))
    assert data.states.agent.params["params"]["actor_torso"]["Dense_0"]["kernel"].spec == P()
    assert data.states.update.spec == P() and data.hparams.lr.spec == P()


def test_layout_errors_are_one_line_and_write_nothing(tmp_path):
    run_dir = tmp_path / "run"
    proc = _train([*TINY, "seeds=6", f"run_dir={run_dir}"], devices=4)
    assert proc.returncode == 2
    assert "do not split evenly over 4 devices" in proc.stderr and "devices=3" in proc.stderr
    assert "Traceback" not in proc.stderr and not run_dir.exists()
    proc = _train([*TINY, "seeds=1", "num_envs=6", "parallel=data", f"run_dir={run_dir}"], devices=4)
    assert proc.returncode == 2 and "num_envs" in proc.stderr and "num_envs=8" in proc.stderr
    proc = _train([*TINY, "seeds=2", "devices=8", f"run_dir={run_dir}"], devices=4)
    assert proc.returncode == 2 and "only 4 devices" in proc.stderr
    assert not run_dir.exists()


def _launch(args, process_id, port, num=2):
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxrl.train",
            *args,
            f"dist.coordinator=127.0.0.1:{port}",
            f"dist.num_processes={num}",
            f"dist.process_id={process_id}",
            "dist.heartbeat_s=5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(1),
    )


def test_two_processes_give_the_one_process_summary(tmp_path):
    """Two processes (one CPU device each, gloo collectives) vs one process with
    two devices: same sharded program, same numbers; only process 0 writes,
    and the run resumes from the checkpoint both wrote."""
    args = [*TINY, "seeds=2"]
    port = _free_port()
    procs = [_launch([*args, f"run_dir={tmp_path / 'multi'}"], i, port) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert "IQM" in outs[0][0] and "IQM" not in outs[1][0]  # only process 0 reports
    assert "2 devices on 2 processes" in outs[0][1]
    single = _train([*args, f"run_dir={tmp_path / 'single'}"], devices=2)
    assert single.returncode == 0, single.stderr[-2000:]
    multi = json.loads((tmp_path / "multi" / "summary.json").read_text())
    one = json.loads((tmp_path / "single" / "summary.json").read_text())
    assert multi["final_eval_return"] == one["final_eval_return"]
    assert _records(tmp_path / "multi") == _records(tmp_path / "single")
    assert (tmp_path / "multi" / "checkpoints").is_dir()
    # one process (this one, one device) reads what two wrote
    from jaxrl import evaluate

    assert evaluate.main([str(tmp_path / "multi")]) == 0
    evaluation = json.loads((tmp_path / "multi" / "evaluation.json").read_text())
    np.testing.assert_allclose([s["mean"] for s in evaluation["seeds"]], multi["final_eval_return"], rtol=1e-3)
    # every process restores its shards of the final checkpoint (resume of a finished run: nothing left to train)
    port = _free_port()
    procs = [_launch([f"resume={tmp_path / 'multi'}"], i, port) for i in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    again = json.loads((tmp_path / "multi" / "summary.json").read_text())
    assert again["final_eval_return"] == multi["final_eval_return"]


def test_a_killed_process_stops_the_other(tmp_path):
    args = [*TINY, "seeds=2", "total_timesteps=5000000", "num_evals=200", "checkpoint=false"]
    port = _free_port()
    procs = [_launch([*args, f"run_dir={tmp_path / 'run'}"], i, port) for i in range(2)]
    try:
        for line in procs[0].stderr:  # process 0 reports once both have joined and compiled
            if line.startswith("compiled in"):
                break
        time.sleep(3)  # training
        assert procs[0].poll() is None and procs[1].poll() is None
        procs[1].send_signal(signal.SIGKILL)
        t0 = time.time()
        _, err = procs[0].communicate(timeout=120)
        waited = time.time() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[0].returncode != 0
    assert "another task died" in err or "unhealthy" in err, err[-3000:]
    assert waited < 90


_SHARDED_SCAN = """
import json, re
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxrl.perf import packing
from tests.test_packing import _env_body, _env_init
mesh = Mesh(np.asarray(jax.devices()), ("d",))
envs, steps = NamedSharding(mesh, P("d")), NamedSharding(mesh, P(None, "d"))
init, xs = _env_init(8), jax.random.normal(jax.random.key(1), (5, 8))
fn = jax.jit(lambda i, x: packing.scan(_env_body, i, x), in_shardings=(jax.tree.map(lambda _: envs, init), steps))
got = fn(init, xs)
want = jax.lax.scan(_env_body, init, xs)
same = all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)))
hlo = fn.lower(init, xs).compile().as_text()
ops = sorted(set(re.findall(r" (all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter)[-(]", hlo)))
print(json.dumps({"devices": jax.device_count(), "same": same, "collectives": ops}))
"""


def test_scan_over_an_env_axis_sharded_over_devices_runs_without_collectives():
    """parallel=data shards the env axis: the packed loop must keep it sharded
    (a fully flattened carry straddled the shards, and XLA gathered it onto every
    device at every step — 8× slower data-parallel training). The loop is
    jaxrl.perf.packing.scan over tests/test_packing.py's env-like body."""
    proc = subprocess.run(
        [sys.executable, "-c", _SHARDED_SCAN], capture_output=True, text=True, env=_env(2), timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"devices": 2, "same": True, "collectives": []}


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
