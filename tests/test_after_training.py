"""Using what was trained: evaluate, render, load_policy, export, dashboards."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrl
from jaxrl import evaluate, export, train

ARGS = [
    "env=cartpole",
    "seeds=2",
    "num_envs=8",
    "total_timesteps=30000",
    "num_evals=3",
    "eval.episodes=4",
    "progress=false",
    "plots=false",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("after") / "run"
    os.environ["WANDB_MODE"] = "offline"
    os.environ.setdefault("WANDB_SILENT", "true")
    assert train.main([*ARGS, f"run_dir={path}", "logger=tensorboard+wandb"]) == 0
    return path


def test_evaluate_reproduces_the_final_evaluation(run_dir, capsys):
    assert evaluate.main([str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "across 2 seeds" in out
    result = json.loads((run_dir / "evaluation.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert [s["mean"] for s in result["seeds"]] == summary["final_eval_return"]
    assert result["episodes"] == 4


def test_evaluate_more_episodes_one_seed_sampled(run_dir, capsys):
    assert evaluate.main([str(run_dir), "episodes=20", "seed=1", "deterministic=false"]) == 0
    result = json.loads((run_dir / "evaluation.json").read_text())
    assert [s["seed"] for s in result["seeds"]] == [1] and len(result["seeds"][0]["returns"]) == 20
    assert result["deterministic"] is False


def test_render_writes_a_gif_with_one_frame_per_step(run_dir, capsys):
    from PIL import Image

    assert evaluate.main([str(run_dir), "seed=0", "render=true"]) == 0
    result = json.loads((run_dir / "evaluation.json").read_text())
    gif = result["render"]["path"]
    assert os.path.getsize(gif) > 10_000
    with Image.open(gif) as image:
        frames = image.n_frames
    # CartPole pays 1 per step: initial frame + one per step of the episode
    assert frames == result["render"]["frames"] == int(result["render"]["return"]) + 1


def test_load_policy_matches_the_network_argmax(run_dir):
    from jaxrl.policy import open_run

    act = jaxrl.load_policy(str(run_dir), seed=1)
    obs = jax.random.uniform(jax.random.key(0), (64, 4), minval=-0.2, maxval=0.2)
    actions = np.asarray(jax.jit(act)(obs, jax.random.key(1)))
    run = open_run(str(run_dir))
    params = jax.tree.map(lambda x: x[1], run.carry.states.agent.params)  # seed 1 is member 1
    logits, _ = run.trainer.agent.network.apply(params, obs)
    np.testing.assert_array_equal(actions, np.argmax(np.asarray(logits), axis=-1))
    assert actions.shape == (64,) and set(np.unique(actions)) <= {0, 1}
    single = act(obs[0], jax.random.key(2))
    assert single.shape == () and int(single) == actions[0]


RUNNER = r"""
import json, sys
sys.modules["jaxrl"] = None  # prove that jaxrl is not needed
import jax, numpy as np
here = sys.argv[1]
exported = jax.export.deserialize(open(f"{here}/policy.jaxexport", "rb").read())
params = np.load(f"{here}/params.npz")
leaves = [params[f"p{i:04d}"] for i in range(len(params.files))]
obs = np.asarray(json.loads(sys.argv[2]), np.float32)
print(json.dumps(np.asarray(exported.call(leaves, obs, np.zeros(2, np.uint32))).tolist()))
"""


def test_exported_policy_runs_without_jaxrl(run_dir, tmp_path):
    out = tmp_path / "exported"
    assert export.main([str(run_dir), "seed=1", f"out={out}"]) == 0
    spec = json.loads((out / "policy.json").read_text())
    assert spec["obs_shape"] == [4] and spec["action"] == {"kind": "discrete", "n": 2}
    obs = np.asarray(jax.random.uniform(jax.random.key(3), (17, 4), minval=-0.2, maxval=0.2))
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, str(out), json.dumps(obs.tolist())],
        capture_output=True,
        text=True,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
        cwd=str(tmp_path),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    exported_actions = json.loads(proc.stdout)
    expected = np.asarray(jaxrl.load_policy(str(run_dir), seed=1)(jnp.asarray(obs), jax.random.key(0)))
    assert exported_actions == expected.tolist()
    assert (out / "run_policy.py").is_file()


def test_tensorboard_event_files_hold_the_expected_tags(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in (
        "eval/return/seed_0",
        "eval/return/seed_1",
        "eval/return_iqm",
        "train/episode_return/seed_0",
        "train/loss/seed_1",
        "train/episode_return_iqm",
    ):
        assert tag in tags, tag
    assert len(events.Scalars("eval/return_iqm")) == 3  # one per evaluation point
    summary = json.loads((run_dir / "summary.json").read_text())
    last = events.Scalars("eval/return/seed_1")[-1]
    assert last.value == pytest.approx(summary["final_eval_return"][1]) and last.step == summary["total_timesteps"]


def test_wandb_offline_run_is_written(run_dir):
    runs = [p for p in (run_dir / "wandb").iterdir() if p.name.startswith("offline-run-")]
    assert len(runs) == 1
    files = list(runs[0].glob("*.wandb"))
    assert files and files[0].stat().st_size > 1000


@pytest.mark.parametrize(
    "cli, argv, hint",
    [
        (evaluate.main, ["{missing}"], "does not exist"),
        (evaluate.main, ["{run}", "seed=7"], "is not in this run"),
        (evaluate.main, ["{run}", "episodes=0"], "positive integer"),
        (evaluate.main, ["{run}", "colour=red"], "unknown option"),
        (export.main, ["{missing}"], "does not exist"),
        (export.main, ["{run}", "seed=9"], "is not in this run"),
    ],
)
def test_bad_input_exits_2(run_dir, tmp_path, capsys, cli, argv, hint):
    argv = [a.format(missing=tmp_path / "nope", run=run_dir) for a in argv]
    assert cli(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and hint in err[0], err
    with pytest.raises(jaxrl.ConfigError):
        jaxrl.load_policy(str(tmp_path / "nope"))
