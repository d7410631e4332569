"""Search PPO CartPole settings that solve all 16 seeds fast (used to pick the preset).

Every traced-hyperparameter combination × 16 seeds runs in one compiled
program per static setting (vmap over the hyperparameter pytree and seeds).

    python experiments/tune_cartpole.py --budget 200000 --out experiments/results/tune_cartpole.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import ConfigError, parse, validate
from jaxrl.trainer.loop import make_batched, make_train

STATIC = {
    "num_envs": [8, 16, 32],
    "algo.num_steps": [32, 64],
    "algo.update_epochs": [2, 4],
    "algo.num_minibatches": [2, 4],
}
TRACED = {"algo.lr": [1e-3, 2e-3, 3e-3, 5e-3], "algo.ent_coef": [0.0, 0.01]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=200_000)
    parser.add_argument("--seeds", type=int, default=16)
    parser.add_argument("--evals", type=int, default=10)
    parser.add_argument("--seed-offset", type=int, default=0, help="first seed id")
    parser.add_argument("--out", default="experiments/results/tune_cartpole.jsonl")
    parser.add_argument("--static", default="", help="JSON dict overriding STATIC")
    parser.add_argument("--traced", default="", help="JSON dict overriding TRACED")
    args = parser.parse_args()
    static = dict(STATIC, **(json.loads(args.static) if args.static else {}))
    traced = dict(TRACED, **(json.loads(args.traced) if args.traced else {}))
    traced_grid = list(itertools.product(*traced.values()))
    with open(args.out, "a") as out:
        for combo in itertools.product(*static.values()):
            overrides = [f"{k}={v}" for k, v in zip(static, combo, strict=True)]
            overrides += [f"total_timesteps={args.budget}", f"num_evals={args.evals}", f"seeds={args.seeds}"]
            try:
                cfg = validate(parse(overrides))
            except ConfigError as e:
                print("skip", overrides, e)
                continue
            trainer = make_train(cfg)
            H, S = len(traced_grid), args.seeds
            hp = trainer.hparams
            fields = [k.split(".")[1] for k in traced]
            values = {
                f: jnp.repeat(jnp.asarray([g[i] for g in traced_grid], jnp.float32), S) for i, f in enumerate(fields)
            }
            hp = hp.replace(**values)
            hp = jax.tree.map(lambda x: jnp.broadcast_to(x, (H * S,)) if x.ndim == 0 else x, hp)
            keys = jnp.tile(jnp.stack([jax.random.PRNGKey(args.seed_offset + s) for s in range(S)]), (H, 1))
            init_b, chunk_b = make_batched(trainer, hparams_batched=True)
            t0 = time.time()
            states = jax.jit(init_b)(keys, hp)
            chunk = jax.jit(chunk_b, donate_argnums=0).lower(states, hp).compile()
            compile_s = time.time() - t0
            t0 = time.time()
            evals = []
            for _ in range(trainer.num_chunks):
                states, m = chunk(states, hp)
                evals.append(np.asarray(m.eval.returns).mean(-1).reshape(H, S))
            run_s = time.time() - t0
            evals = np.stack(evals, 1)  # [H, C, S]
            for h, g in enumerate(traced_grid):
                final = evals[h, -1]
                solved_at = None
                for c in range(evals.shape[1]):
                    if np.all(evals[h, c:] >= 475):
                        solved_at = (c + 1) * trainer.chunk_updates * trainer.steps_per_update
                        break
                row = {
                    "static": dict(zip(static, combo, strict=True)),
                    "seeds": S,
                    "seed_offset": args.seed_offset,
                    "budget": args.budget,
                    "traced": dict(zip(traced, g, strict=True)),
                    "final_min": float(final.min()),
                    "solved": int((final >= 475).sum()),
                    "stable_from_steps": solved_at,
                    "curve_min": evals[h].min(-1).round(1).tolist(),
                    "steps_per_s_per_run": trainer.total_env_steps * H * S / run_s / (H * S),
                    "run_s_all": run_s,
                    "compile_s": compile_s,
                }
                out.write(json.dumps(row) + "\n")
                out.flush()
            best = max(range(H), key=lambda h: (int((evals[h, -1] >= 475).sum()), evals[h, -1].min()))
            print(
                overrides[:4],
                f"run {run_s:.1f}s for {H}x{S}",
                "best",
                traced_grid[best],
                "solved",
                int((evals[best, -1] >= 475).sum()),
                flush=True,
            )


if __name__ == "__main__":
    main()
