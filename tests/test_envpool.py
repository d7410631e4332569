"""envpool tasks behind the host step contract (``env=envpool:ID``).

The adapter is checked step by step against envpool's own pool on the same
seed and actions — an end by termination, an end by the time limit, and the
reset step envpool inserts after every end (never a transition) — and on
Atari's frames (channels last, in [0, 1]; the training pool's lost lives and
clipped rewards, the evaluation pool's whole games). The documented commands
run through the CLI at CI budgets."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from tests.helpers import assert_mujoco_preset, run, run_dir_of
from tests.test_readme import COMMANDS

envpool = pytest.importorskip("envpool")

from jaxrl.core.errors import ConfigError  # noqa: E402
from jaxrl.envs.host import EnvpoolVec, host_spec, preset_name  # noqa: E402
from jaxrl.run.overrides import resolve  # noqa: E402

ENVPOOL_CARTPOLE = "python -m jaxrl.train env=envpool:CartPole-v1 seeds=4"
ENVPOOL_PONG = "python -m jaxrl.train env=envpool:Pong-v5 seeds=1"


def _own_loop(task: str, n: int, seed: int, actions, **options):
    """envpool's own pool stepped with ``actions``: (obs, reward, terminated, truncated, elapsed_step) per call."""
    env = envpool.make(task, env_type="gymnasium", num_envs=n, seed=seed, **options)
    obs, _ = env.reset()
    rows = []
    for a in actions:
        o, r, te, tr, info = env.step(np.asarray(a))
        rows.append((o, r, te, tr, info["elapsed_step"]))
    env.close()
    return obs, rows


def _adapter(task: str, n: int, seed: int, actions, evaluation: bool = False):
    vec = EnvpoolVec(host_spec(f"envpool:{task}"), n, evaluation=evaluation)
    first = vec.reset(seed)
    steps = [vec.step(np.asarray(a)) for a in actions]
    vec.close()
    return first, steps


@pytest.mark.parametrize("how", ["terminated", "truncated"])
def test_cartpole_steps_equal_envpools_own_loop(how):
    """Pushing right topples the pole (terminated, ≈ 10 steps); a 5-step time
    limit truncates. The step after either end is envpool's reset step:
    ``valid=False``, no reward, no end; the ending step keeps its observation
    as the final one; every other field equals envpool's."""
    limit = 500 if how == "terminated" else 5
    actions = [np.ones(2, np.int32)] * 14
    spec = host_spec("envpool:CartPole-v1")
    assert spec.obs_shape == (4,) and spec.action_space.n == 2 and spec.max_episode_steps == 500
    own_first, own = _own_loop("CartPole-v1", 2, 3, actions, max_episode_steps=limit)
    vec = EnvpoolVec(spec, 2, max_episode_steps=limit)
    first = vec.reset(3)
    got = [vec.step(a) for a in actions]
    vec.close()
    np.testing.assert_array_equal(first, own_first)
    ended = []
    for t, (step, (o, r, te, tr, elapsed)) in enumerate(zip(got, own, strict=True)):
        np.testing.assert_allclose(step.obs, o.astype(np.float32))
        resetting = elapsed == 0  # envpool's reset step: the action was ignored
        np.testing.assert_array_equal(step.valid, ~resetting)
        np.testing.assert_array_equal(step.reward, np.where(resetting, 0.0, r))
        np.testing.assert_array_equal(step.terminated, te & ~resetting)
        np.testing.assert_array_equal(step.truncated, tr & ~te & ~resetting)
        np.testing.assert_array_equal(step.final_obs, step.obs)
        done = step.terminated | step.truncated
        if done.any():
            ended.append(t)
            other = step.truncated if how == "terminated" else step.terminated
            assert not other.any()  # each end is of the kind asked for
            assert not got[t + 1].valid[done].any() and np.all(got[t + 1].reward[done] == 0)
    assert ended and (how == "terminated" or ended[0] == 4)


def test_atari_frames_are_channels_last_in_unit_range_and_evaluation_plays_whole_games():
    spec = host_spec("envpool:Pong-v5")
    assert spec.obs_shape == (84, 84, 4) and spec.action_space.n == 6 and spec.max_episode_steps == 27000
    actions = [np.full(2, a, np.int32) for a in (0, 1, 2, 3) * 3]
    own_first, own = _own_loop("Pong-v5", 2, 11, actions, episodic_life=True, reward_clip=True)
    first, got = _adapter("Pong-v5", 2, 11, actions)
    assert first.dtype == np.float32 and first.shape == (2, 84, 84, 4) and 0.0 <= first.min() <= first.max() <= 1.0
    np.testing.assert_allclose(first, np.transpose(own_first, (0, 2, 3, 1)) / 255.0, rtol=1e-6)
    np.testing.assert_allclose(got[-1].obs, np.transpose(own[-1][0], (0, 2, 3, 1)) / 255.0, rtol=1e-6)
    train = EnvpoolVec(spec, 1)
    evaluation = EnvpoolVec(spec, 1, evaluation=True)
    assert train.options == {"episodic_life": True, "reward_clip": True}
    assert evaluation.options == {"episodic_life": True, "reward_clip": False} and evaluation.games


def test_a_policy_that_never_fires_plays_whole_breakout_games_as_envpools_own_loop_scores_them():
    """Breakout serves only after FIRE; envpool's reset presses it at the start of
    every life of its training pool, so a trained policy need not. The evaluation
    pool starts its lives alike and joins them into one game: a policy that only
    ever sends NOOP loses its 5 lives and ends the game (terminated once, at game
    over) in a few hundred steps — not at the 27,000-step limit — and every field
    matches envpool's own pool with lives as episodes, whose ``info`` says which
    end is the game's."""
    actions = [np.zeros(2, np.int32)] * 400
    _, own = _own_steps("Breakout-v5", 2, 5, actions, episodic_life=True, reward_clip=False)
    _, got = _adapter("Breakout-v5", 2, 5, actions, evaluation=True)
    ended = np.full(2, -1)
    for t, (step, (r, te, tr, game_over, resetting)) in enumerate(zip(got, own, strict=True)):
        np.testing.assert_array_equal(step.valid, ~resetting)
        np.testing.assert_array_equal(step.reward, np.where(resetting, 0.0, r))
        np.testing.assert_array_equal(step.terminated, te & game_over & ~resetting)
        assert not tr.any() and not step.truncated.any()  # no game reaches the time limit here
        ended[(ended < 0) & step.terminated] = t
    assert (ended > 0).all(), "a game that never ends: its lives were not started with FIRE"
    lives_lost = [sum(bool(te[i] and not go[i]) for _, te, _, go, rs in own[: ended[i]] if not rs[i]) for i in (0, 1)]
    assert lives_lost == [4, 4]  # the fifth life's end is the game's


def _own_steps(task: str, n: int, seed: int, actions, **options):
    """envpool's own pool: (reward, terminated, truncated, game over, reset step) per call."""
    env = envpool.make(task, env_type="gymnasium", num_envs=n, seed=seed, **options)
    obs, _ = env.reset()
    rows, pending = [], np.zeros(n, bool)
    for a in actions:
        _, r, te, tr, info = env.step(np.asarray(a))
        rows.append((r, te, tr, np.asarray(info["terminated"], bool), pending))
        pending = te | tr
    env.close()
    return obs, rows


def test_mujoco_takes_continuous_actions_and_classic_ids_take_their_presets():
    spec = host_spec("envpool:HalfCheetah-v4")
    assert spec.obs_shape == (17,) and spec.action_space.shape == (6,) and spec.max_episode_steps == 1000
    first, got = _adapter("HalfCheetah-v4", 2, 0, [np.full((2, 6), 0.5, np.float32)] * 3)
    assert first.shape == (2, 17) and all(s.valid.all() and np.isfinite(s.reward).all() for s in got)
    assert (
        preset_name("envpool:Pong-v5") == "envpool:atari" and preset_name("envpool:HalfCheetah-v4") == "envpool:mujoco"
    )
    assert preset_name("envpool:CartPole-v1") is None and preset_name("gymnasium:CartPole-v1") is None
    atari = resolve(["env=envpool:Breakout-v5"])
    assert atari.algo.conv_channels == (32, 64, 64) and atari.algo.hidden_sizes == (512,) and atari.num_envs == 8
    assert resolve(["env=envpool:HalfCheetah-v4"]).algo.num_steps == 256
    cartpole = resolve(["env=envpool:CartPole-v1"])  # the gymnax CartPole preset
    assert cartpole.algo.lr == pytest.approx(0.005) and cartpole.num_envs == 8
    # PQN's Atari preset (purejaxql's settings) is a valid host run: the Nature CNN on frames
    from jaxrl.run.host import prepare_host

    pqn = resolve(["env=envpool:Pong-v5", "algo=pqn"])
    assert pqn.num_envs == 128 and pqn.algo.num_steps == 32 and pqn.algo.conv_strides == (4, 2, 1)
    assert pqn.algo.eps_end == pytest.approx(0.001) and pqn.algo.lr_schedule == "constant"
    assert prepare_host(pqn).num_updates == -(-10_000_000 // (128 * 32))


def test_an_unknown_task_names_the_nearest():
    with pytest.raises(ConfigError) as error:
        host_spec("envpool:Pongg-v5")
    assert "is not an envpool task" in str(error.value) and "envpool:Pong-v5" in str(error.value)


def _finished(proc, members: int):
    """What a finished host-env run prints and writes: the run directory's files,
    a checkpoint, one final return per seed, the pipeline's report."""
    run_dir = run_dir_of(proc)
    for name in ("config.yaml", "metrics.jsonl", "summary.json", "curves.png"):
        assert (run_dir / name).is_file(), name
    assert any(p.name.isdigit() for p in (run_dir / "checkpoints").iterdir())
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["run_dir"] == str(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(summary["final_eval_return"]) == members and np.all(np.isfinite(summary["final_eval_return"]))
    assert summary["pipeline"]["verdict"] in ("rollout-bound", "learner-bound", "balanced")
    assert "verdict:" in proc.stdout and "IQM" in proc.stdout
    assert "precision lowered" not in proc.stderr  # envpool's float64 bounds stay quiet
    return run_dir, summary


def test_the_docs_cartpole_command_learns(home, capsys):
    """The pipeline on an envpool pool (random play ≈ 20); its policy exports;
    render is refused in one line (envpool's envs draw no frames)."""
    from jaxrl import evaluate, export

    proc = run(ENVPOOL_CARTPOLE, home, COMMANDS[ENVPOOL_CARTPOLE])
    run_dir, summary = _finished(proc, 4)
    assert summary["env"] == "envpool:CartPole-v1" and run_dir.name.startswith("envpool-CartPole-v1-ppo-")
    assert summary["iqm"] >= 200, summary["final_eval_return"]
    # envpool's reset steps hold back the other envs' columns: their extra steps, once past the lag
    # bound, are dropped (how many depends on the threads' timing: 2.8 % here)
    share = summary["pipeline"]["stale_share"]
    assert 0 <= share < 0.2 and (not share or f"{100 * share:.1f} % of env steps dropped" in proc.stdout), share
    capsys.readouterr()
    assert evaluate.main([str(run_dir), "render=true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: render=true: envpool:CartPole-v1: envpool's envs do not draw frames; "
        "fix: drop render=true (evaluate still plays and scores the episodes)"
    ]
    assert not (run_dir / "evaluation.json").exists()
    assert export.main([str(run_dir), "seed=2"]) == 0
    spec = json.loads((run_dir / "export-seed2" / "policy.json").read_text())
    assert spec["env"] == "envpool:CartPole-v1" and spec["action"] == {"kind": "discrete", "n": 2}


def test_the_docs_atari_command_runs_the_nature_cnn(home):
    """A smoke run of the Atari preset at a CI budget: frames in, a finished run out."""
    proc = run(ENVPOOL_PONG, home, COMMANDS[ENVPOOL_PONG])
    run_dir, summary = _finished(proc, 1)
    assert summary["env"] == "envpool:Pong-v5"
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["algo"]["conv_channels"] == [32, 64, 64] and config["algo"]["hidden_sizes"] == [512]
    final = summary["final_eval_return"][0]
    assert -21.0 <= final <= 21.0  # a whole-game Pong score, unclipped


@pytest.mark.parametrize(
    "command",
    ["python -m jaxrl.train env=envpool:HalfCheetah-v4 seeds=4", "python -m jaxrl.train env=envpool:Hopper-v4 seeds=4"],
)
def test_the_docs_mujoco_commands_take_the_mujoco_preset(home, command):
    """The MuJoCo figures' commands at a CI budget: CleanRL's continuous PPO preset
    (8 envs × 256 steps, 10 epochs × 32 minibatches, normalized observations and
    rewards), one update of 4 seeds in one learner, the pipeline's report."""
    proc = run(command, home, COMMANDS[command])
    run_dir, summary = _finished(proc, 4)
    assert_mujoco_preset(yaml.safe_load((run_dir / "config.yaml").read_text()))
    assert summary["env"] == command.split("env=")[1].split()[0] and summary["num_updates"] == 1


def test_bad_envpool_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from jaxrl import train

    assert train.main(["env=envpool:Pongg-v5", f"run_dir={tmp_path / 'a'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "env=envpool:Pongg-v5: is not an envpool task" in err, err
    monkeypatch.setitem(__import__("sys").modules, "envpool", None)  # the extra not installed
    assert train.main(["env=envpool:Pong-v5", f"run_dir={tmp_path / 'b'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs the envpool package" in err and "[envpool]" in err, err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_host_learners_get_the_perf_seam():
    """As make_train's: perf=auto builds the learner with XLA:CPU's speed code
    (convolutions as patches × kernel), perf=off without it."""
    from jaxrl.run.host import prepare_host

    assert prepare_host(resolve(["env=envpool:CartPole-v1"])).agent.network.perf is True
    assert prepare_host(resolve(["env=envpool:CartPole-v1", "perf=off"])).agent.network.perf is False
