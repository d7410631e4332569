"""Run directories travel between device layouts.

A run trained on D simulated XLA:CPU devices (1, 2) is read on R devices
(1, 2) by ``evaluate``, ``export``, ``load_policy`` and ``resume=``: every
pair works; the same layout gives the same numbers bit for bit, another
layout says so in one line. With ≥ 8 members per device, jax 0.9's XLA:CPU
gives the same bits on every layout (tests/helpers.py:
BITWISE_ACROSS_MEMBER_COUNTS), jax 0.11's agrees to float32 rounding.
Simulated devices need ``XLA_FLAGS`` before jax starts, so each layout is one
subprocess: two train, two read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers import BITWISE_ACROSS_MEMBER_COUNTS, CARTPOLE_TINY

LAYOUTS = (1, 2)
# 16 seeds: at least 8 members per device, where XLA:CPU's reductions stop depending on the count
ARGS = ["env=cartpole", *CARTPOLE_TINY, "seeds=16", "plots=false", "progress=false"]
TIMING = {"chunk_time_s", "env_steps_per_s"}
# The module's first test pays for the shared matrix (four subprocesses, each
# bounded by its own timeout below).
pytestmark = pytest.mark.timeout(1200)

TRAIN = r"""
import json, sys
from jaxrl import train
from jaxrl.run import training
from jaxrl.run.overrides import resolve
args, full, parted = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
assert train.main([*args, f"run_dir={full}"]) == 0
assert training.run(resolve([*args, f"run_dir={parted}"]), stop_after_chunks=1) == 0
"""

READ = r"""
import contextlib, io, json, shutil, sys
import jax, numpy as np
import jaxrl
from jaxrl import evaluate, export, train

root, here, written = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
assert jax.device_count() == here
obs = np.asarray(jax.random.uniform(jax.random.key(3), (16, 4), minval=-0.2, maxval=0.2))
out = {}
for d in written:
    full, err = f"{root}/full-{d}", io.StringIO()
    with contextlib.redirect_stderr(err):
        code = evaluate.main([full])
    means = [s["mean"] for s in json.load(open(f"{full}/evaluation.json"))["seeds"]]
    row = {"evaluate": code, "evaluate_err": err.getvalue(), "means": means}
    if here == max(written):  # export and load_policy restore one member onto one device, whatever is here
        target = f"{root}/export-{d}-on-{here}"
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            row["export"] = export.main([full, "seed=1", f"out={target}"])
        exported = jax.export.deserialize(open(f"{target}/policy.jaxexport", "rb").read())
        params = np.load(f"{target}/params.npz")
        leaves = [params[n] for n in json.load(open(f"{target}/policy.json"))["params"]]
        act = jaxrl.load_policy(full, seed=1)
        row["policy"] = np.asarray(act(obs, jax.random.key(0))).tolist()
        row["exported"] = np.asarray(exported.call(leaves, obs, np.zeros(2, np.uint32))).tolist()
    resumed, err = f"{root}/resumed-{d}-on-{here}", io.StringIO()
    shutil.copytree(f"{root}/parted-{d}", resumed)
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        row["resume"] = train.main([f"resume={resumed}"])
    row["resume_err"] = err.getvalue()
    out[d] = row
print(json.dumps(out))
"""


def _env(devices: int) -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.getcwd())
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def _python(code: str, *args: str, devices: int) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=_env(devices), timeout=400
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _records(run_dir) -> list[dict]:
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    for d in LAYOUTS:
        _python(TRAIN, json.dumps(ARGS), str(root / f"full-{d}"), str(root / f"parted-{d}"), devices=d)
    read = {}
    for r in LAYOUTS:
        proc = _python(READ, str(root), str(r), json.dumps(LAYOUTS), devices=r)
        read[r] = {int(d): row for d, row in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
    return root, read


@pytest.mark.parametrize("written", LAYOUTS)
@pytest.mark.parametrize("read_on", LAYOUTS)
def test_a_run_written_on_one_layout_is_read_on_another(matrix, written, read_on):
    root, read = matrix
    row = read[read_on][written]
    summary = json.loads((root / f"full-{written}" / "summary.json").read_text())
    assert summary["devices"] == written
    assert row["evaluate"] == 0 and row["resume"] == 0, row
    if read_on == max(LAYOUTS):  # the exported artifact acts as load_policy does, whatever layout wrote the run
        assert row["export"] == 0 and row["exported"] == row["policy"]
    full, resumed = _records(root / f"full-{written}"), _records(root / f"resumed-{written}-on-{read_on}")
    if written == read_on:  # the same layout: the same numbers, bit for bit
        assert row["means"] == summary["final_eval_return"]
        assert "note:" not in row["evaluate_err"] and "note:" not in row["resume_err"]
        assert resumed == full
    else:  # another layout: one line says the last bits may differ
        for err in (row["evaluate_err"], row["resume_err"]):
            notes = [line for line in err.splitlines() if line.startswith("note:")]
            assert len(notes) == 1 and f"{written} cpu device" in notes[0], err
            assert f"on {read_on} cpu device" in notes[0], notes
        # the resumed run continues from the checkpoint: the first chunk is the written one
        assert [r for r in resumed if r["chunk"] == 0] == [r for r in full if r["chunk"] == 0]
        assert len(resumed) == len(full)
        if BITWISE_ACROSS_MEMBER_COUNTS:
            assert row["means"] == summary["final_eval_return"]
            assert resumed == full
        else:
            np.testing.assert_allclose(row["means"], summary["final_eval_return"], rtol=1e-3)


@pytest.mark.parametrize("written", LAYOUTS[1:])
def test_a_sharded_run_equals_one_device(matrix, written):
    """16 seeds over 2 devices == 16 seeds on one device: bitwise (every
    metric of every update and the final evaluations) where XLA allows it,
    else to float32 rounding at the first update (later the members drift
    apart: RL is chaotic)."""
    root, _ = matrix
    one, many = _records(root / "full-1"), _records(root / f"full-{written}")
    if BITWISE_ACROSS_MEMBER_COUNTS:
        assert one == many
        return
    steps = ("type", "update", "env_steps")
    assert [[r.get(k) for k in steps] for r in one] == [[r.get(k) for k in steps] for r in many]
    assert [r.keys() for r in one] == [r.keys() for r in many]
    for key, value in one[0].items():
        if isinstance(value, (int, float, list)) and not isinstance(value, bool):
            np.testing.assert_allclose(np.asarray(value, float), np.asarray(many[0][key], float), rtol=1e-4, atol=1e-5)
        else:
            assert value == many[0][key], key
