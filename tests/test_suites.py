"""The optional env suites (Craftax, Jumanji, Navix, XLand-MiniGrid, MuJoCo
Playground) behind the one env contract.

Per suite: a scripted episode compared step by step with the suite's own step
function (observation, reward, which kind of end), a time-limit episode that
must end ``truncated`` (not terminated) exactly at the limit with the suite's
pre-reset observation as ``final_obs`` and a fresh start after it, a true
terminal state that must end ``terminated``; ``draw_steps`` + ``step_drawn``
equal to ``step``; then validation, names and a CLI run per suite.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrl import envs
from jaxrl.core.errors import ConfigError
from jaxrl.core.version import __version__
from jaxrl.envs import jumanji_env, navix_env, suite, xminigrid_env
from jaxrl.envs.core import Discrete
from jaxrl.envs.suite import NoParams, SuiteEnv, flatten_obs
from jaxrl.run.checkpoint import Checkpointer
from tests.helpers import plain_and_drawn, run, run_dir_of
from tests.test_readme import SUITE_BUDGETS, SUITE_RUNS

pytestmark = pytest.mark.timeout(600)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _needs(module: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"{module} is not installed (pip install 'jaxrl[...]')"
    )


# -- a toy suite: the SuiteEnv seam on its own ---------------------------------------------


class Countdown(SuiteEnv):
    """Episodes of ``3 + key % 4`` steps; the start observation is the key's draw
    (so which fresh start an env got can be read off its observation)."""

    def __init__(self, reset_share: int = 1):
        self.name = "Countdown"
        self.obs_shape = (1,)
        self.action_space = Discrete(2)
        self.default_params = NoParams()
        self.reset_share = reset_share

    def _start(self, key, params):
        draw = jax.random.uniform(key)
        return (jnp.floor(draw * 4).astype(jnp.int32) + 3, jnp.zeros((), jnp.int32)), draw[None]

    def _advance(self, key, raw, action, params):
        left, t = raw
        left = left - 1
        ended = left == 0
        terminated = ended & (action == 1)
        truncated = ended & ~terminated
        return (left, t + 1), (t + 1).astype(jnp.float32)[None], jnp.float32(1.0), terminated, truncated


def test_a_suite_env_resets_from_a_fresh_start_and_keeps_the_final_observation():
    env = Countdown()
    state, obs = env.reset(jax.random.key(0))
    left = int(state.inner[0])
    key = jax.random.key(5)
    for t in range(1, left + 1):
        key, k = jax.random.split(key)
        state, step = env.step(k, state, jnp.int32(1))
        assert float(step.final_obs[0]) == t  # the pre-reset observation
    assert bool(step.terminated) and not bool(step.truncated)
    fresh_state, fresh_obs = env._start(jax.random.split(k)[1], env.default_params)
    np.testing.assert_array_equal(np.asarray(step.obs), np.asarray(fresh_obs))  # the fresh start, with the step's key
    assert int(step.episode_length) == left and float(step.episode_return) == left


def test_reset_sharing_hands_each_group_one_fresh_start():
    """``reset_share=k``: envs ``i`` of a drawn step whose episodes end start from
    the start built for env ``k·⌊i/k⌋``; ``reset_share=1`` is exactly ``step``."""
    steps, n, share = 12, 8, 4
    keys = jax.random.split(jax.random.key(3), (steps, n))
    own = Countdown(1).draw_steps(keys)[1][1]  # each env's own fresh start obs [T, N, 1]
    shared = Countdown(share).draw_steps(keys)[1][1]
    own, shared = np.asarray(own)[..., 0], np.asarray(shared)[..., 0]
    for i in range(n):
        np.testing.assert_array_equal(shared[:, i], own[:, share * (i // share)])
    assert len(np.unique(shared[0])) == n // share  # one world per group, not per env


# -- each suite: scripted episodes against the suite's own step ---------------------------------


def _steps(env, actions, state=None, key=0, params=None):
    """Step ``env`` (unbatched, jitted) through ``actions``; returns the reset obs,
    the EnvSteps and the keys used."""
    params = env.default_params if params is None else params
    if state is None:
        state, obs0 = jax.jit(env.reset)(jax.random.key(key), params)
    step = jax.jit(env.step)
    out, keys = [], jax.random.split(jax.random.key(key + 1), len(actions))
    for k, a in zip(keys, actions, strict=True):
        state, s = step(k, state, jnp.asarray(a), params)
        out.append(s)
    return out, keys


def _first_end(out):
    return next(i for i, s in enumerate(out) if bool(s.done))


def _check_end(env, out, keys, *, terminated: bool, at: int | None = None, params=None):
    """The episode ends at step ``at`` the way asked, keeps the pre-reset
    observation and restarts from the fresh start of that step's key."""
    params = env.default_params if params is None else params
    end = _first_end(out)
    if at is not None:
        assert end == at, (end, at)
    s = out[end]
    assert bool(s.terminated) == terminated and bool(s.truncated) == (not terminated)
    assert int(s.episode_length) == end + 1
    _, fresh = jax.jit(env._start)(jax.random.split(keys[end])[1], params)
    np.testing.assert_allclose(np.asarray(s.obs), np.asarray(fresh))
    assert not np.array_equal(np.asarray(s.final_obs), np.asarray(s.obs)) or terminated
    return s


def _own_steps(reset, step, actions):
    """The suite's own functions, stepped in a plain loop: (obs, reward, end kind) per step."""
    state, obs = reset()
    rows = [("reset", np.asarray(obs))]
    for a in actions:
        state, obs, reward, kind = step(state, a)
        rows.append((kind, np.asarray(obs), float(reward)))
        if kind != "mid":
            break
    return rows


def _compare(out, own):
    """The adapter's steps agree with the suite's own up to its first end."""
    for s, row in zip(out, own[1:], strict=False):
        kind, obs, reward = row
        np.testing.assert_allclose(np.asarray(s.final_obs), obs.astype(np.float32), rtol=1e-5, atol=1e-5)
        assert float(s.reward) == pytest.approx(reward, rel=1e-5, abs=1e-6)
        assert (bool(s.terminated), bool(s.truncated)) == (kind == "terminated", kind == "truncated"), kind
        if kind != "mid":
            return
    raise AssertionError("the suite's episode did not end within the script")


@_needs("jumanji")
def test_jumanji_snake_against_its_own_step():
    import jumanji
    from jumanji.environments import Snake

    # Snake's own time limit ends an episode with discount 0, as a death would
    own_limit = Snake(num_rows=6, num_cols=6, time_limit=6)
    state, _ = own_limit.reset(jax.random.key(0))  # the head starts at (2, 4): a 2×2 square fits
    for a in [0, 1, 2, 3, 0, 1]:
        state, ts = own_limit.step(state, jnp.int32(a))
    assert int(ts.step_type) == 2 and float(ts.discount) == 0.0
    # the adapter counts that limit itself: truncated
    raw = own_limit
    env = jumanji_env.JumanjiEnv(raw, "jumanji:Snake-6")
    circle = [0, 1, 2, 3] * 3  # up, right, down, left: circling, the snake never dies

    def own_step(carry, a):
        state, t = carry
        state, ts = raw.step(state, jnp.int32(a))
        ended = int(ts.step_type) == 2
        kind = "truncated" if t + 1 >= 6 else ("terminated" if ended and float(ts.discount) == 0 else "mid")
        return (state, t + 1), flatten_obs(ts.observation), ts.reward, kind

    def own_reset():
        state, ts = raw.reset(jax.random.key(0))
        return (state, 0), flatten_obs(ts.observation)

    out, keys = _steps(env, circle)
    own = _own_steps(own_reset, own_step, circle)
    assert own[-1][0] == "truncated"
    _compare(out, own)
    _check_end(env, out, keys, terminated=False, at=5)
    # straight up into the wall: terminated, no bootstrap
    out, keys = _steps(env, [0] * 8)
    _compare(out, _own_steps(own_reset, own_step, [0] * 8))
    _check_end(env, out, keys, terminated=True)
    preset = envs.make("jumanji:Snake-v1")
    assert preset.time_limit == preset.max_episode_steps == 4000
    assert isinstance(jumanji.make("Snake-v1"), jumanji.Environment)


@_needs("jumanji")
def test_jumanji_multi_discrete_actions_decode_row_major():
    env = envs.make("jumanji:Tetris-v0")
    assert env.action_space == Discrete(4 * 10)
    np.testing.assert_array_equal(np.asarray(env._decode(jnp.int32(23))), [2, 3])  # rotation 2, column 3


@_needs("jumanji")
def test_jumanji_refuses_multi_agent_envs():
    with pytest.raises(ConfigError, match="multi-agent"):
        envs.make("jumanji:LevelBasedForaging-v0")


@_needs("navix")
def test_navix_against_its_own_step():
    import navix

    raw = navix.make("Navix-Empty-5x5-v0", max_steps=6)
    env = navix_env.NavixEnv(raw, "navix:Navix-Empty-5x5-v0")
    route = [2, 2, 1, 2, 2, 2]  # forward, forward, turn right, forward, forward: the goal at (3, 3)

    def own_reset():
        ts = raw.reset(jax.random.key(0))
        return ts, ts.observation

    def own_step(ts, a):
        ts = raw.step(ts, jnp.int32(a))  # navix's own step (resets lazily, on the next call)
        kind = {0: "mid", 1: "truncated", 2: "terminated"}[int(ts.step_type)]
        return ts, ts.observation, ts.reward, kind

    out, keys = _steps(env, route)
    _compare(out, _own_steps(own_reset, own_step, route))
    _check_end(env, out, keys, terminated=True, at=4)
    spin = [0] * 8  # turning left forever: the 6-step limit
    out, keys = _steps(env, spin)
    _compare(out, _own_steps(own_reset, own_step, spin))
    _check_end(env, out, keys, terminated=False, at=5)


@_needs("xminigrid")
def test_xminigrid_against_its_own_step():
    import xminigrid

    raw, params = xminigrid.make("MiniGrid-Empty-5x5")
    params = params.replace(max_steps=6)
    env = xminigrid_env.XMiniGridEnv(raw, params, "xminigrid:MiniGrid-Empty-5x5")

    own_reset_jit, own_step_jit = jax.jit(raw.reset), jax.jit(raw.step)  # compiled once, not op by op

    def own(params):
        """XLand-MiniGrid's own reset and step under ``params``."""

        def reset():
            ts = own_reset_jit(params, jax.random.key(0))
            return ts, ts.observation

        def step(ts, a):
            ts = own_step_jit(params, ts, jnp.int32(a))
            kind = "mid" if int(ts.step_type) != 2 else ("terminated" if float(ts.discount) == 0 else "truncated")
            return ts, ts.observation, ts.reward, kind

        return reset, step

    own_reset, own_step = own(params)
    # random play under a long limit: some episode reaches the goal (terminated)
    long = params.replace(max_steps=200)
    env_long = xminigrid_env.XMiniGridEnv(raw, long, "xminigrid:MiniGrid-Empty-5x5")
    walk = [int(a) for a in np.random.default_rng(0).choice([0, 0, 0, 1, 2], 200)]
    own_reset_long, own_step_long = own(long)
    out, keys = _steps(env_long, walk)
    own = _own_steps(own_reset_long, own_step_long, walk)
    assert own[-1][0] == "terminated"
    _compare(out, own)
    _check_end(env_long, out, keys, terminated=True, at=len(own) - 2)
    spin = [1] * 8  # turning left forever: the 6-step limit
    out, keys = _steps(env, spin)
    _compare(out, _own_steps(own_reset, own_step, spin))
    _check_end(env, out, keys, terminated=False, at=5)


@_needs("craftax")
def test_craftax_death_terminates_and_its_time_limit_truncates():
    env = envs.make("craftax:Craftax-Classic-Symbolic-v1")
    raw = env.env
    params = env.default_params.replace(max_timesteps=5)
    noop = [0] * 7

    def own_reset():
        obs, state = jax.jit(raw.reset_env)(jax.random.key(0), params)
        return state, obs

    keys_own = jax.random.split(jax.random.key(1), len(noop))
    own = jax.jit(raw.step_env)
    calls = iter(keys_own)

    def own_step(state, a):
        obs, state, reward, done, info = own(jax.random.split(next(calls))[0], state, jnp.int32(a), params)
        alive = float(state.player_health) > 0 and int(state.timestep) >= int(params.max_timesteps)
        kind = "mid" if not bool(done) else ("truncated" if alive else "terminated")
        return state, obs, reward, kind

    out, keys = _steps(env, noop, params=params)
    _compare(out, _own_steps(own_reset, own_step, noop))  # Craftax says done; at its time limit: truncated
    _check_end(env, out, keys, terminated=False, at=4, params=params)
    # a dying player (health 0 after the step) ends terminated, even at the time limit
    state, _ = jax.jit(env.reset)(jax.random.key(0), params)
    state = state.replace(inner=state.inner.replace(player_health=jnp.zeros_like(state.inner.player_health)))
    out, keys = _steps(env, [0], state=state, params=params)
    assert bool(out[0].terminated) and not bool(out[0].truncated)
    assert env.reset_share == 16  # drawn rollouts share worlds (see test_reset_sharing_…)


@_needs("mujoco_playground")
def test_playground_time_limit_and_termination():
    env = envs.make("playground:CartpoleBalance", episode_length=5)
    raw = env.env
    push = [np.ones(1, np.float32)] * 7
    own = jax.jit(raw.step)

    def own_reset():
        state = jax.jit(raw.reset)(jax.random.key(0))
        return (state, 0), state.obs

    def own_step(carry, a):
        state, t = carry
        state = own(state, jnp.asarray(a))
        kind = "terminated" if float(state.done) > 0 else ("truncated" if t + 1 >= 5 else "mid")
        return (state, t + 1), state.obs, state.reward, kind

    out, keys = _steps(env, push)
    _compare(out, _own_steps(own_reset, own_step, push))
    _check_end(env, out, keys, terminated=False, at=4)
    assert env.truncation_period() == 5
    # a diverged simulation (NaN state) is a termination, not a truncation
    state, _ = jax.jit(env.reset)(jax.random.key(0))
    data = state.inner.state.data
    bad = state.inner.state.replace(data=data.replace(qpos=data.qpos.at[0].set(jnp.nan)))
    state = state.replace(inner=state.inner.replace(state=bad))
    out, _ = _steps(env, push[:1], state=state)
    assert bool(out[0].terminated) and not bool(out[0].truncated)


# -- draw_steps + step_drawn == step, for every suite ----------------------------------------------

DRAWN = [
    pytest.param(lambda: jumanji_env._make("jumanji:Snake-v1"), marks=_needs("jumanji"), id="jumanji"),
    pytest.param(lambda: _navix("Navix-DoorKey-5x5-v0", max_steps=9), marks=_needs("navix"), id="navix"),
    pytest.param(lambda: _xminigrid("MiniGrid-DoorKey-5x5", max_steps=9), marks=_needs("xminigrid"), id="xminigrid"),
]


def _navix(name, max_steps):
    import navix

    return navix_env.NavixEnv(navix.make(name, max_steps=max_steps), f"navix:{name}")


def _xminigrid(name, max_steps):
    import xminigrid

    raw, params = xminigrid.make(name)
    return xminigrid_env.XMiniGridEnv(raw, params.replace(max_steps=max_steps), f"xminigrid:{name}")


@pytest.mark.parametrize("make", DRAWN)
def test_draw_steps_then_step_drawn_equals_step(make):
    """A drawn rollout returns what ``step`` returns with the same keys, across
    episode boundaries (random play: ends and auto-resets occur). The path is
    :class:`SuiteEnv`'s for every suite; Craftax's and Playground's programs
    (1–2.5 min of compiling here) are left to the scripted tests above."""
    env = make()
    want, got = plain_and_drawn(env, env.default_params, 24, 4)
    for a, b in zip(jax.tree.leaves(want[1]), jax.tree.leaves(got[1]), strict=True):
        np.testing.assert_allclose(np.asarray(b, np.float64), np.asarray(a, np.float64), rtol=1e-4, atol=1e-5)
    assert np.asarray(want[1].done).any()  # the comparison crossed an episode boundary


# -- names, validation, bad input --------------------------------------------------------------------


def test_names_list_every_suite_and_suggest_near_ids():
    names = envs.names()
    for prefix in ("craftax:", "jumanji:", "navix:", "xminigrid:", "playground:"):
        assert any(n.startswith(prefix) for n in names), prefix
    assert envs.canonical_name("Navix-DoorKey-5x5-v0") == "navix:Navix-DoorKey-5x5-v0"
    assert envs.canonical_name("jumanji:snake-v1") == "jumanji:Snake-v1"
    assert envs.canonical_name("jumanji:Snake-v1") == "jumanji:Snake-v1"  # canonical ids resolve to themselves
    assert "navix:Navix-DoorKey-5x5-v0" in envs.suggest("navix:Navix-DorKey-5x5-v0")
    assert envs.action_kind("playground:CheetahRun") == "continuous"
    assert envs.action_kind("craftax:Craftax-Symbolic-v1") == "discrete"


def test_a_missing_suite_is_one_line_naming_its_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "craftax" else real(name, *a))
    with pytest.raises(ConfigError) as err:
        envs.make("craftax:Craftax-Classic-Symbolic-v1")
    assert "craftax is not installed" in str(err.value) and "[craftax]'" in str(err.value)


def test_a_suite_that_does_not_import_with_this_jax_names_the_conflict():
    def build():
        raise ImportError("cannot import name 'tree_map' from 'jax'")

    with pytest.raises(ConfigError) as err:
        suite.load("navix:X", "navix", "navix", "navix", "navix", build)
    text = str(err.value)
    assert "does not import with jax" in text and "[navix]'" in text and "tree_map" in text
    assert "\n" not in text


def _cli(*args: str, timeout: int = 420) -> subprocess.CompletedProcess:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    return subprocess.run(
        [sys.executable, "-m", "jaxrl.train", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=timeout
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["env=navix:Navix-DoorKey-5x5-v0", "algo=sac"], "needs continuous actions"),
        (["env=playground:CartpoleBalance", "algo=pqn"], "needs discrete actions"),
        (["env=navix:Navix-DorKey-5x5-v0"], "did you mean navix:Navix-DoorKey-5x5-v0"),
        (["env=jumanji:JobShop-v0"], "joint discrete actions"),
        (["env=jumanji:Snake-v1", "algo.network=cnn"], "needs image observations"),  # the env's observation rank
        (["env=cartpole", "algo.network=cnn"], "needs image observations"),
    ],
    ids=["sac-on-discrete", "pqn-on-continuous", "misspelt", "too-many-actions", "cnn-on-vectors", "cnn-on-gymnax"],
)
def test_bad_suite_input_exits_2_with_one_line(tmp_path, args, says):
    proc = _cli(*args, f"run_dir={tmp_path / 'run'}", timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert says in lines[0], lines[0]
    assert not (tmp_path / "run").exists()


# -- the docs' command per suite, at a tiny budget ----------------------------------------------


@pytest.mark.parametrize(
    "suite_name",
    [
        pytest.param(name, marks=_needs({"playground": "mujoco_playground"}.get(name, name)), id=name)
        for name in SUITE_RUNS
    ],
)
def test_each_suites_readme_command_trains(tmp_path, suite_name):
    """``python -m jaxrl.train env=SUITE:ID seeds=4`` as docs/envs.md shows it (the
    CLI's default layout), at a CI budget: a run directory with a summary, a
    checkpoint (for Playground, restored: its MJX state holds zero-size arrays)."""
    command = SUITE_RUNS[suite_name]
    proc = run(command, tmp_path, SUITE_BUDGETS[suite_name] | {"plots": "false"})
    run_dir = run_dir_of(proc)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == command.split("env=")[1].split()[0]
    assert len(summary["final_eval_return"]) == 4 and all(np.isfinite(summary["final_eval_return"]))
    assert any(p.name.isdigit() for p in (run_dir / "checkpoints").iterdir())
    if suite_name == "playground":  # MJX data has zero-size arrays: the run's checkpoint restores
        from jaxrl.run.policy import open_run

        restored = open_run(str(run_dir)).carry.states
        assert np.asarray(restored.update).tolist() == [summary["num_updates"]] * 4


def test_a_state_with_zero_size_leaves_checkpoints_and_restores(tmp_path):
    """MJX's data holds empty arrays (no actuator state): orbax cannot store
    them, so they are left out and rebuilt from the abstract state."""
    state = {"a": jnp.arange(3.0), "empty": jnp.zeros((0, 2), jnp.int32), "key": jax.random.key(1)}
    ckpt = Checkpointer(str(tmp_path))
    ckpt.save(1, state, {"jaxrl_version": __version__})
    abstract = jax.eval_shape(lambda: state)
    device = jax.devices()[0]
    shardings = jax.tree.map(lambda _: jax.sharding.SingleDeviceSharding(device), abstract)
    restored = ckpt.restore(abstract, shardings).state
    ckpt.close()
    np.testing.assert_array_equal(np.asarray(restored["a"]), [0.0, 1.0, 2.0])
    assert restored["empty"].shape == (0, 2) and restored["empty"].dtype == jnp.int32
    np.testing.assert_array_equal(jax.random.key_data(restored["key"]), jax.random.key_data(state["key"]))
