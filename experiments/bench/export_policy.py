"""Size and per-call time of an exported policy: the policy-only artifact
``python -m jaxrl.export`` writes against one that takes the whole training
state (every leaf of the agent state, as exports did before).

    python experiments/bench/export_policy.py RUN_DIR [RUN_DIR ...]

Prints, per run: the parameters shipped (floats, bytes of params.npz) and the
median time of one ``exported.call`` on a batch of one observation (CPU,
including the host-to-device copy of the parameters that every call makes).
"""

from __future__ import annotations

import io
import sys
import time

import jax
import numpy as np

from jaxrl.run import export
from jaxrl.run.policy import open_run


def _per_call(exported, leaves, obs_shape, calls: int = 200) -> float:
    obs = np.zeros((1, *obs_shape), np.float32)
    key = np.zeros((2,), np.uint32)
    jax.block_until_ready(exported.call(leaves, obs, key))
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        jax.block_until_ready(exported.call(leaves, obs, key))
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e3


def _npz_bytes(leaves) -> int:
    buffer = io.BytesIO()
    np.savez(buffer, *leaves)
    return buffer.getbuffer().nbytes


def main() -> int:
    for run_dir in sys.argv[1:]:
        run = open_run(run_dir)
        state = run.agent_state(0).replace(**{n: None for n in run.trainer.algorithm.own_fields})
        leaves, treedef = jax.tree.flatten(state)
        leaves = [np.asarray(x) for x in leaves]
        act = run.trainer.agent.act
        if run.trainer.agent.init_carry is not None:
            print(f"{run_dir}: recurrent policy, skipped (its call takes a carry)")
            continue
        whole = export._export(act, treedef, leaves, range(len(leaves)), run.env.obs_shape, None)
        probe = export._export(act, treedef, leaves, range(len(leaves)), run.env.obs_shape, None, batch=1)
        used = [i for i in probe.module_kept_var_idx if i < len(leaves)]
        lean = export._export(act, treedef, leaves, used, run.env.obs_shape, None)
        mine = [leaves[i] for i in used]
        rows = (("whole state", whole, leaves), ("policy only", lean, mine))
        print(f"{run.env.name} · {run.config.algo.name} ({run_dir})")
        for name, exported, given in rows:
            floats = sum(x.size for x in given)
            ms = _per_call(exported, given, run.env.obs_shape)
            print(
                f"  {name:<12} {len(given):>3} leaves {floats:>9,} values {_npz_bytes(given):>10,} B  {ms:.3f} ms/call"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
