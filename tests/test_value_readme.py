"""The docs' PQN, DQN, C51, QR-DQN, IQN, Rainbow and TD3 commands, the way a user runs them (the CLI's
default device layout, runs under the user's runs/): learning at CI budgets,
then evaluate, load_policy and export of what they trained."""

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import EXPORTED, check_train_run, run, user_env
from tests.test_readme import COMMANDS, floors_apply

PQN_CARTPOLE = "python -m jaxrl.train env=cartpole algo=pqn seeds=16"
TD3_PENDULUM = "python -m jaxrl.train env=pendulum algo=td3 seeds=4"
C51_CARTPOLE = "python -m jaxrl.train env=cartpole algo=c51 seeds=16"
VALUE = [
    c
    for c in COMMANDS
    if c.startswith("python -m jaxrl.train")
    and not re.search(r"env=(gymnasium|envpool):", c)  # host envs: tests/test_host_envs.py, tests/test_envpool.py
    and (
        re.search(r"algo=(pqn|dqn|c51|qrdqn|iqn|rainbow|td3)\b", c)
        or "algo.critic=categorical" in c
        or "preset=fast" in c
    )
]
NOISE_SWEEP = next(c for c in COMMANDS if c.startswith("python -m jaxrl.sweep") and "algo=td3" in c)
# at the CI budgets of COMMANDS: (statistic, floor) each run must reach ("min": every seed's final
# return). Random play: CartPole ≈ 20, Pendulum ≈ −1200, Acrobot −500, MountainCar −200 (the flag
# never reached), MountainCarContinuous ≈ −30 (0: standing still), Breakout 0.37.
LEARNS = {
    PQN_CARTPOLE: ("iqm", 475.0),  # the preset's full budget, 4 seeds: 4 / 4 solved (16 / 16 in docs/value-based.md)
    TD3_PENDULUM: ("iqm", -200.0),  # the preset's full budget: −155 (docs/value-based.md)
    "python -m jaxrl.train env=cartpole algo=dqn seeds=16": ("iqm", 100.0),
    "python -m jaxrl.train env=acrobot algo=pqn seeds=8": ("iqm", -100.0),  # 8 seeds: −84
    "python -m jaxrl.train env=mountaincar algo=pqn seeds=8": ("min", -150.0),  # seeds 0, 1: −104, −99
    "python -m jaxrl.train env=mountaincar-continuous algo=td3 seeds=8": ("min", 50.0),  # ≈ 90 from 18k steps
    "python -m jaxrl.train env=Breakout-MinAtar algo=pqn seeds=2": ("iqm", 2.0),
    C51_CARTPOLE: ("iqm", 100.0),  # 60k steps: 170, 500
    "python -m jaxrl.train env=cartpole algo=qrdqn seeds=16": ("iqm", 200.0),  # the preset's budget: 484, 271
    "python -m jaxrl.train env=acrobot algo=qrdqn seeds=8": ("iqm", -300.0),  # 10k steps: −97, −169
    "python -m jaxrl.train env=mountaincar algo=qrdqn seeds=16": ("iqm", -150.0),  # 4 seeds: −108, −100, −103, −131
    # every seed at the flag (random play: −200); 2 seeds, one per device: −152, −172 (4 seeds, 2 per device:
    # −102, −121, −118, −118)
    "python -m jaxrl.train env=mountaincar algo=c51 seeds=4": ("min", -190.0),
    "python -m jaxrl.train env=cartpole algo=iqn seeds=8": ("iqm", 60.0),  # 40k steps: 119, 98
    "python -m jaxrl.train env=cartpole algo=rainbow seeds=16": ("iqm", 200.0),  # 30k steps: 498, 500
    "python -m jaxrl.train env=acrobot algo=rainbow seeds=8": ("iqm", -300.0),  # 30k steps: −73, −99
    "python -m jaxrl.train env=pendulum algo=td3 preset=fast seeds=4": ("iqm", -900.0),  # random play ≈ −1200
    "python -m jaxrl.train env=pendulum algo=sac preset=fast seeds=4": ("iqm", -900.0),
    # TD3's categorical critic at 8k steps (random play ≈ −1200; every seed ≥ −208 from 8.7k on)
    "python -m jaxrl.train env=pendulum algo=td3 seeds=4 algo.critic=categorical algo.v_min=-1600 algo.v_max=0": (
        "iqm",
        -400.0,
    ),
    "python -m jaxrl.train env=pendulum algo=sac seeds=4 algo.critic=categorical algo.v_min=-1600 algo.v_max=0": (
        "iqm",
        -400.0,
    ),
}


def _members(command: str) -> int:
    seeds = int(COMMANDS[command].get("seeds", 0)) if COMMANDS[command] else 0
    return seeds or int(re.search(r"seeds=(\d+)", command).group(1))


def _train(command: str, home) -> tuple:
    run_dir, summary = check_train_run(run(command, home, COMMANDS[command]), _members(command))
    final = np.asarray(summary["final_eval_return"], float)
    assert np.all(np.isfinite(final)), final
    if command in LEARNS and floors_apply(command):
        stat, floor = LEARNS[command]
        value = float(final.min()) if stat == "min" else summary[stat]
        assert value >= floor, (stat, value, summary["final_eval_return"])
    with open(run_dir / "metrics.jsonl") as f:
        update = next(r for r in map(json.loads, f) if r["type"] == "update")
    from jaxrl import algos

    assert set(algos.get(re.search(r"algo=(\w+)", command).group(1)).metrics) <= set(update)
    if "algo.critic=categorical" in command or "preset=fast" in command:  # the support holds Pendulum's returns
        assert all(0.0 <= c < 0.05 for c in update["clipped"]), update["clipped"]
    return run_dir, summary


@pytest.fixture(scope="module")
def pqn_run(home):
    return _train(PQN_CARTPOLE, home)


@pytest.fixture(scope="module")
def td3_run(home):
    return _train(TD3_PENDULUM, home)


@pytest.fixture(scope="module")
def c51_run(home):
    return _train(C51_CARTPOLE, home)


@pytest.mark.parametrize("command", [c for c in VALUE if c not in (PQN_CARTPOLE, TD3_PENDULUM, C51_CARTPOLE)])
def test_value_presets_learn(command, home):
    _train(command, home)


def test_the_noise_sweep_compares_white_and_correlated_noise(home):
    """The docs' TD3 sweep: σ × ρ (white noise among them) in one program per
    static setting, a report row per configuration."""
    proc = run(NOISE_SWEEP, home, COMMANDS[NOISE_SWEEP])
    sweep_dir = Path(re.findall(r"^sweep directory: (.+)$", proc.stderr, re.M)[-1])
    rows = json.loads((sweep_dir / "report.json").read_text())["rows"]
    assert len(rows) == 6
    assert {
        (round(r["hparams"]["exploration_noise"], 4), round(r["hparams"]["noise_correlation"], 4)) for r in rows
    } == {(s, r) for s in (0.5, 1.0) for r in (0.0, 0.9, 0.98)}
    assert all(r["runs"] == 2 and np.isfinite(r["iqm"]) for r in rows)


@pytest.mark.parametrize("which", ["pqn", "c51", "td3"])
def test_evaluate_load_policy_and_export_reproduce_the_trainer(which, request, home):
    """evaluate replays the in-program deterministic evaluation exactly;
    load_policy is the greedy action (argmax Q; C51: of the distribution's
    mean on its support) or the noise-free actor; the
    exported artifact, run without jaxrl, gives load_policy's actions."""
    import jax

    import jaxrl
    from jaxrl.run.policy import open_run

    run_dir, summary = request.getfixturevalue(f"{which}_run")
    proc = run("python -m jaxrl.evaluate RUN_DIR", home, RUN_DIR=str(run_dir))
    assert "note:" not in proc.stderr  # same layout as training
    result = json.loads((run_dir / "evaluation.json").read_text())
    assert [s["mean"] for s in result["seeds"]] == summary["final_eval_return"]

    dim = 3 if which == "td3" else 4
    obs = jax.random.uniform(jax.random.key(0), (64, dim), minval=-0.5, maxval=0.5)
    act = jaxrl.load_policy(str(run_dir), seed=1)
    actions = np.asarray(jax.jit(act)(obs, jax.random.key(1)))
    trained = open_run(str(run_dir))
    state = jax.tree.map(lambda x: x[1], trained.carry.states.agent)  # seed 1 is member 1
    if which == "pqn":
        q = trained.trainer.agent.network.apply(state.params, obs)
        np.testing.assert_array_equal(actions, np.argmax(np.asarray(q), axis=-1))
    elif which == "c51":
        logits = np.asarray(trained.trainer.agent.network.apply(state.params, obs), np.float64)  # [64, 2, atoms]
        algo = trained.config.algo
        z = np.linspace(algo.v_min, algo.v_max, algo.atoms)
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        q = (probs / probs.sum(-1, keepdims=True)) @ z
        np.testing.assert_array_equal(actions, np.argmax(q, axis=-1))
    else:
        actor, _ = trained.trainer.agent.network
        mean = np.asarray(actor.apply(state.actor_params, obs))  # in [−1, 1]; Pendulum's bounds are ±2
        np.testing.assert_allclose(actions, 2.0 * mean, rtol=1e-6, atol=1e-6)
        assert actions.shape == (64, 1) and np.all(np.abs(actions) <= 2.0)
    assert len(np.unique(actions.round(3))) > 1  # the observations exercise the policy

    run("python -m jaxrl.export RUN_DIR seed=1", home, RUN_DIR=str(run_dir))
    out = run_dir / "export-seed1"
    spec = json.loads((out / "policy.json").read_text())
    assert spec["obs_shape"] == [dim] and spec["seed"] == 1
    # what acting reads only: no target network, critic, optimizer state or replay buffer
    shipped = [n for n in spec["params"] if not n.startswith("obs_stats/")]
    assert shipped and all(n.startswith("actor_params/" if which == "td3" else "params/") for n in shipped), shipped
    exported = subprocess.run(
        [sys.executable, "-c", EXPORTED, str(out), json.dumps(np.asarray(obs).tolist())],
        env=user_env(),
        capture_output=True,
        text=True,
        cwd=home,
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    np.testing.assert_allclose(np.asarray(json.loads(exported.stdout)), actions, rtol=1e-6, atol=1e-6)
