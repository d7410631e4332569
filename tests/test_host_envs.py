"""Host envs (``env=gymnasium:ID``) and the actor–learner pipeline.

The adapter is checked step by step against gymnasium's own env loop, for
ends by termination and by time limit, in both of gymnasium's auto-reset
modes; the pipeline's lag bound, its verdict, failures (an env that raises,
one that hangs), signals, resume and bad input through the CLI; the docs'
command as a user runs it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

from jaxrl import train
from jaxrl.actors.sebulba import MARGIN, STEP_FIELDS, _Raw, take_columns, verdict
from jaxrl.envs import host
from tests import toy_host_envs  # noqa: F401  (registers the toy envs here too)
from tests.helpers import EXPORTED, EXPORTED_RECURRENT, REPO, assert_mujoco_preset, run, run_dir_of, user_env
from tests.test_readme import COMMANDS, floors_apply

TOY = "env.module=tests.toy_host_envs"
TINY = ["seeds=2", "num_envs=2", "algo.num_steps=16", "total_timesteps=256", "num_evals=2", "eval.episodes=2"]
DOCS = "python -m jaxrl.train env=gymnasium:CartPole-v1 seeds=4"
DOCS_PQN = "python -m jaxrl.train env=gymnasium:CartPole-v1 algo=pqn seeds=4"
DOCS_SAC = "python -m jaxrl.train env=gymnasium:Pendulum-v1 algo=sac seeds=4"
DOCS_FAST_TD3 = "python -m jaxrl.train env=gymnasium:Pendulum-v1 algo=td3 preset=fast seeds=4"
DOCS_DQN = "python -m jaxrl.train env=gymnasium:CartPole-v1 algo=dqn seeds=4"
DOCS_MUJOCO = "python -m jaxrl.train env=gymnasium:HalfCheetah-v5 seeds=4"
DOCS_ALE = "python -m jaxrl.train env=gymnasium:ALE/Breakout-v5 seeds=1"
DOCS_SWEEP = "python -m jaxrl.sweep env=gymnasium:CartPole-v1 seeds=4 algo.lr=1e-3,3e-3"


def _reference(env_id: str, seed: int, actions: list[int], **kwargs) -> list[tuple]:
    """gymnasium's own loop on one env: (obs after the step, reward, terminated, truncated) until the first end."""
    env = gym.make(env_id, **kwargs)
    obs, _ = env.reset(seed=seed)
    rows = [("reset", np.asarray(obs, np.float32))]
    for a in actions:
        obs, reward, terminated, truncated, _ = env.step(a)
        rows.append((np.asarray(obs, np.float32), float(reward), bool(terminated), bool(truncated)))
        if terminated or truncated:
            obs, _ = env.reset()
            rows.append(("reset", np.asarray(obs, np.float32)))
            break
    env.close()
    return rows


@pytest.mark.parametrize("mode", host.AUTORESET)
@pytest.mark.parametrize("end", ["terminated", "truncated"])
def test_the_adapter_steps_as_gymnasiums_own_loop(mode, end):
    """Pushing right topples CartPole (terminated, step 9 or so); a 5-step limit
    truncates first. The adapter gives gymnasium's observations, rewards and
    end kinds, the pre-reset observation as final_obs, then the fresh start;
    in next-step mode the reset step is marked invalid and is no transition."""
    limit = 5 if end == "truncated" else None
    spec = host.host_spec("gymnasium:CartPole-v1")
    vec = host.GymnasiumVec(spec, 2, autoreset=mode, max_episode_steps=limit)
    obs = vec.reset(seed=7)
    actions = [1] * 40
    ref = [
        _reference("CartPole-v1", 7 + i, actions, **({"max_episode_steps": limit} if limit else {})) for i in range(2)
    ]
    np.testing.assert_allclose(obs[0], ref[0][0][1])
    np.testing.assert_allclose(obs[1], ref[1][0][1])
    ended = False
    for t, _ in enumerate(actions):
        out = vec.step(np.ones(2, np.int64))
        row = ref[0][t + 1]
        if not out.valid[0]:  # next-step mode: the backend only reset env 0
            assert mode == "next_step" and ended
            np.testing.assert_allclose(out.obs[0], ref[0][-1][1], rtol=1e-6)
            break
        pre, reward, terminated, truncated = row
        np.testing.assert_allclose(out.final_obs[0], pre, rtol=1e-6)
        assert (float(out.reward[0]), bool(out.terminated[0]), bool(out.truncated[0])) == (
            reward,
            terminated,
            truncated,
        )
        if terminated or truncated:
            assert (terminated, truncated) == (end == "terminated", end == "truncated")
            ended = True
            if mode == "same_step":  # the fresh start right away
                np.testing.assert_allclose(out.obs[0], ref[0][-1][1], rtol=1e-6)
                break
        else:
            np.testing.assert_allclose(out.obs[0], pre, rtol=1e-6)
    assert ended
    vec.close()


def test_dict_and_discrete_observations_are_flattened():
    spec = host.host_spec("gymnasium:JaxrlDict-v0")
    assert spec.obs_shape == (5,) and spec.action_space.n == 3
    vec = host.make_vec(spec, 2)
    obs = vec.reset(0)
    np.testing.assert_array_equal(obs, [[1, 0, 0, 0, 0]] * 2)  # gear 0 one-hot, then pos
    out = vec.step(np.asarray([2, 1]))
    np.testing.assert_allclose(out.obs, [[0, 0, 1, 0.1, 0.1], [0, 1, 0, 0.1, 0.1]], rtol=1e-6)
    vec.close()


def test_columns_keep_each_envs_steps_consecutive():
    """Env 0 skips a reset step: its column takes its next valid step, and the
    steps each env did not use wait for the next block."""
    valid = np.asarray([[1, 1], [0, 1], [1, 1], [1, 1]], bool)
    raw = [
        _Raw(
            {k: np.asarray([10 * s, 10 * s + 1]) for k in STEP_FIELDS},
            valid[s],
            s,
        )
        for s in range(4)
    ]
    out, left, versions = take_columns(raw, 2)
    np.testing.assert_array_equal(out["obs"], [[0, 1], [20, 11]])
    assert versions == (0, 2)
    assert [(r.version, r.valid.tolist()) for r in left] == [(2, [False, True]), (3, [True, True])]


class _Counting:
    """Two fake host envs whose observation is how many valid steps they took
    (never ending); ``invalid`` lists the vector steps at which env 0 only resets
    (a backend's reset step: no transition), so env 1 runs ahead of it."""

    spec = None
    num_envs = 2

    def __init__(self, invalid: tuple[int, ...]):
        self.invalid, self.calls = invalid, 0
        self.taken = np.zeros(2, np.float32)

    def reset(self, seed: int) -> np.ndarray:
        return np.repeat(self.taken[:, None], 4, axis=1)

    def step(self, actions: np.ndarray) -> host.HostStep:
        valid = np.asarray([self.calls not in self.invalid, True])
        self.calls += 1
        self.taken += valid
        obs = self.reset(0)
        false = np.zeros(2, bool)
        return host.HostStep(obs, np.zeros(2, np.float32), false, false, obs.copy(), valid)


def test_a_step_that_does_not_follow_its_envs_last_delivered_one_is_cut():
    """An env's delivered steps are marked ``cut`` exactly where they do not
    continue its previous delivered step: its first step, the first after
    steps dropped past the lag bound, the first after a restart (resume); the
    actor counts the steps it dropped."""
    from jaxrl.actors.sebulba import ActorTimes, Collector

    def policy(state, obs, key, step):
        from collections import namedtuple

        record = namedtuple("Record", "action log_prob")
        return np.zeros((1, 2), np.int64), record(np.zeros((1, 2), np.int64), np.zeros((1, 2), np.float32))

    def collector(env: _Counting) -> Collector:
        return Collector(env, policy, members=1, per_member=2, num_steps=3, max_lag=1, key=None, seed=0)

    env = _Counting(invalid=(1, 2, 3, 4, 11))
    actor = collector(env)
    last, cuts = {0: None, 1: None}, set()
    # update 1 takes update 0's leftovers (version 0, within the lag); update 4 drops update 1's
    for update in (0, 1, 2, 5):
        times = ActorTimes()
        block = actor.collect(update, None, update, times).steps
        skipped = 0  # steps between an env's delivered ones: the dropped ones (its observation counts its steps)
        for j in range(2):
            for t in range(3):
                seen = block["obs"][0, t, j, 0]
                skipped += 0 if last[j] is None else int(seen - last[j])
                follows = last[j] is not None and seen == last[j]
                assert bool(block["cut"][0, t, j]) == (not follows), (update, t, j, seen, last[j])
                last[j] = block["final_obs"][0, t, j, 0]  # where this env's next step starts
                if block["cut"][0, t, j]:
                    cuts.add((update, t, j))
        assert times.stale_steps == skipped, (update, times.stale_steps, skipped)
    # the first steps; env 1's first kept leftover at update 2 (its older ones dropped); its first step at update 5
    assert cuts == {(0, 0, 0), (0, 0, 1), (2, 0, 1), (5, 0, 1)}
    restarted = collector(env)  # a resumed run: fresh episodes
    first = restarted.collect(6, None, 6, ActorTimes()).steps["cut"][0]
    assert first[0].all() and not first[1:].any()


class _Episodic:
    """Two fake host envs with episodes of 3 and 5 steps that reset on the step
    after their end (envpool's way: that step is invalid); each observes how
    many steps its episode has taken."""

    spec = None
    num_envs = 2

    def __init__(self):
        self.t, self.ended, self.resets = np.zeros(2, np.float32), np.zeros(2, bool), 0

    def _obs(self) -> np.ndarray:
        return np.repeat(self.t[:, None], 4, axis=1)

    def reset(self, seed: int) -> np.ndarray:
        self.t[:], self.ended[:], self.resets = 0.0, False, self.resets + 1
        return self._obs()

    def step(self, actions: np.ndarray) -> host.HostStep:
        valid = ~self.ended
        self.t = np.where(self.ended, 0.0, self.t + 1).astype(np.float32)
        terminated = valid & (self.t == np.asarray([3.0, 5.0]))
        self.ended = terminated
        obs = self._obs()
        return host.HostStep(obs, np.ones(2, np.float32), terminated, np.zeros(2, bool), obs.copy(), valid)


def test_a_recurrent_policys_carry_restarts_with_each_episode_and_skips_reset_steps():
    """The actors keep each env's carry: every step records the carry it was
    acted from, which counts the steps of its episode before it (the policy
    adds one per call) — restarted after an episode's end, unchanged by the
    backend's reset step."""
    from collections import namedtuple

    from jaxrl.actors.sebulba import ActorTimes, Collector

    record = namedtuple("Record", "action log_prob")

    def policy(state, obs, key, step, carry):
        zeros = np.zeros((1, 2), np.int64)
        return zeros, record(zeros, np.zeros((1, 2), np.float32)), np.asarray(carry) + 1

    env = _Episodic()
    actor = Collector(
        env, policy, members=1, per_member=2, num_steps=4, max_lag=1, key=None, seed=0, carry=np.zeros((1, 2, 1))
    )
    for update in range(4):
        block = actor.collect(update, None, update, ActorTimes()).steps
        np.testing.assert_array_equal(block["carry"][0, :, :, 0], block["obs"][0, :, :, 0])
        assert block["terminated"].any()


def test_fresh_episodes_start_every_trajectory_with_a_reset():
    """REINFORCE's actors (``fresh_episodes``) reset every env before each
    trajectory: each column starts at an episode's first step, cut from the
    last, with nothing carried over (episode returns count from the reset)."""
    from collections import namedtuple

    from jaxrl.actors.sebulba import ActorTimes, Collector

    record = namedtuple("Record", "action log_prob")

    def policy(state, obs, key, step):
        zeros = np.zeros((1, 2), np.int64)
        return zeros, record(zeros, np.zeros((1, 2), np.float32))

    env = _Episodic()
    actor = Collector(
        env, policy, members=1, per_member=2, num_steps=4, max_lag=1, key=None, seed=0, fresh_episodes=True
    )
    for update in range(3):
        block = actor.collect(update, None, update, ActorTimes()).steps
        assert env.resets == update + 1  # the steps kept from the last trajectory (env 1 ran ahead) are not used
        np.testing.assert_array_equal(block["obs"][0, 0, :, 0], [0, 0])
        assert block["cut"][0, 0].all() and not block["cut"][0, 1:].any()
        ended = block["terminated"][0]
        np.testing.assert_array_equal(block["episode_return"][0][ended], block["episode_length"][0][ended])
        np.testing.assert_array_equal(block["episode_length"][0][ended], block["final_obs"][0, :, :, 0][ended])


@pytest.mark.parametrize("capacity", [60, 21])  # 21: the ring wraps (7 steps of 3 envs)
def test_n_step_windows_stop_at_a_cut_as_a_plain_loop_over_each_envs_steps_does(capacity):
    """Items reach the buffer in blocks of ``T`` steps of ``N`` envs with their
    ``cut`` flags (a block's first step after dropped steps or a restart, or
    anywhere); every window the buffer can start gives the return, discount
    and bootstrap observation of a plain loop over each env's steps that stops
    at an episode's end or before a step that does not follow."""
    import jax
    import jax.numpy as jnp

    from jaxrl.algos import replay
    from jaxrl.rl import buffers

    n_envs, steps, n, gamma = 3, 3, 3, 0.9
    rng = np.random.default_rng(0)
    example = replay.WindowTransition(*(jnp.zeros(()),) * 3, jnp.zeros((), bool), jnp.zeros(()), jnp.zeros((), bool))
    buffer = buffers.init(example, capacity)
    history: list[list[dict]] = [[] for _ in range(n_envs)]  # each env's items in time order
    for block in range(4):
        reward = rng.normal(size=(steps, n_envs)).astype(np.float32)
        terminated = rng.random((steps, n_envs)) < 0.15
        done = terminated | (rng.random((steps, n_envs)) < 0.15)
        cut = rng.random((steps, n_envs)) < 0.25
        cut[0] |= block == 0
        ids = 100.0 * block + 10.0 * np.arange(steps)[:, None] + np.arange(n_envs)  # an item's name
        items = replay.WindowTransition(ids, np.zeros_like(ids), reward, terminated, ids + 0.5, done)
        flat = jax.tree.map(lambda x: jnp.asarray(x.reshape(-1)), items)
        ring, flat = replay.cut_windows(buffer, flat, jnp.asarray(cut))
        buffer = buffers.add(ring, flat)
        for t in range(steps):
            for j in range(n_envs):
                history[j].append(
                    dict(id=ids[t, j], r=reward[t, j], term=terminated[t, j], done=done[t, j], cut=cut[t, j])
                )

    def reference(j: int, i: int) -> tuple[float, float, float]:
        ret, items = 0.0, history[j]
        for k in range(n):
            item = items[i + k]
            ret += gamma**k * item["r"]
            gap = i + k + 1 < len(items) and items[i + k + 1]["cut"]
            if item["done"] or gap or k == n - 1:
                return ret, gamma ** (k + 1) * (1.0 - item["term"]), item["id"] + 0.5

    size = int(buffer.size)
    starts = (int(buffer.position) - size + np.arange(size - (n - 1) * n_envs)) % capacity
    windows = (starts[:, None] + n_envs * np.arange(n)) % capacity
    batch = buffers.take(buffer, jnp.asarray(windows))
    ret, discount = replay.bootstrap_terms(batch, jnp.float32(gamma))
    bootstrap = np.asarray(replay.bootstrap_obs(batch))
    kept = len(history[0]) - size // n_envs  # each env's items overwritten by the ring
    for b, first in enumerate(np.asarray(batch.obs[:, 0])):
        j = int(round(first)) % 10
        i = [item["id"] for item in history[j]].index(first)
        assert i >= kept
        want = reference(j, i)
        np.testing.assert_allclose([ret[b], discount[b], bootstrap[b]], want, rtol=1e-5, err_msg=str(first))


def test_the_verdict_names_the_slower_side():
    assert verdict(1.0, 0.1) == "rollout-bound" and verdict(0.1, 1.0) == "learner-bound"
    assert verdict(1.0, 1.0) == "balanced" and verdict(MARGIN * 0.99, 1.0) == "balanced"


def _train(tmp_path, *args: str) -> tuple[int, dict | None, list[dict]]:
    run_dir = tmp_path / "run"
    code = train.main([*args, f"run_dir={run_dir}", "plots=false"])
    summary = json.loads((run_dir / "summary.json").read_text()) if (run_dir / "summary.json").exists() else None
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return code, summary, rows


@pytest.mark.parametrize("lag", [0, 1, 2])
def test_policy_lag_stays_within_its_bound(tmp_path, lag):
    code, summary, rows = _train(tmp_path, "env=gymnasium:JaxrlToy-v0", TOY, *TINY, f"actor.max_lag={lag}")
    assert code == 0
    lags = [r["pipeline"]["lag_max"] for r in rows if r["type"] == "update"]
    assert len(lags) == 8 and max(lags) <= lag and summary["pipeline"]["lag_max"] <= lag
    if lag == 0:
        assert set(lags) == {0}


def test_actor_sync_is_lock_step(tmp_path):
    code, summary, _ = _train(tmp_path, "env=gymnasium:JaxrlToy-v0", TOY, *TINY, "actor.sync=true", "actor.max_lag=3")
    assert code == 0 and summary["pipeline"]["lag_max"] == 0


def test_a_slow_env_is_rollout_bound_and_a_heavy_learner_learner_bound(tmp_path):
    """2 ms per env step against a light learner; then 1 fast env against
    2048 epochs of 8 minibatches: the verdict flips, and names its lever."""
    slow = ["env=gymnasium:JaxrlSlow-v0", TOY, "seeds=1", "num_envs=2", "algo.num_steps=32", "total_timesteps=256"]
    code, summary, _ = _train(tmp_path / "slow", *slow, "num_evals=1", "eval.episodes=1")
    assert code == 0 and summary["pipeline"]["verdict"] == "rollout-bound", summary["pipeline"]
    assert "actor.threads" in summary["pipeline"]["lever"]
    heavy = ["env=gymnasium:JaxrlToy-v0", TOY, "seeds=1", "num_envs=1", "algo.num_steps=64", "total_timesteps=256"]
    epochs = ["algo.update_epochs=2048", "algo.num_minibatches=8"]
    code, summary, _ = _train(tmp_path / "heavy", *heavy, *epochs, "num_evals=1", "eval.episodes=1")
    assert code == 0 and summary["pipeline"]["verdict"] == "learner-bound", summary["pipeline"]
    assert "algo.update_epochs" in summary["pipeline"]["lever"]


def test_an_env_that_raises_stops_the_run_in_one_line_and_keeps_the_checkpoint(tmp_path, capsys):
    args = ["env=gymnasium:JaxrlRaises-v0", TOY, *TINY, "total_timesteps=1024", "num_evals=4"]
    code, _, _ = _train(tmp_path, *args)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(lines) == 1, err
    assert "gymnasium:JaxrlRaises-v0: seed 0" in lines[0] and "RuntimeError: the simulator lost its state" in lines[0]
    assert "last checkpoint: chunk" in lines[0] and "Traceback" not in err
    assert threading.active_count() == 1 or all(not t.name.startswith("jaxrl-actor") for t in threading.enumerate())


def test_a_hung_env_is_stopped_by_the_watchdog(tmp_path, capsys):
    args = ["env=gymnasium:JaxrlHangs-v0", TOY, *TINY, "total_timesteps=1024", "num_evals=4", "actor.timeout_s=2"]
    code, _, _ = _train(tmp_path, *args)
    err = capsys.readouterr().err
    assert code == 2 and "actor.timeout_s" in err and "has not returned" in err and "Traceback" not in err, err


def test_resume_continues_the_learner_where_it_stopped(tmp_path):
    """Resume continues the learner's records; the TensorBoard curves (one per
    seed and metric, the pipeline's figures) continue without repeated steps."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from jaxrl.run import training
    from jaxrl.run.overrides import resolve

    run_dir = tmp_path / "run"
    args = ["env=gymnasium:JaxrlToy-v0", TOY, *TINY, "num_evals=4", f"run_dir={run_dir}", "plots=false"]
    args.append("logger=tensorboard")
    assert training.run(resolve(args), stop_after_chunks=2) == 0
    first = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in first if r["type"] == "eval"] == [2, 4]
    assert train.main([f"resume={run_dir}"]) == 0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows if r["type"] == "update"] == list(range(1, 9))
    assert rows[: len(first)] == first
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["num_updates"] == 8 and summary["devices"] == 1
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    pipeline = {f"pipeline/{k}" for k in ("learn_s", "actor_env_s", "lag_max", "steps_per_s", "rollout_over_learn")}
    assert {"eval/return/seed_0", "eval/return_iqm", "train/policy_loss/seed_1"} | pipeline <= tags, tags
    steps = [e.step for e in events.Scalars("pipeline/learn_s")]
    assert steps == [32 * u for u in range(1, 9)]  # one point per update: 2 envs × 16 steps per seed
    evals = events.Scalars("eval/return/seed_1")
    assert [e.step for e in evals] == [64, 128, 192, 256]
    assert evals[-1].value == pytest.approx(summary["final_eval_return"][1])


def test_pbt_evolves_a_population_of_host_env_learners_across_a_resume(tmp_path):
    """PBT over a host env: after each chunk but the last the worst member copies
    a best one's learner state and hyperparameters and perturbs them (× 0.8 or
    1.25, or a resample within bounds); the others keep theirs; the evolved
    hyperparameters survive a stop and resume; the summary traces the best
    member's lineage."""
    from jaxrl.run import training
    from jaxrl.run.overrides import resolve

    run_dir = tmp_path / "run"
    args = ["env=gymnasium:JaxrlToy-v0", TOY, *TINY[1:], "num_evals=4", "pbt.population=4", "pbt.resample_prob=0"]
    assert training.run(resolve([*args, f"run_dir={run_dir}", "plots=false"]), stop_after_chunks=2) == 0
    assert train.main([f"resume={run_dir}"]) == 0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if r["type"] == "eval"]
    assert [r["update"] for r in evals] == [2, 4, 6, 8] and evals[-1]["parents"] == [-1] * 4
    assert len(set(evals[0]["hparams"]["lr"])) == 4  # the population starts spread around the config's
    for before, after in zip(evals[:-1], evals[1:], strict=True):  # chunk 1 → 2 crosses the resume
        assert sum(p >= 0 for p in before["parents"]) == 1  # ⌊0.25 × 4⌋ = 1 copy per step
        for i, parent in enumerate(before["parents"]):
            for name, values in after["hparams"].items():
                if parent < 0:
                    assert values[i] == before["hparams"][name][i], (name, i)
                elif name in ("lr", "ent_coef", "clip_eps"):  # the evolved ones: perturbed (then clipped)
                    source = before["hparams"][name][parent]
                    assert any(np.isclose(values[i], source * f) for f in (0.8, 1.25)) or values[i] in (0.0, source)
                    scores = before["eval_return"]
                    assert scores[parent] >= scores[i]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["pbt"]["copies"] == 3 and len(summary["pbt"]["best_trajectory"]) == 4


def _shipped(out: Path, obs: np.ndarray) -> np.ndarray:
    """The exported policy in ``out`` run without jaxrl on ``obs``: its actions."""
    shipped = subprocess.run(
        [sys.executable, "-c", EXPORTED, str(out), json.dumps(obs.tolist())],
        env=user_env(),
        capture_output=True,
        text=True,
    )
    assert shipped.returncode == 0, shipped.stderr[-2000:]
    return np.asarray(json.loads(shipped.stdout))


def test_a_sweep_trains_its_configurations_as_members_of_one_learner(tmp_path, capsys):
    """A sweep over a traced hyperparameter on a host env: every configuration's
    seeds are members of one learner, each with its own hyperparameters (Adam's
    steps are at most about lr: lr=1e-9 leaves its members' parameters where
    they started, lr=3e-3 moves them); a sweep
    stopped after one chunk resumes to the end; the report has a row per
    configuration; evaluate, load_policy and export read the group (a seed
    named with its configuration: config=LABEL)."""
    import jax

    import jaxrl
    from jaxrl import evaluate, export
    from jaxrl.run import sweeping
    from jaxrl.run.policy import host_config, open_host

    out: dict = {}
    args = [
        "env=gymnasium:JaxrlToy-v0",
        TOY,
        *TINY,
        "algo.lr=1e-9,3e-3",
        f"runs_root={tmp_path / 'runs'}",
        "plots=false",
    ]
    assert sweeping.run(args, stop_after_chunks=1, out=out) == 0
    sweep_dir = Path(out["sweep_dir"])
    group = sweep_dir / "group-0"
    assert not (group / "summary.json").exists() and not (sweep_dir / "report.json").exists()
    assert sweeping.run([f"resume={sweep_dir}"]) == 0
    rows = [json.loads(line) for line in (group / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows if r["type"] == "update"] == list(range(1, 9))
    assert all(len(r["eval_return"]) == 4 for r in rows if r["type"] == "eval")  # 2 configurations × 2 seeds
    report = json.loads((sweep_dir / "report.json").read_text())["rows"]
    assert sorted(r["hparams"]["lr"] for r in report) == pytest.approx([1e-9, 3e-3]) and all(
        r["runs"] == 2 for r in report
    )

    config = host_config(str(group))
    opened = open_host(str(group), config)
    run = opened.run
    assert run.seeds == (0, 1, 0, 1) and run.config_index == (0, 0, 1, 1)
    keys = jax.vmap(jax.random.key)(np.asarray(run.seeds, np.uint32))
    start = jax.vmap(run.agent.init)(keys, run.hparams)
    lrs = np.asarray(run.hparams.to_dict()["lr"])
    for m in range(4):
        moved = max(
            float(np.max(np.abs(np.asarray(a[m]) - np.asarray(b[m]))))
            for a, b in zip(jax.tree.leaves(opened.states.params), jax.tree.leaves(start.params), strict=True)
        )
        assert moved < 1e-5 if lrs[m] < 1e-6 else moved > 1e-3, (m, lrs[m], moved)

    capsys.readouterr()
    assert evaluate.main([str(group), "episodes=2"]) == 0
    result = json.loads((group / "evaluation.json").read_text())
    assert [(s["config"], s["seed"]) for s in result["seeds"]] == [
        (run.labels[c], s) for c, s in [(0, 0), (0, 1), (1, 0), (1, 1)]
    ]
    assert evaluate.main([str(group), "episodes=2", f"config={run.labels[1]}"]) == 0
    result = json.loads((group / "evaluation.json").read_text())
    assert [(s["config"], s["seed"]) for s in result["seeds"]] == [(run.labels[1], 0), (run.labels[1], 1)]
    with pytest.raises(ValueError, match="pass config=LABEL"):
        jaxrl.load_policy(str(group), seed=0)
    act = jaxrl.load_policy(str(group), seed=0, config=run.labels[1])
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 4)).astype(np.float32)
    action = np.asarray(act(obs, jax.random.key(0)))
    assert action.shape == (5,)

    # export: a seed alone is ambiguous in a group (one line); with its configuration it ships that member
    capsys.readouterr()
    assert export.main([str(group), "seed=0"]) == 2
    assert "pass config=LABEL too" in capsys.readouterr().err
    assert export.main([str(group), "seed=0", f"config={run.labels[1]}"]) == 0
    out = group / f"export-{run.labels[1]}-seed0"
    np.testing.assert_array_equal(_shipped(out, obs), action)


@pytest.mark.parametrize(
    "args, field",
    [
        (["env=gymnasium:CartPol-v1"], "env=gymnasium:CartPol-v1"),
        (["env=gymnasium:CartPole-v1", "algo=sac"], "algo=sac"),
        (["env=gymnasium:Pendulum-v1", "algo=td3", "profile=true"], "profile=True"),
        (["env=gymnasium:CartPole-v1", "num_envs=4", "actor.threads=3"], "actor.threads=3"),
        (["env=gymnasium:CartPole-v1", "actor.max_lag=-1"], "actor.max_lag=-1"),
        (["env=gymnasium:CartPole-v1", "actor.threads=0"], "actor.threads=0"),
        (["sweep", "env=gymnasium:CartPole-v1", "pbt.population=4", "algo.lr=1e-3,3e-3"], "pbt.population=4"),
        (["env=gymnasium:JaxrlToy-v0", "env.module=no_such_module"], "env.module=no_such_module"),
        # a sweep: every group's configuration checked by the pipeline before anything is written
        (
            ["sweep", "env=gymnasium:Pendulum-v1", "algo=td3", "algo.lr=1e-3,3e-3", "env.observe=[0]"],
            "env.observe=",
        ),
        (["sweep", "env=gymnasium:CartPole-v1", "num_envs=4,3", "actor.threads=2"], "actor.threads=2"),
    ],
)
def test_bad_host_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, field):
    command = "jaxrl.sweep" if args[0] == "sweep" else "jaxrl.train"
    args = args[1:] if args[0] == "sweep" else args
    proc = subprocess.run(
        [sys.executable, "-m", command, *args, f"runs_root={tmp_path / 'runs'}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**user_env(), "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: {field}"), proc.stderr
    assert not (tmp_path / "runs").exists()


def test_sigint_stops_actors_and_learner_with_a_checkpoint(tmp_path):
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jaxrl.train",
            "env=gymnasium:JaxrlSlow-v0",
            TOY,
            "seeds=1",
            "num_envs=2",
            "algo.num_steps=16",
            "total_timesteps=100000",
            "num_evals=1000",
            f"run_dir={tmp_path / 'run'}",
            "plots=false",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**user_env(), "PYTHONPATH": str(REPO)},
    )
    for line in proc.stderr:
        if line.startswith("chunk 2/"):
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "last checkpoint: chunk" in err and "Traceback" not in err
    assert os.listdir(tmp_path / "run" / "checkpoints")


def test_the_docs_command_trains_and_reports_its_pipeline(home):
    """``python -m jaxrl.train env=gymnasium:CartPole-v1 seeds=4`` (the CLI's
    defaults, the CartPole preset) at a CI budget: it learns, and the table
    ends with the pipeline's figures and verdict."""
    proc = run(DOCS, home, COMMANDS[DOCS])
    run_dir = run_dir_of(proc)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "gymnasium:CartPole-v1" and len(summary["final_eval_return"]) == 4
    assert summary["iqm"] > 100, summary["final_eval_return"]  # random play: ≈ 22
    assert summary["pipeline"]["verdict"] in ("rollout-bound", "learner-bound", "balanced")
    assert "verdict:" in proc.stdout and "pipeline per update" in proc.stdout
    assert (run_dir / "curves.png").is_file()
    assert all(np.isfinite(summary["final_eval_return"]))


def test_the_docs_sweep_command_ranks_both_configurations(home):
    """The docs' host-env sweep as a user runs it: one group, both learning
    rates' 4 seeds in one learner, a report row per configuration."""
    proc = run(DOCS_SWEEP, home, COMMANDS[DOCS_SWEEP])
    sweep_dir = Path(re.findall(r"^sweep directory: (.+)$", proc.stderr, re.M)[-1])
    assert "1 compiled program(s)" in proc.stderr and "2 configurations × 4 seed(s)" in proc.stderr
    rows = json.loads((sweep_dir / "report.json").read_text())["rows"]
    assert sorted(r["label"] for r in rows) == ["lr=0.001", "lr=0.003"]
    assert all(r["runs"] == 4 and np.isfinite(r["iqm"]) for r in rows)
    summary = json.loads((sweep_dir / "group-0" / "summary.json").read_text())
    assert summary["members"] == 8 and summary["pipeline"]["verdict"] in ("rollout-bound", "learner-bound", "balanced")


def test_the_docs_pqn_command_learns(home):
    """PQN through the same pipeline (its ε-greedy actors, Q(λ) targets on the
    learner) at a CI budget: random play ≈ 22; 4 / 4 seeds solved at the
    preset's full budget (docs/host-envs.md)."""
    proc = run(DOCS_PQN, home, COMMANDS[DOCS_PQN])
    summary = json.loads((run_dir_of(proc) / "summary.json").read_text())
    assert summary["algo"] == "pqn" and summary["iqm"] >= 200, summary["final_eval_return"]
    records = [json.loads(line) for line in (run_dir_of(proc) / "metrics.jsonl").read_text().splitlines()]
    epsilons = [r["epsilon"][0] for r in records if r["type"] == "update"]
    assert epsilons[0] == 1.0 and epsilons[-1] < epsilons[0]  # the actors explore on the schedule


def test_the_docs_sac_command_warms_up_then_learns(home):
    """SAC through the pipeline at a CI budget (10k of the preset's 20k steps):
    random play ≈ −1200; measured IQM −150, every seed ≥ −242 (−134 at the
    preset's budget, docs/host-envs.md). The first ⌈1000 / 32⌉ = 32 updates only
    fill the buffer; the learner-bound lever is the replay learner's own."""
    proc = run(DOCS_SAC, home, COMMANDS[DOCS_SAC])
    run_dir = run_dir_of(proc)
    summary = json.loads((run_dir / "summary.json").read_text())
    final = summary["final_eval_return"]
    assert summary["algo"] == "sac" and summary["iqm"] >= -400 and min(final) >= -700, final
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["type"] == "update"]
    assert all(v == 0.0 for row in losses[:32] for v in row) and all(v > 0 for row in losses[32:] for v in row)
    if summary["pipeline"]["verdict"] == "learner-bound":
        assert "algo.utd" in summary["pipeline"]["lever"], summary["pipeline"]


def test_the_docs_dqn_command_learns(home):
    """DQN through the pipeline; in the learning tier at half the preset's 100k
    steps: random play ≈ 22; measured IQM 269 (500 at the preset's budget,
    docs/host-envs.md). ε falls from 1 on the run's schedule as the actors act."""
    proc = run(DOCS_DQN, home, COMMANDS[DOCS_DQN])
    run_dir = run_dir_of(proc)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["algo"] == "dqn" and (summary["iqm"] >= 100 or not floors_apply(DOCS_DQN)), summary[
        "final_eval_return"
    ]
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    epsilons = [r["epsilon"][0] for r in records if r["type"] == "update"]
    assert epsilons[0] == 1.0 and epsilons[-1] < 0.1 and epsilons == sorted(epsilons, reverse=True)


def test_the_docs_mujoco_command_takes_the_mujoco_preset(home):
    """A gymnasium MuJoCo id trains with the preset envpool's MuJoCo tasks get
    (CleanRL's continuous PPO: 8 envs × 256 steps, 10 epochs × 32 minibatches,
    observation and reward normalization), its 6-d actions in [−1, 1]."""
    proc = run(DOCS_MUJOCO, home, COMMANDS[DOCS_MUJOCO])
    run_dir = run_dir_of(proc)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["total_timesteps"] == 2048  # the budget: the CI override
    assert_mujoco_preset(config)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "gymnasium:HalfCheetah-v5" and summary["num_updates"] == 1
    assert len(summary["final_eval_return"]) == 4 and all(np.isfinite(summary["final_eval_return"]))
    assert host.preset_name("gymnasium:CartPole-v1") is None and host.preset_name("gymnasium:NoSuchEnv-v0") is None


def test_ale_training_ends_at_each_lost_life_while_the_game_goes_on():
    """ale-py's Breakout through the Atari recipe, against the emulator's own
    life counter: a training episode ends (terminated) at each lost life, the
    reset after it continues the same game, rewards are clipped to their sign;
    the evaluation env ends only at game over. Frames: [84, 84, 4] in [0, 1]."""
    rng = np.random.default_rng(0)
    env = host.make_env("ALE/Breakout-v5")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84, 84, 4) and obs.dtype == np.float32 and 0.0 <= obs.min() <= obs.max() <= 1.0
    ale, lives_at_end, steps = env.unwrapped.ale, [], 0
    while len(lives_at_end) < 3:
        obs, reward, terminated, truncated, _ = env.step(int(rng.integers(4)))
        assert reward in (-1.0, 0.0, 1.0) and not truncated
        steps += 1
        if terminated:
            lives_at_end.append(ale.lives())
            frame = ale.getEpisodeFrameNumber()
            env.reset()
            assert ale.getEpisodeFrameNumber() > frame  # the same game goes on: no new one began
    assert lives_at_end == [4, 3, 2], lives_at_end
    env.close()
    env = host.make_env("ALE/Breakout-v5", evaluation=True)
    env.reset(seed=1)
    ale, terminated = env.unwrapped.ale, False
    while not terminated:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(4)))
        assert not truncated
    assert ale.lives() == 0  # one episode: the whole game
    env.close()


@pytest.mark.parametrize("evaluation", [False, True], ids=["training", "evaluation"])
def test_every_ale_life_starts_with_fire_so_a_policy_that_never_fires_ends_the_game(evaluation):
    """Breakout serves only after FIRE. As in envpool's Atari pool, every life
    starts with it (the reset after a lost life, or inside the evaluation step
    that lost it): a policy that only sends NOOP loses each life in a few dozen
    steps and the whole game (5 lives) in a few hundred — where it used to wait
    for a serve until the 27,000-step limit."""
    env = host.make_env("ALE/Breakout-v5", evaluation=evaluation)
    env.reset(seed=0)
    ale, steps, episodes = env.unwrapped.ale, 0, 0
    while not ale.game_over() and steps < 2000:
        _, _, terminated, truncated, _ = env.step(0)
        steps += 1
        assert not truncated
        if terminated:
            episodes += 1
            if not ale.game_over():
                env.reset()
    env.close()
    assert ale.game_over() and steps < 2000, steps
    assert episodes == (5 if not evaluation else 1)  # a training episode per life; evaluation: the game


def test_the_docs_ale_command_runs_the_atari_preset(home):
    """A smoke run of ``env=gymnasium:ALE/Breakout-v5`` at a CI budget: the Atari
    preset (Nature CNN) on ale-py's frames, a whole-game evaluation, and its
    full-colour screen drawn by the emulator."""
    proc = run(DOCS_ALE, home, COMMANDS[DOCS_ALE])
    run_dir = run_dir_of(proc)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["algo"]["network"] == "cnn" and config["algo"]["conv_channels"] == [32, 64, 64]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env"] == "gymnasium:ALE/Breakout-v5" and np.isfinite(summary["final_eval_return"][0])
    assert host.preset_name("gymnasium:ALE/Pong-v5") == "gymnasium:atari"
    spec = host.host_spec("gymnasium:ALE/Breakout-v5")
    assert spec.obs_shape == (84, 84, 4) and spec.action_space.n == 4
    frames, rewards = host.render_episode(spec, lambda obs: np.ones(1, np.int64), seed=0, max_steps=5)
    assert len(frames) == 6 and frames[0].shape == (210, 160, 3) and rewards.shape == (5,)


def test_ale_without_its_packages_is_one_line_naming_the_extra(tmp_path):
    code = (
        "import sys; sys.modules['ale_py'] = None; from jaxrl import train; "
        f"sys.exit(train.main(['env=gymnasium:ALE/Pong-v5', 'run_dir={tmp_path / 'run'}']))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=user_env(), timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "needs the ale_py package" in lines[0] and "[atari]" in lines[0] and not (tmp_path / "run").exists()


def test_pqn_learns_from_actors_steps_as_from_its_own_rollout():
    """PQN's ``learn`` on the actors' steps (``complete``: every step's
    ``final_obs`` bootstraps) equals ``learn`` on its in-program rollout of
    the same steps, and leaves the next rollout's ε for the actors."""
    import jax

    import jaxrl.envs
    from jaxrl import algos
    from jaxrl.core.fields import HParams
    from jaxrl.rl.qlearning import linear_epsilon
    from jaxrl.run.overrides import resolve

    config = resolve(["env=cartpole", "algo=pqn", "num_envs=4", "algo.num_steps=64", "algo.num_minibatches=4"])
    agent = algos.get("pqn").make_agent(config.algo, jaxrl.envs.make("cartpole"), 4, 10)
    # the learner of a host env knows no time limit: Q(final_obs) of every step, not only of the truncations
    unknown = jaxrl.envs.make("cartpole")
    unknown.truncation_period = lambda params=None: None
    host_agent = algos.get("pqn").make_agent(config.algo, unknown, 4, 10)
    hp = HParams.from_config(config.algo)
    state, rollout = agent.collect(agent.init(jax.random.key(0), hp), hp, np.int32(0))
    assert bool(np.any(np.asarray(rollout.steps.terminated)))  # the batch has ends to bootstrap around
    steps = {**rollout.steps._asdict(), "log_prob": np.zeros((64, 4), np.float32)}
    want, want_metrics = agent.learn(state, rollout, hp, np.int32(0))
    got, got_metrics = host_agent.learn(state, host_agent.complete(state, steps), hp, np.int32(0))
    for a, b in zip(jax.tree.leaves(got.params), jax.tree.leaves(want.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(got_metrics.target), float(want_metrics.target), rtol=1e-6)
    schedule = linear_epsilon(
        np.float32(256), hp.eps_start, hp.eps_end, hp.exploration_fraction, 10 * 256
    )  # update 1 starts after 4 envs × 64 steps
    assert float(got.epsilon) == pytest.approx(float(schedule)) and float(got_metrics.epsilon) == 1.0
    action, record = host_agent.behave(got, np.zeros((4, 4), np.float32), jax.random.key(1))
    assert action.shape == (4,) and np.asarray(record.log_prob).shape == (4,)


def test_recurrent_ppo_learns_from_actors_steps_as_from_its_own_rollout():
    """A GRU policy's ``complete`` — values from the carries the actors recorded
    (here by a plain loop over the rollout's steps from its start carry) — gives
    the values of its in-program rollout, which unrolls the carry itself, and
    ``learn`` gives the same parameters."""
    import jax

    import jaxrl.envs
    from jaxrl import algos
    from jaxrl.algos.actor_critic import prepare_obs
    from jaxrl.core.fields import HParams
    from jaxrl.nets.recurrent import reset_carry
    from jaxrl.run.overrides import resolve

    args = ["env=cartpole", "algo.network=gru", "num_envs=4", "algo.num_steps=32", "algo.num_minibatches=2"]
    config = resolve(args)
    agent = algos.get("ppo").make_agent(config.algo, jaxrl.envs.make("cartpole"), 4, 10)
    hp = HParams.from_config(config.algo)
    state, _ = agent.collect(agent.init(jax.random.key(0), hp), hp, np.int32(0))
    state, rollout = agent.collect(state, hp, np.int32(0))  # the second: it starts from a carry mid-episode
    traj = rollout.steps
    done = np.asarray(traj.terminated | traj.truncated)
    assert done.any() and np.abs(np.asarray(rollout.start_carry)).max() > 0
    h, carries = rollout.start_carry, []
    for t in range(32):
        carries.append(np.asarray(h))
        obs = prepare_obs(state, traj.obs[t], config.algo)
        h, _ = agent.network.apply(state.params, h, obs, None, method="step")
        h = reset_carry(h, jax.numpy.asarray(done[t]))
    fields = {k: v for k, v in traj._asdict().items() if k not in ("value", "next_value")}
    completed = agent.complete(state, {**fields, "carry": np.stack(carries), "cut": np.zeros((32, 4), bool)})
    np.testing.assert_allclose(np.asarray(completed.start_carry), np.asarray(rollout.start_carry), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(completed.steps.value), np.asarray(traj.value), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(completed.steps.next_value), np.asarray(traj.next_value), rtol=1e-5, atol=1e-6
    )
    want, _ = agent.learn(state, rollout, hp, np.int32(0))
    got, _ = agent.learn(state, completed, hp, np.int32(0))
    for a, b in zip(jax.tree.leaves(got.params), jax.tree.leaves(want.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


def test_a_recurrent_policy_trains_resumes_evaluates_and_exports_on_a_host_env(tmp_path, capsys):
    """PPO with a GRU torso through the pipeline: a stop and a resume, then
    evaluate (render included: the carry runs through the drawn episode),
    ``load_policy`` (a RecurrentPolicy) and the exported policy, run without
    jaxrl, acting the same over an episode's steps."""
    import jax

    import jaxrl
    from jaxrl import evaluate, export
    from jaxrl.run import training
    from jaxrl.run.overrides import resolve

    run_dir = tmp_path / "run"
    args = ["env=gymnasium:CartPole-v1", *TINY, "num_evals=4", "algo.network=gru", "algo.num_minibatches=2"]
    assert training.run(resolve([*args, f"run_dir={run_dir}", "plots=false"]), stop_after_chunks=2) == 0
    assert train.main([f"resume={run_dir}"]) == 0
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in rows if r["type"] == "update"] == list(range(1, 9))
    capsys.readouterr()
    assert evaluate.main([str(run_dir), "episodes=2", "render=true", "max_steps=40"]) == 0
    assert "frames" in capsys.readouterr().out and (run_dir / "episode-seed0.gif").exists()
    policy = jaxrl.load_policy(str(run_dir), seed=1)
    obs = np.random.default_rng(0).uniform(-0.2, 0.2, (6, 3, 4)).astype(np.float32)
    done = np.zeros((6, 3), bool)
    done[2, 1] = True  # env 1's episode ends at step 2: its carry restarts
    carry, actions = policy.init_carry((3,)), []
    for t in range(6):
        carry, action = policy(carry, obs[t], jax.random.key(0))
        actions.append(np.asarray(action).tolist())
        carry = jaxrl.nets.reset_carry(carry, jax.numpy.asarray(done[t]))
    assert export.main([str(run_dir), "seed=1"]) == 0
    shipped = subprocess.run(
        [
            sys.executable,
            "-c",
            EXPORTED_RECURRENT,
            str(run_dir / "export-seed1"),
            json.dumps(obs.tolist()),
            json.dumps(done.tolist()),
        ],
        env=user_env(),
        capture_output=True,
        text=True,
    )
    assert shipped.returncode == 0, shipped.stderr[-2000:]
    assert json.loads(shipped.stdout) == actions


@pytest.mark.parametrize("algo", ["a2c", "reinforce"])
def test_a2c_and_reinforce_learn_from_actors_steps_as_from_their_own_rollout(tmp_path, algo):
    """A2C's and REINFORCE's ``complete`` values the actors' steps with the
    learner's parameters as their in-program collect did, so ``learn`` gives the
    same parameters; a run on a host env trains lock-step (their host preset: no
    behaviour correction; the user may overlap), evaluates and names its
    learner's lever."""
    import jax

    import jaxrl.envs
    from jaxrl import algos
    from jaxrl.core.fields import HParams
    from jaxrl.run.host import lever_of
    from jaxrl.run.overrides import resolve

    config = resolve(["env=cartpole", f"algo={algo}", "num_envs=4", "algo.num_steps=32"])
    agent = algos.get(algo).make_agent(config.algo, jaxrl.envs.make("cartpole"), 4, 10)
    assert agent.fresh_episodes == (algo == "reinforce")  # REINFORCE counts each env's first episode
    hp = HParams.from_config(config.algo)
    state, rollout = agent.collect(agent.init(jax.random.key(0), hp), hp, np.int32(0))
    assert bool(np.any(np.asarray(rollout.steps.terminated)))  # ends for the advantages to stop at
    fields = {k: v for k, v in rollout.steps._asdict().items() if k not in ("value", "next_value")}
    completed = agent.complete(state, {**fields, "cut": np.zeros((32, 4), bool)})
    np.testing.assert_allclose(np.asarray(completed.steps.value), np.asarray(rollout.steps.value), rtol=1e-5)
    want, _ = agent.learn(state, rollout, hp, np.int32(0))
    got, _ = agent.learn(state, completed, hp, np.int32(0))
    for a, b in zip(jax.tree.leaves(got.params), jax.tree.leaves(want.params), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)

    code, summary, rows = _train(tmp_path, "env=gymnasium:JaxrlToy-v0", TOY, *TINY, f"algo={algo}")
    assert code == 0 and summary["algo"] == algo and len(summary["final_eval_return"]) == 2
    assert summary["pipeline"]["lag_max"] == 0  # the host preset: lock-step (no behaviour correction)
    assert resolve(["env=gymnasium:CartPole-v1", f"algo={algo}", "actor.sync=false"]).actor.sync is False
    assert [r["update"] for r in rows if r["type"] == "update"][-1] == 8
    assert lever_of("learner-bound", config).startswith("longer rollouts")  # one gradient step per rollout


def test_the_rollout_bound_lever_names_only_what_the_run_can_change():
    """Async vector envs are suggested for gymnasium's sync ones only: envpool steps
    its pool in its own threads, and async envs are already async."""
    from jaxrl.run.host import lever_of
    from jaxrl.run.overrides import resolve

    assert "actor.envs=async" in lever_of("rollout-bound", resolve(["env=gymnasium:CartPole-v1"]))
    for args in (["env=gymnasium:CartPole-v1", "actor.envs=async"], ["env=envpool:CartPole-v1"]):
        assert lever_of("rollout-bound", resolve(args)) == "more actor threads (actor.threads) or more envs (num_envs)"


@pytest.mark.parametrize("algo, n_step", [("sac", 1), ("td3", 1), ("td3", 3)])
def test_replay_learners_learn_from_actors_steps_as_from_their_own_and_warm_up_at_random(algo, n_step):
    """SAC's and TD3's ``complete`` turns the actors' steps ``[T, N]`` into the
    transitions their in-program collect stores (each bootstrapping from its
    pre-reset ``final_obs``; with ``algo.n_step`` > 1 the items that end n-step
    windows), so ``learn`` on them gives the same state bit for bit; the actors are handed the policy, the normalizer and whether the
    learner's buffer still lacks ``learning_starts`` (uniform actions then, the
    policy's sample — SAC — or ``clip(μ(s) + σ ε)`` — TD3 — after)."""
    import jax

    import jaxrl.envs
    from jaxrl import algos
    from jaxrl.algos.sac import _policy
    from jaxrl.core.fields import HParams
    from jaxrl.run.overrides import resolve

    args = ["env=pendulum", f"algo={algo}", "num_envs=4", "algo.num_steps=8", "algo.learning_starts=64"]
    config = resolve([*args, f"algo.n_step={n_step}"])
    env = jaxrl.envs.make("pendulum")
    agent = algos.get(algo).make_agent(config.algo, env, 4, 10)
    hp = HParams.from_config(config.algo)
    collect, state = jax.jit(agent.collect), agent.init(jax.random.key(0), hp)
    for update in range(23):  # after the 16-step warm-up, the 23rd batch ends at step 200: the time limit
        state, batch = collect(state, hp, np.int32(update))
    items = jax.tree.map(lambda x: np.asarray(x).reshape((8, 4) + x.shape[1:]), batch.items)
    done = np.asarray(batch.done)
    assert done.sum() == 4 and not items.terminated.any()
    steps = {
        "obs": items.obs,
        "action": items.action,
        "log_prob": np.zeros((8, 4), np.float32),
        "reward": items.reward,
        "terminated": items.terminated,
        "truncated": done & ~items.terminated,
        "final_obs": items.next_obs,
        "episode_return": np.asarray(batch.episode_return),
        "episode_length": np.asarray(batch.episode_length),
        "cut": np.zeros((8, 4), bool),  # every step follows its env's last
    }
    completed = agent.complete(state, steps)
    assert not np.asarray(completed.cut).any()
    for a, b in zip(jax.tree.leaves(completed._replace(cut=None)), jax.tree.leaves(batch), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    want, want_metrics = agent.learn(state, batch, hp, np.int32(0))
    got, got_metrics = agent.learn(state, completed, hp, np.int32(0))
    for a, b in zip(jax.tree.leaves((got, got_metrics)), jax.tree.leaves((want, want_metrics)), strict=True):
        if not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    # on a host env the buffer starts empty (the actors take the warm-up's steps)
    host_env = jaxrl.envs.make("pendulum")
    host_env.steps_in_program = False
    host = algos.get(algo).make_agent(config.algo, host_env, 4, 10)
    fresh = host.init(jax.random.key(0), hp)
    assert int(fresh.buffer.size) == 0 and host.warmup_steps == 64
    obs = np.asarray(jax.random.normal(jax.random.key(5), (256, 3)))
    view = host.acting(fresh, hp, np.int32(0))
    assert bool(view.random)
    # TD3's actors keep each env's exploration memory (its noise state and σ)
    carry = (host.explore_carry(fresh, (256,)),) if algo == "td3" else ()
    action, record = host.behave(view, *carry, obs, jax.random.key(1))[-2:]
    stored = np.asarray(record.action)
    assert stored.shape == (256, 1) and np.all(np.abs(stored) <= 1.0)
    assert 0.4 < np.mean(np.abs(stored)) < 0.6  # uniform on [-1, 1]: mean |a| = 1/2
    np.testing.assert_allclose(np.asarray(action), 2.0 * stored, rtol=1e-6)  # Pendulum's torque in [-2, 2]
    filled = host.warm(fresh, completed, hp, np.int32(0))[0]
    filled = host.warm(filled, completed, hp, np.int32(1))[0]  # 2 × 32 transitions: the warm-up is stored
    assert int(filled.buffer.size) == 64 and not bool(host.acting(filled, hp, np.int32(2)).random)
    jax.tree.map(np.testing.assert_array_equal, filled.actor_params, fresh.actor_params)  # no gradient step
    action, record = host.behave(host.acting(filled, hp, np.int32(2)), *carry, obs, jax.random.key(1))[-2:]
    key = jax.random.split(jax.random.key(1), 3 if algo == "td3" else 2)[1]
    if algo == "sac":
        expected = _policy(host.network[0], filled.actor_params, obs, env.action_space).sample_and_log_prob(key)[0]
    else:
        mean = host.network[0].apply(filled.actor_params, obs)
        expected = np.clip(mean + hp.exploration_noise * jax.random.normal(key, mean.shape), -1.0, 1.0)
        assert float(host.acting(filled, hp, np.int32(2)).sigma) == pytest.approx(0.1)
    np.testing.assert_array_equal(np.asarray(record.action), np.asarray(expected))


@pytest.mark.parametrize("algo", ["dqn", "c51", "rainbow"])
def test_value_learners_learn_from_actors_steps_as_from_their_own_and_act_on_their_schedule(algo):
    """DQN's, C51's and Rainbow's ``complete`` rebuilds the transitions their
    in-program collect stores, so ``learn`` gives the same state bit for bit
    (Rainbow: its 3-step windows through its prioritized buffer); on a host env
    the buffer starts empty, the actors act uniformly until it holds
    ``learning_starts``, then ε-greedily at the rate of the update they collect
    for (Rainbow: each env under its own layer noise)."""
    import jax

    import jaxrl.envs
    from jaxrl import algos
    from jaxrl.algos.qvalue import value_head
    from jaxrl.core.fields import HParams
    from jaxrl.rl.qlearning import epsilon_greedy, linear_epsilon
    from jaxrl.run.overrides import resolve

    args = ["env=cartpole", f"algo={algo}", "num_envs=4", "algo.num_steps=8", "algo.learning_starts=64"]
    config = resolve(args)
    assert config.algo.n_step == (3 if algo == "rainbow" else 1)
    agent = algos.get(algo).make_agent(config.algo, jaxrl.envs.make("cartpole"), 4, 10)
    hp = HParams.from_config(config.algo)
    state, batch = jax.jit(agent.collect)(agent.init(jax.random.key(0), hp), hp, np.int32(0))
    items = jax.tree.map(lambda x: np.asarray(x).reshape((8, 4) + x.shape[1:]), batch.items)
    done = np.asarray(batch.done)
    assert done.any() and (done & ~items.terminated).sum() == 0  # CartPole's random play ends by falling
    steps = {
        "obs": items.obs,
        "action": items.action,
        "log_prob": np.zeros((8, 4), np.float32),
        "reward": items.reward,
        "terminated": items.terminated,
        "truncated": done & ~items.terminated,
        "final_obs": items.next_obs,
        "episode_return": np.asarray(batch.episode_return),
        "episode_length": np.asarray(batch.episode_length),
        "cut": np.zeros((8, 4), bool),  # every step follows its env's last
    }
    completed = agent.complete(state, steps)
    assert not np.asarray(completed.cut).any()
    for a, b in zip(jax.tree.leaves(completed._replace(cut=None)), jax.tree.leaves(batch), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    cut = np.zeros((8, 4), bool)
    cut[3, 2] = True  # a time limit there: the item ends its episode without terminating
    truncated = agent.complete(state, {**steps, "truncated": steps["truncated"] | cut}).items
    np.testing.assert_array_equal(np.asarray(truncated.done), (done | cut).reshape(-1))
    np.testing.assert_array_equal(np.asarray(truncated.terminated), items.terminated.reshape(-1))
    want = agent.learn(state, batch, hp, np.int32(0))
    got = agent.learn(state, completed, hp, np.int32(0))
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        if not jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    host_env = jaxrl.envs.make("cartpole")
    host_env.steps_in_program = False
    host = algos.get(algo).make_agent(config.algo, host_env, 4, 10)
    fresh = host.init(jax.random.key(0), hp)
    ring = (lambda s: s.buffer.ring) if algo == "rainbow" else (lambda s: s.buffer)
    assert int(ring(fresh).size) == 0
    obs = np.asarray(jax.random.normal(jax.random.key(5), (512, 4))) * 0.1
    late = host.acting(fresh, hp, np.int32(5))  # ε is low by then; the empty buffer still means uniform actions
    action, _ = host.behave(late, np.zeros_like(obs), jax.random.key(1))  # greedy: one action for all
    assert bool(late.random) and float(late.epsilon) < 0.5 and 0.4 < np.mean(np.asarray(action)) < 0.6
    filled, metrics = host.warm(fresh, completed, hp, np.int32(0))
    filled, _ = host.warm(filled, completed, hp, np.int32(1))  # 2 × 32 transitions: the warm-up is stored
    assert int(ring(filled).size) == 64 and float(metrics.loss) == 0.0 and float(metrics.epsilon) == 1.0
    view = host.acting(filled, hp, np.int32(5))
    epsilon = linear_epsilon(np.float32(5 * 32), hp.eps_start, hp.eps_end, hp.exploration_fraction, 10 * 32)
    assert not bool(view.random) and float(view.epsilon) == pytest.approx(float(epsilon))
    action, record = host.behave(view, obs, jax.random.key(1))
    key_coin, key_action, key_noise = jax.random.split(jax.random.key(1), 3)
    coin = jax.random.uniform(key_coin, (512,))
    random_action = jax.random.randint(key_action, (512,), 0, 2)
    if algo == "rainbow":  # each env's values under its own noise sample
        keys = jax.random.split(key_noise, 512)
        net = host.network
        out = jax.vmap(lambda o, k: net.apply(filled.params, o[None], rngs={"noise": k})[0])(obs, keys)
    else:
        out = host.network.apply(filled.params, obs)
    expected = epsilon_greedy(value_head(config.algo).q(out), view.epsilon, coin, random_action)
    np.testing.assert_array_equal(np.asarray(action), np.asarray(expected))
    learned, metrics = host.learn(filled, completed, hp, np.int32(5))
    assert float(metrics.epsilon) == pytest.approx(float(epsilon))  # the rate the actors acted at


def test_the_docs_fast_td3_command_warms_up_then_learns_with_each_envs_own_noise(home):
    """TD3's fast preset through the pipeline (32 envs, each with its own σ
    per episode), at a CI budget: the first ⌈320 / 32⌉ = 10 updates only fill
    the buffer (random actions), every later one takes gradient steps; the run
    evaluates and summarizes like any other."""
    proc = run(DOCS_FAST_TD3, home, COMMANDS[DOCS_FAST_TD3])
    run_dir = run_dir_of(proc)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["algo"] == "td3" and all(np.isfinite(summary["final_eval_return"]))
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["algo"]["noise_scales"] == "per_env" and config["num_envs"] == 32
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if r["type"] == "update"]
    assert len(losses) == summary["num_updates"] and all(v == 0.0 for row in losses[:10] for v in row)
    assert all(v > 0 for row in losses[10:] for v in row)


def test_continuous_actions_then_evaluate_render_load_policy_and_export(tmp_path, capsys):
    """Pendulum-v1 (a Box action) trains; ``evaluate`` replays fresh episodes of
    every seed and writes evaluation.json; ``render=true`` draws one episode
    with the env's own frames, as long as gymnasium's own loop with the same
    policy; ``load_policy`` gives the trained member's actions within the
    bounds; ``export`` ships them, run without jaxrl."""
    import jax
    from PIL import Image

    import jaxrl
    from jaxrl import evaluate, export

    code, summary, _ = _train(tmp_path, "env=gymnasium:Pendulum-v1", *TINY)
    assert code == 0 and all(np.isfinite(summary["final_eval_return"]))
    run_dir = tmp_path / "run"
    capsys.readouterr()
    assert evaluate.main([str(run_dir), "episodes=3", "max_steps=50"]) == 0
    result = json.loads((run_dir / "evaluation.json").read_text())
    assert [s["seed"] for s in result["seeds"]] == [0, 1] and all(len(s["returns"]) == 3 for s in result["seeds"])
    assert all(-50 * 16.3 <= r <= 0 for s in result["seeds"] for r in s["returns"])  # Pendulum: reward in [−16.3, 0]
    act = jaxrl.load_policy(str(run_dir), seed=1)
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    action = np.asarray(act(obs, jax.random.key(0)))
    assert action.shape == (5, 1) and np.all(np.abs(action) <= 2.0)
    np.testing.assert_array_equal(action, np.asarray(act(obs, jax.random.key(1))))  # deterministic

    # render: the first seed's episode (Pendulum: 200 steps) against gymnasium's own loop
    assert evaluate.main([str(run_dir), "seed=1", "episodes=1", "render=true"]) == 0
    shown = json.loads((run_dir / "evaluation.json").read_text())["render"]
    env = gym.make("Pendulum-v1")
    o, _ = env.reset(seed=1)
    total, steps, done = 0.0, 0, False
    while not done:
        o, r, terminated, truncated, _ = env.step(np.asarray(act(o[None].astype(np.float32), jax.random.key(0)))[0])
        total, steps, done = total + r, steps + 1, terminated or truncated
    assert shown["frames"] == steps + 1 == 201 and shown["return"] == pytest.approx(total, rel=1e-5)
    with Image.open(shown["path"]) as gif:
        assert gif.n_frames == 201 and gif.size == (500, 500)  # Pendulum's own 500×500 frames

    # export: the artifact, run with jax and numpy only, gives load_policy's actions
    capsys.readouterr()
    assert export.main([str(run_dir), "seed=1"]) == 0
    out = run_dir / "export-seed1"
    spec = json.loads((out / "policy.json").read_text())
    assert spec["env"] == "gymnasium:Pendulum-v1" and spec["obs_shape"] == [3] and spec["seed"] == 1
    assert spec["action"] == {"kind": "continuous", "shape": [1], "low": [-2.0], "high": [2.0]}
    np.testing.assert_allclose(_shipped(out, obs), action, rtol=1e-6, atol=1e-6)


@pytest.mark.filterwarnings("error::UserWarning")  # gymnasium's warning of the missing mode is not shown
def test_render_of_an_env_without_frames_is_one_line_and_writes_nothing(tmp_path, capsys):
    from jaxrl import evaluate

    code, _, _ = _train(tmp_path, "env=gymnasium:JaxrlToy-v0", TOY, *TINY)
    assert code == 0
    capsys.readouterr()
    assert evaluate.main([str(tmp_path / "run"), "render=true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: render=true: gymnasium:JaxrlToy-v0 cannot draw"), err
    assert "fix: drop render=true" in err[0] and not (tmp_path / "run" / "evaluation.json").exists()


def test_lock_step_runs_repeat_exactly(tmp_path):
    """actor.sync=true: every trajectory is collected with the parameters of the
    update before it, so a run's numbers repeat (timings aside)."""
    args = ["env=gymnasium:JaxrlToy-v0", TOY, *TINY, "actor.sync=true"]
    _, _, first = _train(tmp_path / "a", *args)
    _, _, second = _train(tmp_path / "b", *args)
    drop = {"pipeline", "chunk_time_s", "env_steps_per_s"}
    assert [{k: v for k, v in r.items() if k not in drop} for r in first] == [
        {k: v for k, v in r.items() if k not in drop} for r in second
    ]


def test_complete_values_the_steps_with_the_learners_parameters():
    """The learner's batch: V(s_t) and V(final_obs_t) from its own parameters,
    behaviour log-probs as the actor recorded them."""
    import jax

    from jaxrl.algos.actor_critic import ActorCritic, value_of
    from jaxrl.run import host as host_run
    from jaxrl.run.overrides import resolve

    run = host_run.prepare_host(resolve(["env=gymnasium:JaxrlToy-v0", TOY, "seeds=1", "num_envs=2"]))
    agent = run.agent
    state = agent.init(jax.random.key(0), jax.tree.map(lambda x: x[0], run.hparams))
    obs = np.random.default_rng(0).uniform(-1, 1, (3, 2, 4)).astype(np.float32)
    action, record = agent.behave(state, obs[0], jax.random.key(1))
    assert action.shape == (2,) and record.log_prob.shape == (2,)
    steps = {
        "obs": obs,
        "action": np.zeros((3, 2), np.int32),
        "log_prob": np.full((3, 2), -0.5, np.float32),
        "reward": np.ones((3, 2), np.float32),
        "terminated": np.zeros((3, 2), bool),
        "truncated": np.zeros((3, 2), bool),
        "final_obs": obs[::-1],
        "episode_return": np.zeros((3, 2), np.float32),
        "episode_length": np.zeros((3, 2), np.int32),
    }
    batch = agent.complete(state, steps)
    net = agent.network

    def v(x):
        return np.asarray(value_of(state, net.apply(state.params, x, method=ActorCritic.value), run.config.algo))

    np.testing.assert_allclose(np.asarray(batch.steps.value), v(obs), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(batch.steps.next_value), v(obs[::-1]), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(batch.steps.log_prob), steps["log_prob"])


@pytest.mark.parametrize("scales", ["fixed", "per_env"])
def test_td3s_actors_keep_each_envs_noise_and_scale_through_its_episodes(scales):
    """On host envs TD3's actors keep each env's exploration memory (the actors
    restart it after an episode's end, as here): the AR(1) noise ``n_t = ρ n_{t−1}
    + √(1 − ρ²) ε_t`` from 0 at an episode's start — so at its k-th step
    ``Var n = 1 − ρ^{2k}`` and each step regresses on the last with slope ρ —
    and, with ``noise_scales=per_env``, the env's σ: constant through an episode,
    drawn uniformly from ``[noise_min, σ]`` at its start. The warm-up's uniform
    steps leave the memory as it was."""
    import jax
    import jax.numpy as jnp

    import jaxrl.envs
    from jaxrl import algos
    from jaxrl.core.fields import HParams
    from jaxrl.run.overrides import resolve

    rho, sigma, low = 0.9, 0.05, 0.01
    args = ["env=pendulum", "algo=td3", "num_envs=4", f"algo.noise_correlation={rho}", f"algo.noise_scales={scales}"]
    config = resolve([*args, f"algo.exploration_noise={sigma}", f"algo.noise_min={low}"])
    env = jaxrl.envs.make("pendulum")
    env.steps_in_program = False
    agent = algos.get("td3").make_agent(config.algo, env, 4, 10)
    hp = HParams.from_config(config.algo)
    state = agent.init(jax.random.key(0), hp)
    n, steps = 2048, 30
    lengths = 4 + np.arange(n) % 9  # env i's episodes last 4–12 steps
    view = agent.acting(state, hp, np.int32(0))._replace(random=jnp.asarray(False))
    # σ and ρ are the update's hyperparameters (a PBT step's changes reach the actors)
    moved = agent.acting(state, hp.replace(exploration_noise=np.float32(0.3), noise_correlation=np.float32(0.5)), 0)
    assert (float(moved.sigma), float(moved.rho)) == (pytest.approx(0.3), pytest.approx(0.5))
    behave = jax.jit(agent.behave)
    obs = np.zeros((n, 3), np.float32)  # the untrained actor's μ(0) = 0: the action is σ n_t, unclipped
    assert np.all(np.asarray(agent.network[0].apply(state.actor_params, obs)) == 0)
    start = np.asarray(agent.explore_carry(state, (n,)))
    carry, rows = start, []
    for t in range(steps):
        warm = view._replace(random=jnp.asarray(True))
        kept, _, record = behave(warm, carry, obs, jax.random.key(10_000 + t))
        np.testing.assert_array_equal(np.asarray(kept), carry)  # the warm-up leaves it
        assert np.abs(np.asarray(record.action)).mean() > 0.4  # uniform on [-1, 1]
        carry, _, record = behave(view, carry, obs, jax.random.key(t))
        carry = np.asarray(carry)
        noise, scale = carry[:, 0], carry[:, 1]
        np.testing.assert_allclose(np.asarray(record.action), (scale * noise)[:, None], rtol=1e-5, atol=1e-7)
        rows.append((t % lengths + 1, noise, scale))  # (the step's index in its episode, n_t, σ)
        carry = np.where((t % lengths == lengths - 1)[:, None], start, carry)  # the episode ended: restart
    k = np.stack([r[0] for r in rows])
    noise, scale = np.stack([r[1] for r in rows]), np.stack([r[2] for r in rows])
    for step in range(1, 9):
        assert np.var(noise[k == step]) == pytest.approx(1 - rho ** (2 * step), rel=0.12), step
    later = k[1:] > 1  # a step and the one before it, in one episode
    slope = np.sum(noise[1:][later] * noise[:-1][later]) / np.sum(noise[:-1][later] ** 2)
    assert slope == pytest.approx(rho, abs=0.02)
    if scales == "fixed":
        np.testing.assert_array_equal(scale, np.float32(sigma))
        return
    np.testing.assert_array_equal(scale[1:][later], scale[:-1][later])  # one σ per episode
    assert low <= scale.min() and scale.max() <= sigma
    firsts = scale[k == 1]
    assert np.mean(firsts) == pytest.approx((low + sigma) / 2, rel=0.03)  # uniform on [noise_min, σ]
    assert np.var(firsts) == pytest.approx((sigma - low) ** 2 / 12, rel=0.1)
    assert np.mean(scale[1:][k[1:] == 1] != scale[:-1][k[1:] == 1]) > 0.99  # redrawn at each start
