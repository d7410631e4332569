"""Env runners on Ray (``actor=ray``) against the thread pipeline, on one machine.

A local two-node Ray cluster (``ray.cluster_utils.Cluster``, ``--cpus`` logical
CPUs per node) is started here; every run goes through the CLI
(``python -m jaxrl.train``) and joins it with ``actor.address``. Rows:

* gymnasium's CartPole-v1 (a cheap env: what the transport costs), the CartPole
  preset, with 1 actor thread, then 1, 2 and 4 Ray env runners;
* a deliberately slow env that keeps its core busy (``JaxrlBusy-v0``: 1 ms of
  Python work per step, the interpreter held), where threads cannot help and
  runners should scale until the cores run out: 1 and 2 threads, 1, 2 and 4 runners.

Per run: env steps/s of training (all seeds), training seconds, the runners'
parameter broadcast (one runner's fetch of the object the learner put) and
trajectory transfer (the learner's fetch of one runner's trajectory) per
update, the policy lag, the verdict. The learner, the runners, their envs and
XLA all share this machine's cores: on 2 cores nothing can scale past 2.

    python experiments/bench/ray_runners.py [--seeds 4] [--steps 100000] [--cpus 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from host_pipeline import train  # experiments/bench/host_pipeline.py: one CLI run, its summary.json


def row(name: str, s: dict, base: float) -> str:
    p = s["pipeline"]
    fetch = f"{1000 * p['fetch_s_per_runner']:.1f}" if "fetch_s_per_runner" in p else "–"
    transfer = f"{1000 * p['transfer_s_per_runner']:.2f}" if "transfer_s_per_runner" in p else "–"
    rate = s["env_steps_per_s"] or 0.0
    return (
        f"| {name} | {s['iqm']:.1f} | {rate:,.0f} | {rate / base:.2f}× | {s['train_time_s']:.1f} | {fetch} | "
        f"{transfer} | {p['lag_min']}–{p['lag_max']} (mean {p['lag_mean']:.2f}) | {p['verdict']} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100_000, help="CartPole env steps per seed")
    parser.add_argument("--cpus", type=int, default=2, help="logical CPUs of each of the two Ray nodes")
    parser.add_argument("--quick", action="store_true", help="a dry run: tiny budgets, every row")
    opts = parser.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": opts.cpus})
    cluster.add_node(num_cpus=opts.cpus)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    on_ray = ["actor=ray", f"actor.address={cluster.address}", "actor.strategy=SPREAD"]
    steps = 4096 if opts.quick else opts.steps
    cartpole = ["env=gymnasium:CartPole-v1", f"seeds={opts.seeds}", f"total_timesteps={steps}"]
    cartpole += ["num_evals=1", "eval.episodes=4"]
    busy = ["env=gymnasium:JaxrlBusy-v0", "env.module=tests.toy_host_envs", "seeds=1", "num_envs=8"]
    busy += ["algo.num_steps=32", f"total_timesteps={512 if opts.quick else 8192}", "num_evals=1", "eval.episodes=1"]
    groups = [
        (
            "CartPole-v1",
            [
                ("1 actor thread", [*cartpole]),
                ("1 Ray runner", [*cartpole, *on_ray, "actor.runners=1"]),
                ("2 Ray runners", [*cartpole, *on_ray, "actor.runners=2"]),
                ("4 Ray runners", [*cartpole, *on_ray, "actor.runners=4", "actor.cpus_per_runner=0.5"]),
            ],
        ),
        (
            "busy env (1 ms of Python per step)",
            [
                ("1 actor thread", [*busy]),
                ("2 actor threads", [*busy, "actor.threads=2"]),
                ("1 Ray runner", [*busy, *on_ray, "actor.runners=1"]),
                ("2 Ray runners", [*busy, *on_ray, "actor.runners=2"]),
                ("4 Ray runners", [*busy, *on_ray, "actor.runners=4", "actor.cpus_per_runner=0.5"]),
            ],
        ),
    ]
    print(f"two Ray nodes of {opts.cpus} logical CPUs on {os.cpu_count()} cores; {opts.seeds} seeds on CartPole\n")
    header = (
        "| run | final IQM | env steps/s | vs 1 thread | train s | broadcast ms | transfer ms | policy lag | verdict |\n"
        "|---|---|---|---|---|---|---|---|---|"
    )
    try:
        with tempfile.TemporaryDirectory() as root:
            for title, runs in groups:
                print(f"{title}\n{header}", flush=True)
                base = None
                for name, args in runs:
                    summary = train(args, root, f"{title[:4]}-{name}".replace(" ", "-"))
                    base = base or summary["env_steps_per_s"]
                    print(row(name, summary, base), flush=True)
                print()
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
