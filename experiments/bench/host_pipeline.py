"""The actor–learner pipeline on gymnasium's CartPole-v1, side by side in one script:

* overlapped (``actor.max_lag=1``, the default) against lock-step (``actor.sync=true``):
  the gain from decoupling acting and learning;
* one actor thread against two; gymnasium's async vector env (one process per
  env) against its sync one; an envpool pool (``env=envpool:CartPole-v1``, C++
  threads) in the same pipeline, when envpool is installed;
* the same preset in-program on gymnax's CartPole (``env=cartpole``): the cost of
  leaving JAX;
* the verdict on a deliberately slow env (2 ms per step: rollout-bound) and a
  deliberately heavy learner (2048 epochs: learner-bound).

Every run goes through the CLI (``python -m jaxrl.train``, its default device
layout); figures come from each run's ``summary.json``. On a 2-core machine
the actor threads, the host envs and XLA share the two cores.

    python experiments/bench/host_pipeline.py [--seeds 4] [--steps 200000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def train(args: list[str], root: str, name: str) -> dict:
    run_dir = os.path.join(root, name)
    env = {**os.environ, "PYTHONPATH": REPO}
    proc = subprocess.run(
        [sys.executable, "-m", "jaxrl.train", *args, f"run_dir={run_dir}", "plots=false", "progress=false"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    with open(os.path.join(run_dir, "summary.json")) as f:
        return json.load(f)


def row(name: str, s: dict) -> str:
    p = s.get("pipeline") or {}
    verdict = p.get("verdict", "in-program")
    lag = f"{p['lag_min']}–{p['lag_max']}" if p else "–"
    return (
        f"| {name} | {s['iqm']:.1f} [{s['ci95'][0]:.1f}, {s['ci95'][1]:.1f}] | {s['env_steps_per_s'] or 0:,.0f} | "
        f"{s['train_time_s']:.1f} | {lag} | {verdict} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200_000)
    opts = parser.parse_args()
    base = [f"seeds={opts.seeds}", f"total_timesteps={opts.steps}"]
    toy = ["env.module=tests.toy_host_envs", "seeds=1", "total_timesteps=2048", "num_evals=1", "eval.episodes=1"]
    runs = [
        ("gymnasium:CartPole-v1, overlapped (max_lag=1)", ["env=gymnasium:CartPole-v1", *base]),
        ("gymnasium:CartPole-v1, lock-step (actor.sync=true)", ["env=gymnasium:CartPole-v1", *base, "actor.sync=true"]),
        ("gymnasium:CartPole-v1, 2 actor threads", ["env=gymnasium:CartPole-v1", *base, "actor.threads=2"]),
        (
            "gymnasium:CartPole-v1, async envs (actor.envs=async)",
            ["env=gymnasium:CartPole-v1", *base, "actor.envs=async"],
        ),
        *(
            [("envpool:CartPole-v1, overlapped (max_lag=1)", ["env=envpool:CartPole-v1", *base])]
            if importlib.util.find_spec("envpool")
            else []
        ),
        ("gymnax CartPole in-program (env=cartpole)", ["env=cartpole", *base]),
        ("slow env (2 ms per step)", ["env=gymnasium:JaxrlSlow-v0", *toy, "num_envs=2", "algo.num_steps=32"]),
        (
            "heavy learner (2048 epochs × 8 minibatches)",
            [
                "env=gymnasium:JaxrlToy-v0",
                *toy,
                "num_envs=1",
                "algo.num_steps=64",
                "algo.update_epochs=2048",
                "algo.num_minibatches=8",
            ],
        ),
    ]
    print("| run | final IQM [95% CI] | env steps/s (all seeds) | train s | policy lag | verdict |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as root:
        for i, (name, args) in enumerate(runs):
            summary = train(args, root, f"run{i}")
            print(row(name, summary), flush=True)


if __name__ == "__main__":
    main()
