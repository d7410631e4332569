"""Runs that survive faults, bad numbers and bad input, and lose nothing."""

import errno
import json
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import algos, train
from jaxrl.rl import normalize
from jaxrl.run import training
from jaxrl.run.overrides import resolve
from jaxrl.run.records import update_records
from tests.toy_envs import HalfPoisoned, PoisonedReward

ENV = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=os.getcwd())
TIMING = {"chunk_time_s", "env_steps_per_s"}
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
    "plots=false",
]


def records(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in f]


def summary(run_dir):
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def cli(*args, timeout=300):
    return subprocess.run(
        [sys.executable, "-m", "jaxrl.train", *args], capture_output=True, text=True, env=ENV, timeout=timeout
    )


# --- interrupts -----------------------------------------------------------


def test_sigint_mid_run_then_resume_equals_uninterrupted(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    long = [*SMALL, "total_timesteps=300000", "num_evals=30", "progress=false", "logger=tensorboard"]
    stopped, full = tmp_path / "stopped", tmp_path / "full"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxrl.train", *long, f"run_dir={stopped}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    metrics = stopped / "metrics.jsonl"
    deadline = time.time() + 200
    while time.time() < deadline and not (metrics.exists() and '"eval"' in metrics.read_text()):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=200)
    assert proc.returncode == 130, err[-3000:]
    assert f"resume={stopped}" in err and "Traceback" not in err
    assert not (stopped / "summary.json").exists()
    done = sum(r["type"] == "eval" for r in records(stopped))
    assert 1 <= done < 30
    assert train.main([f"resume={stopped}"]) == 0
    assert train.main([*long, f"run_dir={full}"]) == 0
    assert summary(stopped)["final_eval_return"] == summary(full)["final_eval_return"]
    assert records(stopped) == records(full)

    def curve(run_dir, tag="eval/return_iqm"):  # what TensorBoard shows: the resumed run's points replace none
        events = EventAccumulator(str(run_dir / "tensorboard"))
        events.Reload()
        return [(e.step, e.value) for e in events.Scalars(tag)]

    assert len(curve(full)) == 30 and curve(stopped) == curve(full)


def test_signal_before_first_chunk_leaves_nothing(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jaxrl.train", *SMALL, f"run_dir={run_dir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    deadline = time.time() + 120
    while time.time() < deadline and not (run_dir / "config.yaml").exists():
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)  # arrives while compiling
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-2000:]
    assert "nothing was saved" in err and "Traceback" not in err
    assert not run_dir.exists()


# --- crashes during a checkpoint write ------------------------------------

SAVER = r"""
import sys, numpy as np, jax.numpy as jnp
from jaxrl.run.checkpoint import Checkpointer
ck = Checkpointer(sys.argv[1], keep=3)
for step in range(1, 1000):
    state = {"a": jnp.full((4_000_000,), float(step)), "b": jnp.full((3, 1000), step, jnp.int32)}
    ck.save(step, state, {"chunk": step})
    print(step, flush=True)
"""


def test_sigkill_during_save_keeps_previous_checkpoint(tmp_path):
    from jaxrl.run.checkpoint import Checkpointer

    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", SAVER, str(run_dir)], stdout=subprocess.PIPE, text=True, env=ENV)
    rng = np.random.default_rng(0)
    for _ in range(2):  # wait for two completed saves
        assert proc.stdout.readline().strip()
    time.sleep(float(rng.uniform(0.0, 0.2)))  # somewhere inside a later save
    proc.kill()
    proc.wait(timeout=30)
    ck = Checkpointer(str(run_dir), keep=3)
    step = ck.latest()
    assert step is not None and step >= 2
    abstract = {"a": jax.ShapeDtypeStruct((4_000_000,), jnp.float32), "b": jax.ShapeDtypeStruct((3, 1000), jnp.int32)}
    state, meta = _restore_plain(ck, abstract, step)
    assert meta["chunk"] == step
    assert float(state["a"][0]) == step and float(state["a"][-1]) == step and int(state["b"][2, 999]) == step


def _restore_plain(ck, abstract, step):
    import orbax.checkpoint as ocp

    out = ck.manager.restore(
        step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore())
    )
    return out["state"], out["meta"]


def test_full_disk_gives_clear_error_and_keeps_last_checkpoint(tmp_path, monkeypatch, capsys):
    from jaxrl.run import checkpoint

    original = checkpoint.Checkpointer.save

    def save(self, chunk, state, meta):
        if chunk >= 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, chunk, state, meta)

    monkeypatch.setattr(checkpoint.Checkpointer, "save", save)
    run_dir = tmp_path / "run"
    assert train.main([*SMALL, f"run_dir={run_dir}", "progress=false"]) == 1
    err = capsys.readouterr().err
    assert "no space left on device" in err and "after chunk 1" in err and f"resume={run_dir}" in err
    monkeypatch.setattr(checkpoint.Checkpointer, "save", original)
    assert checkpoint.Checkpointer(str(run_dir)).latest() == 1
    assert train.main([f"resume={run_dir}"]) == 0  # and the run can go on


# --- non-finite numbers ---------------------------------------------------


def _register(name, factory):
    import gymnax

    if name not in gymnax.registered_envs:
        gymnax.register(name, factory)
    return name


@pytest.fixture
def poisoned_env():
    return _register("PoisonedReward-test", lambda **kw: PoisonedReward())


def test_nan_reward_stops_run_naming_seed_and_update(tmp_path, poisoned_env, capsys):
    # one env per seed, 16 steps per update: the NaN at env step 50 is in update 4 (steps 49–64)
    run_dir = tmp_path / "run"
    args = [
        f"env={poisoned_env}",
        "seeds=2",
        "num_envs=1",
        "algo.num_steps=16",
        "algo.num_minibatches=1",
        "total_timesteps=160",
        "num_evals=5",
        "eval.episodes=1",
        "eval.max_steps=5",
        f"run_dir={run_dir}",
        "plots=false",
        "progress=false",
    ]
    assert train.main(args) == 1
    err = capsys.readouterr().err
    assert "seed 0: non-finite" in err and "update 4 " in err and "env steps 49–64" in err
    assert "after chunk 1" in err  # updates 1-2 are chunk 1; chunk 2 (updates 3-4) is not saved
    from jaxrl.run.checkpoint import Checkpointer

    assert Checkpointer(str(run_dir)).latest() == 1
    assert not (run_dir / "summary.json").exists()


def test_on_nan_drop_marks_seed_failed_others_go_on(tmp_path, capsys):
    env = _register("HalfPoisoned-test", lambda **kw: HalfPoisoned())
    run_dir = tmp_path / "run"
    args = [
        f"env={env}",
        "seeds=8",
        "num_envs=1",
        "algo.num_steps=16",
        "algo.num_minibatches=1",
        "total_timesteps=160",
        "num_evals=5",
        "eval.episodes=1",
        "eval.max_steps=5",
        f"run_dir={run_dir}",
        "plots=false",
        "progress=false",
        "on_nan=drop",
    ]
    assert train.main(args) == 0
    out = capsys.readouterr()
    s = summary(run_dir)
    failed = [f["seed"] for f in s["failed_seeds"]]
    assert 0 < len(failed) < 8, s["failed_seeds"]  # seeds whose first episode was poisoned
    assert all(f["update"] == 4 and f["env_steps"] == 64 for f in s["failed_seeds"])
    for seed, value in zip(s["seeds"], s["final_eval_return"], strict=True):
        assert (value is None) == (seed in failed)
    assert s["mean"] == pytest.approx(5.0)  # survivors: 5 eval steps of reward 1
    assert "warning: seed" in out.err and "failed" in out.out
    text = (run_dir / "summary.json").read_text()
    assert "NaN" not in text and "Infinity" not in text


def test_failing_neighbour_does_not_touch_a_healthy_seed():
    """A member whose hyperparameters blow up (lr = inf) freezes at its last
    finite state; its neighbour gives bitwise the numbers it gives beside a
    healthy member."""
    from jaxrl import parse, validate
    from jaxrl.run.checkpoint import keys_to_data
    from jaxrl.trainer.loop import make_train

    config = validate(parse([*SMALL, "seeds=1"]))
    trainer = make_train(config)
    hp = trainer.hparams
    pair = jax.tree.map(lambda x: jnp.stack([x, x]), hp)
    keys = jnp.stack([jax.random.key(0), jax.random.key(1)])
    train = jax.jit(jax.vmap(trainer.train))
    healthy, _ = train(keys, pair)
    mixed, _ = train(keys, pair.replace(lr=jnp.array([hp.lr, jnp.inf])))
    assert int(healthy.failed_at[1]) == 0 and int(mixed.failed_at[0]) == 0 and int(mixed.failed_at[1]) == 1
    for x, y in zip(jax.tree.leaves(keys_to_data(healthy)), jax.tree.leaves(keys_to_data(mixed)), strict=True):
        np.testing.assert_array_equal(np.asarray(x)[0], np.asarray(y)[0])
    init = trainer.init(keys[1], hp)  # the failed member kept its last finite (initial) parameters
    for x, y in zip(jax.tree.leaves(init.agent.params), jax.tree.leaves(mixed.agent.params), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y)[1])


# --- counters -------------------------------------------------------------


def test_normalizer_count_past_2_pow_24_matches_float64():
    stats = normalize.RunningStats(
        mean=jnp.ones((2,)), var=jnp.ones((2,)), count=jnp.float32(2.0**24), count_err=jnp.float32(0.0)
    )
    update = jax.jit(normalize.update)
    rng = np.random.default_rng(0)
    mean64, m2_64, n64 = np.ones(2), np.ones(2) * 2.0**24, 2.0**24
    for _ in range(300):
        x = rng.normal(1.0, 1.0, size=(1, 2))
        stats = update(stats, jnp.asarray(x, jnp.float32))
        n_new = n64 + 1
        delta = x[0] - mean64
        mean64 = mean64 + delta / n_new
        m2_64 = m2_64 + delta * (x[0] - mean64)
        n64 = n_new
    assert float(stats.count) + float(stats.count_err) == n64  # exact: a float32 counter stalls at 2^24
    plain = np.float32(2.0**24)
    for _ in range(300):
        plain = plain + np.float32(1.0)
    assert plain == np.float32(2.0**24)  # the failure this design avoids
    np.testing.assert_allclose(np.asarray(stats.mean), mean64, atol=1e-5)
    np.testing.assert_allclose(np.asarray(stats.var), m2_64 / n64, rtol=1e-5)


def test_env_step_counts_beyond_2_pow_31_are_exact():
    """Env-step counts are computed on the host in Python integers."""
    from jaxrl.algos.ppo import UpdateMetrics

    u = 2**31 // 256 + 5  # updates × 256 steps > 2^31
    fields = {name: np.zeros((1, 2)) for name in UpdateMetrics._fields if name != "loop"}
    loop = algos.LoopMetrics(*(np.zeros((1, 2)) for _ in algos.LOOP_METRICS))
    recs = update_records(UpdateMetrics(loop=loop, **fields), chunk=0, first_update=u, steps_per_update=256)
    assert recs[-1].env_steps == (u + 2) * 256 > 2**31


# --- determinism ----------------------------------------------------------


# Two processes give the same bits: tests/test_layouts.py (a run resumed in another process equals the
# uninterrupted one, bit for bit, on the same layout).


SMALL_SAC = [
    "env=pendulum",
    "algo=sac",
    "seeds=2",
    "num_envs=2",
    "total_timesteps=400",
    "num_evals=1",
    "eval.episodes=1",
    "algo.learning_starts=64",
    "algo.batch_size=16",
    "algo.hidden_sizes=[8,8]",
]


@pytest.mark.parametrize("small", [SMALL, SMALL_SAC], ids=["ppo", "sac"])
def test_no_prng_key_reuse(small):
    from jaxrl import parse, validate
    from jaxrl.trainer.loop import make_batched, make_train, seed_keys

    config = validate(parse([*small, "algo.normalize_obs=true"]))
    trainer = make_train(config)
    init_b, chunk_b = make_batched(trainer)
    with jax.debug_key_reuse(True):
        states = jax.jit(init_b)(seed_keys(config), trainer.hparams)
        states, _ = jax.jit(chunk_b)(states, trainer.hparams)
        jax.jit(trainer.train)(jax.random.key(0), trainer.hparams)


# --- checkpoint compatibility ---------------------------------------------


def test_checkpoint_from_another_version_is_refused(tmp_path, capsys):
    run_dir = tmp_path / "run"
    config = resolve([*SMALL, f"run_dir={run_dir}", "progress=false"])
    assert training.run(config, stop_after_chunks=1) == 0
    meta = run_dir / "checkpoints" / "1" / "meta" / "metadata"
    if not meta.exists():  # orbax's JSON item file name
        meta = next(p for p in (run_dir / "checkpoints" / "1" / "meta").iterdir() if p.is_file())
    data = json.loads(meta.read_text())
    data["jaxrl_version"] = "0.0.1"
    meta.write_text(json.dumps(data))
    capsys.readouterr()
    assert train.main([f"resume={run_dir}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "written by jaxrl 0.0.1" in err[0]
