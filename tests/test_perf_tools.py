"""profile=true, the persistent compilation cache and progress=chunk."""

import json
import os
import subprocess
import sys

import numpy as np

from jaxrl import _platform, train
from tests.configs import CARTPOLE_TINY

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
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["profile"]["members"] == 2
    assert "learner" in capsys.readouterr().err


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
    assert _platform.cache_dir("auto") == os.path.join(str(tmp_path), "jaxrl", "xla")
    assert _platform.cache_dir("off") is None
    assert _platform.cache_dir(str(tmp_path / "x")) == str(tmp_path / "x")
    monkeypatch.setenv("JAXRL_COMPILE_CACHE", "off")
    assert _platform.cache_dir("auto") is None
    monkeypatch.setenv("JAXRL_COMPILE_CACHE", str(tmp_path / "y"))
    assert _platform.cache_dir("auto") == str(tmp_path / "y")


def test_second_launch_loads_the_cached_programs(tmp_path):
    """Two processes, one cache: the first stores its programs (progress=chunk
    has no host callback, so the chunk program is storable too); the second
    finds every one of them and gives the same numbers."""
    cache = tmp_path / "cache"
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.getcwd())
    outs = []
    for name in ("first", "second"):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "import logging, sys; logging.basicConfig(level=logging.DEBUG, stream=sys.stdout); "
                "from jaxrl import train; sys.exit(train.main(sys.argv[1:]))",
                *SMALL,
                f"run_dir={tmp_path / name}",
                f"compile_cache={cache}",
                "progress=chunk",
                "checkpoint=false",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "return mean" in proc.stderr  # the live line, fed once per chunk
        outs.append(proc)
    stored = [f for f in os.listdir(cache) if f.endswith("-cache")]
    assert any(f.startswith("jit_program") for f in stored), stored
    hits = outs[1].stdout.count("Persistent compilation cache hit")
    assert hits >= 2, outs[1].stdout[-3000:]  # init and the chunk program at least
    first = json.loads((tmp_path / "first" / "summary.json").read_text())["final_eval_return"]
    second = json.loads((tmp_path / "second" / "summary.json").read_text())["final_eval_return"]
    np.testing.assert_array_equal(first, second)
