"""Collect experiments/results/bench_*.json into one Markdown file (bench.md),
the tables the README's Performance section reproduces.

    python experiments/bench/table.py
"""

from __future__ import annotations

import json
import os

RESULTS = "experiments/results"


def _load(name: str):
    path = os.path.join(RESULTS, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _fmt(x) -> str:
    if isinstance(x, float):
        return f"{x:,.2f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def _table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return out + [""]


def main() -> None:
    lines = ["# Benchmarks", ""]
    peers = _load("bench_peers.json")
    if peers:
        lines += [f"Machine: {peers['machine']}", "", "## Side by side with peers (same process)", ""]
        lines += [
            "Compile in the same process: jaxrl compiles first. Fresh process: each side's"
            " one-device program compiled alone in a new process, medians of alternated runs.",
            "",
        ]
        rows = []
        for key in ("cartpole_ppo", "pendulum_sac", "cartpole_dqn", "cartpole_pqn", "pendulum_td3"):
            for r in peers.get(key, []):
                a, b = r["jaxrl"], r["rejax"]
                variants = [("1 device", a, r["throughput_ratio"])]
                pool = r.get("one_thread_pool")
                if pool:
                    variants.append(("1 device, one CPU thread (both sides)", pool["jaxrl"], pool["throughput_ratio"]))
                if "jaxrl_sharded" in r:
                    variants.append(("seeds over cores (CLI)", r["jaxrl_sharded"], r["sharded_throughput_ratio"]))
                cold = r.get("cold_compile")
                for layout, ours, ratio in variants:
                    fresh = ["—"] * 3
                    if cold and ours is a:
                        fresh = [cold["jaxrl_s"], cold["rejax_s"], cold["ratio"]]
                    peer = pool["rejax"] if pool and ours is pool["jaxrl"] else b
                    rows.append(
                        [r["benchmark"], r["seeds"], layout, ours["env_steps_per_s"], peer["env_steps_per_s"], ratio]
                        + [ours["compile_s"], peer["compile_s"], peer.get("compile_s_jaxrl_options", "—")]
                        + fresh
                        + [ours["final_return_mean"], peer["final_return_mean"]]
                    )
        header = ["benchmark", "seeds", "jaxrl layout", "jaxrl steps/s", "rejax steps/s", "ratio"]
        header += ["jaxrl compile s", "rejax compile s", "rejax compile s with jaxrl's options"]
        header += ["jaxrl compile s, fresh process", "rejax compile s, fresh process", "fresh compile ratio"]
        header += ["jaxrl return", "rejax return"]
        lines += _table(header, rows)
        rows = []
        for r in peers.get("brax_inverted_pendulum", []):
            a, b = r["jaxrl"], r["brax"]
            rows.append(
                [
                    r["benchmark"],
                    a["steady_env_steps_per_s"],
                    b["steady_env_steps_per_s"],
                    r["throughput_ratio"],
                    a["wall_s"],
                    b["wall_s"],
                    a["final_return_mean"],
                    b["final_return_mean"],
                ]
            )
        if rows:
            lines += _table(
                [
                    "benchmark",
                    "jaxrl steady steps/s",
                    "brax steady steps/s",
                    "ratio",
                    "jaxrl wall s",
                    "brax wall s",
                    "jaxrl return",
                    "brax return",
                ],
                rows,
            )
    ceiling = _load("bench_ceiling.json")
    if ceiling:
        lines += [f"## Ceiling (fp32 matmul 2048²: {ceiling['matmul_gflops']} GFLOP/s)", ""]
        rows = [
            [
                r["seeds"],
                r["env_only_steps_per_s"],
                r["acting_steps_per_s"],
                r["training_steps_per_s"],
                r["training_over_acting"],
                r["training_gflops"],
                r["training_flops_over_matmul_peak"],
                r.get("shaped_matmul", "—"),
                r.get("shaped_matmul_gflops", "—"),
                r.get("training_flops_over_shaped_matmul", "—"),
            ]
            for r in ceiling["rows"]
        ]
        lines += _table(
            [
                "seeds",
                "env only steps/s",
                "acting steps/s",
                "training steps/s",
                "training / acting",
                "training GFLOP/s",
                "of matmul peak",
                "learner's matmul shape",
                "its GFLOP/s",
                "training / same-shape matmul",
            ],
            rows,
        )
    learner = _load("bench_learner.json")
    if learner:
        lines += ["## PPO learner and LLVM level (PureJaxRL CartPole settings)", ""]
        l1 = learner["learner"]
        lines += [
            f"Learner alone: {l1['learner_ms_per_update']} ms per update, "
            f"{l1['kernels_per_minibatch_step']} XLA kernels per minibatch step.",
            "",
        ]
        rows = [[r["seeds"], r["llvm"], r["compile_s"], r["env_steps_per_s"]] for r in learner.get("opt_levels", [])]
        if rows:
            lines += _table(["seeds", "LLVM level", "compile s", "env steps/s"], rows)
        rows = [
            [r["program"], r["seeds"], r["env_steps_per_s_transposed"], r["env_steps_per_s_lax"], r["ratio"]]
            for r in learner.get("backward_layout", [])
        ]
        if rows:
            lines += ["Dense kernel gradient as materialized xᵀ @ g vs lax.dot_general's backward (same process):", ""]
            lines += _table(["program", "seeds", "xᵀ @ g env steps/s", "lax env steps/s", "ratio"], rows)
    scaling = _load("bench_scaling.json")
    if scaling:
        lines += ["## Scaling (PPO CartPole, 128 steps, 4 × 4 minibatches)", ""]
        rows = [
            [r["num_envs"], r["seeds"], r["env_steps_per_s"], r["compile_s"], r["peak_rss_mib"]]
            for r in scaling["vs_num_envs"] + scaling["vs_seeds"]
        ]
        lines += _table(["num_envs", "seeds", "env steps/s", "compile s", "peak RSS MiB"], rows)
    gae = _load("bench_gae.json")
    if gae:
        lines += [f"## GAE on {gae['backend']}", ""]
        rows = [[r["T"], r["N"], r["associative_us"], r["scan_us"], r["faster"]] for r in gae["rows"]]
        lines += _table(["T", "N", "associative µs", "scan µs", "faster"], rows)
    tts = _load("bench_time_to_solve.json")
    if tts:
        lines += ["## Time to solve CartPole × 16 seeds (all ≥ 475, compile included)", ""]
        rows = []
        for name, r in tts.items():
            if isinstance(r, dict):
                rows.append([name, r.get("time_to_solve_s", "not solved"), r.get("env_steps_at_solve", "—")])
        lines += _table(["what", "time to solve s", "env steps per seed at solve"], rows)
    devices = _load("bench_devices.json")
    if devices:
        kind = "simulated on the CPU" if devices["simulated"] else "real"
        lines += [f"## Devices ({kind})", ""]
        rows = [[r["parallel"], r["devices"], r["env_steps_per_s"], r["compile_s"], r["iqm"]] for r in devices["rows"]]
        lines += _table(["parallel", "devices", "env steps/s", "compile s", "IQM"], rows)
    with open(os.path.join(RESULTS, "bench.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
