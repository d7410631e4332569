"""One trained seed's policy as a ``jax.export`` artifact plus its parameters,
runnable with jax and numpy alone: :func:`export_policy`, behind
``python -m jaxrl.export`` (whose help shows how to run the artifact)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

from jaxrl.core.errors import make_dir
from jaxrl.envs import Discrete
from jaxrl.run.io import write_json
from jaxrl.run.policy import open_run

__all__ = ["RUNNER", "export_policy"]

RUNNER = '''"""Run an exported jaxrl policy with jax and numpy only."""
import json
import sys

import jax
import numpy as np

here = sys.argv[1] if len(sys.argv) > 1 else "."
exported = jax.export.deserialize(open(f"{here}/policy.jaxexport", "rb").read())
params = np.load(f"{here}/params.npz")
leaves = [params[f"p{i:04d}"] for i in range(len(params.files))]
spec = json.load(open(f"{here}/policy.json"))
obs = np.zeros((1, *spec["obs_shape"]), np.float32)  # a batch of one observation
key_data = np.zeros((2,), np.uint32)  # used only when the policy samples
if "carry_size" in spec:  # a recurrent policy: the carry goes in and comes back
    carry = np.zeros((1, spec["carry_size"]), np.float32)  # an episode's start
    carry, action = exported.call(leaves, carry, obs, key_data)
    print(action)
else:
    print(exported.call(leaves, obs, key_data))
'''


def _description(run: Any, member: int, deterministic: bool, exported: Any, carry_size: int | None) -> dict[str, Any]:
    """``policy.json``: the env's spaces, how to call the artifact, where it came from."""
    import jax

    space = run.env.action_space
    action = (
        {"kind": "discrete", "n": space.n}
        if isinstance(space, Discrete)
        else {"kind": "continuous", "shape": list(space.shape), "low": space.low.tolist(), "high": space.high.tolist()}
    )
    call = "exported.call(leaves, obs[B, *obs_shape] float32, key_data uint32[2]) -> actions[B, ...]"
    extra = {}
    if carry_size is not None:
        call = (
            "exported.call(leaves, carry[B, carry_size] float32, obs[B, *obs_shape] float32, key_data uint32[2])"
            " -> (carry, actions[B, ...]); the carry starts at zeros and is zeroed where an episode ends"
        )
        extra = {"carry_size": carry_size}
    return {
        "env": run.env.name,
        "algo": run.config.algo.name,
        "seed": run.members.seeds[member],
        "deterministic": deterministic,
        "obs_shape": list(run.env.obs_shape),
        "action": action,
        "platforms": list(exported.platforms),
        "call": call,
        **extra,
        "jax_version": jax.__version__,
        "checkpoint_chunk": run.meta.get("chunk"),
    }


def export_policy(
    run_dir: str,
    seed: int | None = None,
    out: str | None = None,
    deterministic: bool = True,
    log: Callable[[str], None] | None = None,
) -> str:
    """Export one seed's policy; returns the output directory. ``log`` gets the
    run's notes (an older checkpoint used; default: :func:`warnings.warn`)."""
    import jax
    import numpy as np

    run = open_run(run_dir)
    for note in run.notes:
        (log or warnings.warn)(note)
    member = run.member_index(run.members.seeds[0] if seed is None else int(seed))
    state = run.agent_state(member)
    state = state.replace(
        **{name: None for name in run.trainer.algorithm.own_fields}
    )  # a policy needs no envs or PRNG stream
    leaves, treedef = jax.tree.flatten(state)
    agent = run.trainer.agent
    choose = agent.act if deterministic else agent.sample
    recurrent = agent.init_carry is not None
    (batch,) = jax.export.symbolic_shape("B")
    param_specs = [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype) for x in leaves]
    obs_spec = jax.ShapeDtypeStruct((batch, *run.env.obs_shape), np.float32)
    key_spec = jax.ShapeDtypeStruct((2,), np.uint32)
    if recurrent:
        carry_size = int(agent.init_carry(run.agent_state(member), ()).shape[-1])

        def policy(leaves: list, carry: jax.Array, obs: jax.Array, key_data: jax.Array) -> tuple:
            state = jax.tree.unflatten(treedef, leaves)
            return choose(state, carry, obs, jax.random.wrap_key_data(key_data))

        args = (param_specs, jax.ShapeDtypeStruct((batch, carry_size), np.float32), obs_spec, key_spec)
    else:

        def policy(leaves: list, obs: jax.Array, key_data: jax.Array) -> jax.Array:
            return choose(jax.tree.unflatten(treedef, leaves), obs, jax.random.wrap_key_data(key_data))

        args = (param_specs, obs_spec, key_spec)
    try:
        exported = jax.export.export(jax.jit(policy), platforms=("cpu", "cuda", "tpu"))(*args)
    except Exception:  # a platform without lowering rules here: export for this one only
        exported = jax.export.export(jax.jit(policy))(*args)
    blob = exported.serialize()  # before anything is written
    out = out or os.path.join(run.run_dir, f"export-seed{run.members.seeds[member]}")
    make_dir("out", out, "pass out=DIR in a writable directory")
    with open(os.path.join(out, "policy.jaxexport"), "wb") as f:
        f.write(blob)
    np.savez(os.path.join(out, "params.npz"), **{f"p{i:04d}": np.asarray(x) for i, x in enumerate(leaves)})
    write_json(
        os.path.join(out, "policy.json"),
        _description(run, member, deterministic, exported, carry_size if recurrent else None),
    )
    with open(os.path.join(out, "run_policy.py"), "w") as f:
        f.write(RUNNER)
    return out
