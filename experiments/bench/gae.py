"""GAE: associative scan vs reverse ``lax.scan``, T ∈ {128, 1024} × N ∈ {1, 64, 4096}.

    python experiments/bench/gae.py [--out experiments/results/bench_gae.json]

Each variant is jitted alone on random inputs (float32, 10% episode ends) and
timed as the median of 20 calls after a warm-up. The faster one per backend is
what ``algo.gae_method=auto`` picks (jaxrl/ppo.py: gae_method).
"""

from __future__ import annotations

import argparse
import json
import os

import jax

from jaxrl.rl.advantages import gae
from jaxrl.run.profile import median_seconds


def bench(method: str, t: int, n: int, repeats: int = 20) -> float:
    key = jax.random.key(0)
    k1, k2, k3, k4 = jax.random.split(key, 4)
    rewards = jax.random.normal(k1, (t, n))
    values = jax.random.normal(k2, (t, n))
    next_values = jax.random.normal(k3, (t, n))
    done = jax.random.uniform(k4, (t, n)) < 0.1
    terminated = done & (jax.random.uniform(k1, (t, n)) < 0.5)
    fn = jax.jit(lambda r, v, nv, te, d: gae(r, v, nv, te, d, 0.99, 0.95, method=method))
    args = (rewards, values, next_values, terminated, done)
    return median_seconds(fn, *args, repeats=repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="experiments/results/bench_gae.json")
    args = parser.parse_args()
    rows = []
    for t in (128, 1024):
        for n in (1, 64, 4096):
            a, s = bench("associative", t, n), bench("scan", t, n)
            row = {
                "T": t,
                "N": n,
                "associative_us": round(a * 1e6, 1),
                "scan_us": round(s * 1e6, 1),
                "faster": "associative" if a < s else "scan",
                "scan_over_associative": round(s / a, 2),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    result = {"backend": jax.default_backend(), "jax": jax.__version__, "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
