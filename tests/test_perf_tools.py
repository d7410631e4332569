"""profile=true, the persistent compilation cache and progress=chunk."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import train
from jaxrl.perf import platform
from jaxrl.run import profile
from tests.helpers import CARTPOLE_TINY

SMALL = ["env=cartpole", "seeds=2", *CARTPOLE_TINY, "plots=false"]


def test_profile_breakdown_and_trace(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert train.main([*SMALL, f"run_dir={run_dir}", "profile=true", "progress=false"]) == 0
    result = json.loads((run_dir / "profile.json").read_text())
    phases = [row["phase"].split(":")[0] for row in result["phases"]]
    assert phases == ["env only", "rollout", "advantages", "learner"]
    parts = [row["ms"] for row in result["phases"] if row["cumulative"]]
    # the parts are differences of cumulative prefixes: they add up to the full update
    assert abs(sum(parts) - result["full_update_ms"]) < 1e-6 * max(1.0, result["full_update_ms"])
    assert all(row["ms"] > 0 for row in result["phases"][:2]) and result["full_update_ms"] > 0
    assert result["bound"] in ("learner-bound", "rollout-bound")
    traces = [f for _, _, files in os.walk(run_dir / "profile") for f in files if f.endswith(".xplane.pb")]
    assert traces, "no jax.profiler trace written"
    kernels = result["kernels"]
    assert "unavailable" not in kernels, kernels
    assert kernels["trace_dir"] == str(run_dir / "profile" / "update")
    perfetto = [f for _, _, files in os.walk(run_dir / "profile" / "update") for f in files if f.startswith("perfetto")]
    assert perfetto, "no trace of the update's calls written"
    # an update of this program runs hundreds of kernels, among them its matrix products
    assert kernels["calls"] == 3 and kernels["kernels_per_call"] > 100
    assert 1 <= kernels["threads"] and 1.0 - 1e-9 <= kernels["concurrency"] <= kernels["threads"] + 1e-9
    assert 0.0 < kernels["covered_share"] <= 1.0 and 0.0 < kernels["wall_ms_per_call"]
    assert {k["kind"] for k in kernels["kinds"]} <= set(profile.KERNEL_KINDS)
    assert "matrix products" in {k["kind"] for k in kernels["kinds"]}
    assert abs(sum(k["share"] for k in kernels["kinds"]) - 1.0) < 1e-9
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["profile"]["members"] == 2
    err = capsys.readouterr().err
    assert "learner" in err and "per update" in err and "matrix products" in err


def _x(pid, tid, name, ts, dur):
    return {"ph": "X", "pid": pid, "tid": tid, "name": name, "ts": ts, "dur": dur}


def _thread(pid, tid, name):
    return {"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}


def test_summarize_trace_by_hand():
    """Two XLA threads over two annotated calls; bookkeeping, loop thunks and
    Python's events are not kernels. Worked out by hand: kernels [0, 10] and
    [5, 15] overlap by 5, so 35 µs of kernel time cover 30 µs of the 50 µs wall."""
    events = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
        _thread(1, 10, "tf_XLAEigen/1"),
        _thread(1, 11, "tf_XLAEigen/2"),
        _thread(1, 12, "python"),
        _x(1, 12, "jaxrl.profile.update", 0, 30),
        _x(1, 12, "jaxrl.profile.update", 30, 20),
        _x(1, 12, "$python_function", 0, 50),
        _x(1, 10, "ThunkExecutor::Execute", 0, 30),
        _x(1, 10, "ThreadpoolListener::Record", 0, 1),
        _x(1, 10, "[0] CommonPjRtLoadedExecutable::Execute (jit__lambda)", 0, 30),
        _x(1, 11, "while.4", 0, 30),
        _x(1, 10, "dot.1", 0, 10),
        _x(1, 11, "multiply_add_fusion.2", 5, 10),
        _x(1, 11, "end: multiply_add_fusion.2", 15, 0),
        _x(1, 10, "copy_bitcast_fusion.3", 20, 5),
        _x(1, 10, "wrapped_reduce-window.5", 30, 10),
    ]
    out = profile.summarize_trace(events, calls=2)
    assert out["kernels_per_call"] == 2 and out["mean_kernel_us"] == 35 / 4 and out["threads"] == 2
    assert out["wall_ms_per_call"] == 50 / 2 / 1e3 and out["kernel_ms_per_call"] == 35 / 2 / 1e3
    assert out["covered_share"] == 30 / 50 and out["concurrency"] == 35 / 30
    shares = {k["kind"]: k["share"] for k in out["kinds"]}
    assert shares == {
        "matrix products": 10 / 35,
        "fused elementwise loops": 10 / 35,
        "reductions": 10 / 35,
        "transposes and copies": 5 / 35,
    }
    assert out["top"][0]["us_per_call"] == 5.0 and out["top"][-1]["kernel"] == "copy_bitcast_fusion.3"
    # without annotations the wall time is the kernels' covered time; a device's streams count as kernel threads
    gpu = [
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        _thread(2, 1, "stream 7"),
        _x(2, 1, "loop_add_fusion", 0, 4),
        _x(2, 1, "sm90_xmma_gemm_f32", 4, 6),
    ]
    out = profile.summarize_trace(gpu, calls=1)
    assert out["covered_share"] == 1.0 and out["concurrency"] == 1.0 and out["wall_ms_per_call"] == 10 / 1e3
    assert [k["kind"] for k in out["kinds"]] == ["matrix products", "fused elementwise loops"]
    text = profile.format_kernels({**out, "cores": 2, "trace_dir": "t"})
    assert "one kernel at a time" in text and "matrix products 60%" in text
    assert "one kernel at a time" not in profile.format_kernels(
        {**out, "cores": 2, "trace_dir": "t", "concurrency": 1.8}
    )


@pytest.mark.parametrize(
    "name, kind",
    [
        ("dot.325", "matrix products"),
        ("bitcast_dot_fusion.9", "matrix products"),
        ("ynn_fusion.3", "matrix products"),
        ("copy.308", "transposes and copies"),
        ("transpose.3", "transposes and copies"),
        ("wrapped_reduce.2", "reductions"),
        ("maximum_bitcast_fusion.5", "fused elementwise loops"),
        ("wrapped_tanh", "fused elementwise loops"),
        ("concatenate.1", "other kernels"),
    ],
)
def test_kernel_kind(name, kind):
    assert profile.kernel_kind(name) == kind


def test_kernel_summary_when_a_trace_is_already_running(tmp_path):
    """A profiler the user already runs: the summary says so instead of failing the run."""
    fn = jax.jit(lambda x: x @ x)
    x = jnp.ones((256, 256))  # a product XLA:CPU runs as a dot (a tiny one can become a fused loop)
    jax.profiler.start_trace(str(tmp_path / "theirs"))
    try:
        out = profile.kernel_summary(fn, (x,), str(tmp_path / "ours"))
    finally:
        jax.profiler.stop_trace()
    assert set(out) == {"unavailable", "trace_dir"} and out["unavailable"]
    assert "no trace summary" in profile.format_kernels(out)
    out = profile.kernel_summary(fn, (x,), str(tmp_path / "ours"))
    assert out["kernels_per_call"] >= 1 and out["kinds"][0]["kind"] == "matrix products"


def test_profiling_does_not_change_the_numbers(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert train.main([*SMALL, f"run_dir={a}", "progress=false", "checkpoint=false"]) == 0
    assert train.main([*SMALL, f"run_dir={b}", "profile=true", "progress=false", "checkpoint=false"]) == 0
    ra = json.loads((a / "summary.json").read_text())["final_eval_return"]
    rb = json.loads((b / "summary.json").read_text())["final_eval_return"]
    assert ra == rb


def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("JAXRL_COMPILE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert platform.cache_dir("auto") == os.path.join(str(tmp_path), "jaxrl", "xla", platform.host_key())
    # one cache per kind of CPU: XLA:CPU programs are compiled for the host's instruction set
    a, b = platform.host_key("flags\t: fpu sse2 avx2\n"), platform.host_key("flags\t: fpu sse2\n")
    assert a != b and a.startswith(os.uname().machine) and a == platform.host_key("model\nflags : fpu sse2 avx2")
    assert platform.cache_dir("off") is None
    assert platform.cache_dir(str(tmp_path / "x")) == str(tmp_path / "x")
    # $JAXRL_COMPILE_CACHE is read once, where a command starts (the process settings), and passed down
    assert platform.cache_dir("auto", "off") is None
    assert platform.cache_dir("auto", str(tmp_path / "y")) == str(tmp_path / "y")
    monkeypatch.setenv("JAXRL_COMPILE_CACHE", str(tmp_path / "y"))
    assert platform.process_settings().compile_cache == str(tmp_path / "y")
    assert platform.cache_dir("auto") == os.path.join(str(tmp_path), "jaxrl", "xla", platform.host_key())


def test_second_launch_loads_the_cached_programs_and_xla_stays_quiet(tmp_path):
    """The same command twice, as a user runs it (``python -m jaxrl.train``, the
    default live line): the first stores its programs (no program calls back
    into Python, so every one is storable), the second loads every one of them
    and gives the same numbers, and neither prints a line of XLA's C++ log
    (loading a cached CPU program otherwise warns about machine features)."""
    from tests.helpers import user_env

    cache = tmp_path / "cache"
    env = {**user_env(), "JAXRL_COMPILE_CACHE": str(cache)}
    stored = []
    for name in ("first", "second"):
        proc = subprocess.run(
            [sys.executable, "-m", "jaxrl.train", *SMALL, f"run_dir={tmp_path / name}", "checkpoint=false"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "return mean" in proc.stderr  # the live line
        xla = [line for line in proc.stderr.splitlines() if line[:1] in "WEIF" and ".cc:" in line]
        assert not xla, xla  # e.g. "E… cpu_aot_loader.cc:…] … could lead to execution errors such as SIGILL"
        stored.append(sorted(f for f in os.listdir(cache) if f.endswith("-cache")))
    for program in ("jit_init", "jit_advance", "jit_close"):
        assert any(f.startswith(program) for f in stored[0]), (program, stored[0])
    assert stored[1] == stored[0]  # the second launch found every program under the same key: nothing new
    first = json.loads((tmp_path / "first" / "summary.json").read_text())["final_eval_return"]
    second = json.loads((tmp_path / "second" / "summary.json").read_text())["final_eval_return"]
    np.testing.assert_array_equal(first, second)
