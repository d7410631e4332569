"""What the tests share: the tiny CartPole sizes, records without their timing
fields, and running a documented command the way a user does (a subprocess in
the CLI's default device layout, :func:`user_env`) and checking what it printed
and wrote (:func:`check_train_run`)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import yaml

# XLA:CPU in jax 0.9 reduces each member's arrays in an order that does not
# depend on how many members one program holds (from 8 up), so a member gives
# the same bits in a sweep, on a shard or alone. XLA:CPU in jax 0.11 (what pip
# installs on Python >= 3.12) does for some of them, so there the same member
# agrees to float32 rounding at first and then drifts (RL is chaotic).
BITWISE_ACROSS_MEMBER_COUNTS = jax.__version_info__ < (0, 10)

# 2 chunks of 16 updates of 4 envs × 32 steps, 2 epochs × 2 minibatches, 2 eval episodes
CARTPOLE_TINY = (
    "num_envs=4",
    "total_timesteps=4096",
    "num_evals=2",
    "eval.episodes=2",
    "algo.num_steps=32",
    "algo.num_minibatches=2",
    "algo.update_epochs=2",
)


TIMING = {"chunk_time_s", "env_steps_per_s"}

# The learning tier (``make test-learning``: JAXRL_TESTS=learning): the documented
# commands of :data:`tests.test_readme.LEARNING_BUDGETS` run at budgets where their
# learning floors hold. ``make test`` runs those commands at smoke budgets instead
# (every command still runs as a user types it, in the CLI's default settings) and
# checks their floors only for the commands kept at learning budgets there.
LEARNING_TIER = os.environ.get("JAXRL_TESTS", "") == "learning"


def records(run_dir) -> list[dict]:
    """A run's metrics.jsonl without its timing fields."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f]


def data_parallel_matches_one_device(args: list[str], tmp_path) -> str:
    """Train ``args`` in a one-device process and with ``parallel=data`` over 2
    XLA:CPU devices; every per-update and evaluation metric must agree within
    1e-5 relative + 1e-6 absolute. Returns the two-device run's stderr."""
    runs = {}
    for name, devices, extra in (("one", 1, []), ("two", 2, ["parallel=data"])):
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}" if devices > 1 else ""
        proc = subprocess.run(
            [sys.executable, "-m", "jaxrl.train", *args, *extra, f"run_dir={tmp_path / name}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs[name] = records(tmp_path / name)
    assert json.loads((tmp_path / "two" / "summary.json").read_text())["devices"] == 2
    assert "envs split" in proc.stderr, proc.stderr
    assert len(runs["one"]) == len(runs["two"]) > 0
    for ra, rb in zip(runs["one"], runs["two"], strict=True):
        for key in ra:
            if key != "type":
                np.testing.assert_allclose(
                    np.asarray(rb[key], float), np.asarray(ra[key], float), rtol=1e-5, atol=1e-6, err_msg=key
                )
    return proc.stderr


def plain_and_drawn(env, params, steps: int, n: int):
    """``n`` copies of ``env`` stepped ``steps`` times under the same keys and
    random actions twice in one scan each: with ``step`` (``want``) and with
    ``draw_steps`` up front + ``step_drawn`` in the loop (``got``). Returns
    both final ``(state, EnvStep [steps, n])`` pairs."""
    state0, _ = jax.vmap(env.reset, (0, None))(jax.random.split(jax.random.key(1), n), params)
    keys = jax.random.split(jax.random.key(2), (steps, n))
    actions = jax.vmap(jax.vmap(env.random_action))(jax.random.split(jax.random.key(3), (steps, n)))
    impl = jax.random.key_impl(keys)

    def plain(state):
        def body(s, inputs):
            k, a = inputs  # raw key data through the scan (see StepKeys)
            return jax.vmap(env.step, (0, 0, 0, None))(jax.random.wrap_key_data(k, impl=impl), s, a, params)

        return jax.lax.scan(body, state, (jax.random.key_data(keys), actions))

    def drawn(state):
        def body(s, inputs):
            d, a = inputs
            return jax.vmap(env.step_drawn, (0, 0, 0, None))(d, s, a, params)

        return jax.lax.scan(body, state, (env.draw_steps(keys, params), actions))

    return jax.jit(plain)(state0), jax.jit(drawn)(state0)


# --- the CLI as a user runs it ---------------------------------------------

REPO = Path(__file__).resolve().parents[1]


PINS = ("JAXRL_CPU_DEVICES", "JAXRL_CPU_THREADS", "PJRT_NPROC", "NPROC", "XLA_FLAGS")


SUMMARY_FIELDS = {  # DESIGN.md's contract for summary.json
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


RUN_DIR_LINE = re.compile(r"^run directory: (.+)$", re.M)


def user_env() -> dict[str, str]:
    """The test session's environment without the layout pins tests/conftest.py sets
    (nor the C++ log level that importing jax here set: a user's shell has none)."""
    env = {k: v for k, v in os.environ.items() if k not in (*PINS, "TF_CPP_MIN_LOG_LEVEL")}
    env.update(JAX_PLATFORMS="cpu", MPLBACKEND="Agg", WANDB_MODE="offline")
    return env


def shrink(command: str, changes: dict[str, str] | None) -> list[str]:
    """``command`` as argv, with its budget keys replaced (or appended)."""
    argv = shlex.split(command)
    for key, value in (changes or {}).items():
        spot = [i for i, a in enumerate(argv) if a.partition("=")[0] == key]
        if spot:
            argv[spot[0]] = f"{key}={value}"
        else:
            argv.append(f"{key}={value}")
    return [sys.executable if argv[0] == "python" else argv[0], *argv[1:]]


def run(command: str, cwd: Path, changes: dict[str, str] | None = None, **subs: str) -> subprocess.CompletedProcess:
    for name, value in subs.items():
        command = command.replace(name, value)
    proc = subprocess.run(
        shrink(command, changes), cwd=cwd, env=user_env(), capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-3000:]}"
    return proc


def run_dir_of(proc: subprocess.CompletedProcess) -> Path:
    found = RUN_DIR_LINE.findall(proc.stderr)
    assert found, proc.stderr[-2000:]
    return Path(found[-1])


def default_devices(members: int) -> int:
    """The layout the CLI picks by default: one device per usable core (≤ 8),
    as many as divide the members."""
    cores = min(8, len(os.sched_getaffinity(0)))
    return max(d for d in range(1, cores + 1) if members % d == 0)


def check_train_run(proc: subprocess.CompletedProcess, members: int, solved: str | None = None) -> tuple[Path, dict]:
    """What the docs (quickstart.md) say a training run prints and writes."""
    run_dir = run_dir_of(proc)
    for name in ("config.yaml", "metrics.jsonl", "summary.json", "curves.png"):
        assert (run_dir / name).is_file(), name
    assert any(p.name.isdigit() for p in (run_dir / "checkpoints").iterdir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert SUMMARY_FIELDS <= set(summary), SUMMARY_FIELDS - set(summary)
    assert len(summary["final_eval_return"]) == members == len(summary["seeds"])
    lo, hi = summary["ci95"]
    assert lo <= summary["iqm"] <= hi
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["run_dir"] == str(run_dir)
    devices = default_devices(members)
    assert summary["devices"] == devices
    assert (f"({devices} devices, members sharded)" if devices > 1 else "(1 device") in proc.stderr
    assert "IQM" in proc.stdout and "95% CI" in proc.stdout
    assert "spmd_partitioner" not in proc.stderr, proc.stderr[-2000:]  # XLA's warnings stay off the terminal
    if solved is not None:
        assert f"solved          {solved}" in proc.stdout, proc.stdout
    return run_dir, summary


EXPORTED = r"""
import json, sys
sys.modules["jaxrl"] = None  # jax, numpy and flatbuffers alone
import jax, numpy as np
here = sys.argv[1]
exported = jax.export.deserialize(open(f"{here}/policy.jaxexport", "rb").read())
params = np.load(f"{here}/params.npz")
leaves = [params[n] for n in json.load(open(f"{here}/policy.json"))["params"]]
obs = np.asarray(json.loads(sys.argv[2]), np.float32)
print(json.dumps(np.asarray(exported.call(leaves, obs, np.zeros(2, np.uint32))).tolist()))
"""


EXPORTED_RECURRENT = r"""
import json, sys
sys.modules["jaxrl"] = None  # jax, numpy and flatbuffers alone
import jax, numpy as np
here = sys.argv[1]
exported = jax.export.deserialize(open(f"{here}/policy.jaxexport", "rb").read())
spec = json.load(open(f"{here}/policy.json"))
params = np.load(f"{here}/params.npz")
leaves = [params[n] for n in json.load(open(f"{here}/policy.json"))["params"]]
obs, done = np.asarray(json.loads(sys.argv[2]), np.float32), np.asarray(json.loads(sys.argv[3]))
carry, actions = np.zeros((obs.shape[1], spec["carry_size"]), np.float32), []
for t in range(len(obs)):
    carry, action = exported.call(leaves, carry, obs[t], np.zeros(2, np.uint32))
    actions.append(np.asarray(action).tolist())
    carry = np.where(done[t][:, None], 0.0, np.asarray(carry))
print(json.dumps(actions))
"""


def python_with_only(root: Path, *distributions: str) -> tuple[list[str], dict[str, str]]:
    """``(argv prefix, env)`` of a Python that sees only ``distributions`` and
    the distributions they require (their installed files linked into one
    directory; no site-packages, no jaxrl): what ``pip install`` of those alone
    would give."""
    import importlib.metadata as metadata

    def requires(name: str) -> list[str]:
        out = []
        for req in metadata.distribution(name).requires or []:
            if "extra ==" not in req:
                out.append(re.match(r"[A-Za-z0-9_.\-]+", req).group(0))
        return out

    todo, seen = list(distributions), set()
    while todo:
        name = todo.pop()
        if name.lower() not in seen:
            seen.add(name.lower())
            todo += requires(name)
    site = root / "site"
    site.mkdir(parents=True, exist_ok=True)
    for name in seen:
        dist = metadata.distribution(name)
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            source = Path(dist.locate_file(top))
            if top not in ("..", "__pycache__") and source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    env = {**user_env(), "PYTHONPATH": str(site)}
    return [sys.executable, "-S", "-P"], env  # no site-packages, nor the working directory on the path


def assert_mujoco_preset(config: dict) -> None:
    """A run's config.yaml holds the MuJoCo preset (CleanRL's continuous PPO: 8 envs ×
    256 steps, 10 epochs × 32 minibatches, normalized observations and rewards, clipped actions)."""
    algo = config["algo"]
    assert config["num_envs"] == 8
    assert (algo["num_steps"], algo["update_epochs"], algo["num_minibatches"]) == (256, 10, 32)
    assert algo["normalize_obs"] and algo["normalize_reward"] and algo["squash"] == "clip"
