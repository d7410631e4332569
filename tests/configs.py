"""Shared test sizes: a CartPole PPO run that compiles and trains in seconds."""

import json
import os
import subprocess
import sys

import jax
import numpy as np

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
