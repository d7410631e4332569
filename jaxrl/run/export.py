"""One trained seed's policy as a ``jax.export`` artifact plus the parameters it
uses, runnable with jax, numpy and flatbuffers alone (no jaxrl):
:func:`export_policy`, behind ``python -m jaxrl.export`` (whose help shows how
to run the artifact).

Only what the policy reads is shipped — the actor's parameters and the
observation normalizer's statistics, never the critic, optimizer state or a
replay buffer: the leaves the compiled policy does not use are found by JAX
itself (``Exported.module_kept_var_idx``) and left out."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from jaxrl.algos import algorithm_for
from jaxrl.core.errors import make_dir
from jaxrl.envs import Discrete
from jaxrl.run.host import member_index
from jaxrl.run.io import write_json
from jaxrl.run.policy import host_config, open_host, open_run

__all__ = ["RUNNER", "export_policy"]

RUNNER = '''"""Run an exported jaxrl policy with jax, numpy and flatbuffers only."""
import json
import os
import sys

import jax
import numpy as np

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
exported = jax.export.deserialize(open(f"{here}/policy.jaxexport", "rb").read())
spec = json.load(open(f"{here}/policy.json"))
params = np.load(f"{here}/params.npz")
leaves = [params[name] for name in spec["params"]]  # named, in the order the artifact takes them
obs = np.zeros((1, *spec["obs_shape"]), np.float32)  # a batch of one observation
key_data = np.zeros((2,), np.uint32)  # used only when the policy samples
if "carry_size" in spec:  # a recurrent policy: the carry goes in and comes back
    carry = np.zeros((1, spec["carry_size"]), np.float32)  # an episode's start
    carry, action = exported.call(leaves, carry, obs, key_data)
    print(action)
else:
    print(exported.call(leaves, obs, key_data))
'''


class _Source(NamedTuple):
    """What an export reads of a run: one member's state (no env state or PRNG
    stream), the agent acting on it and the env's spaces."""

    state: Any
    agent: Any
    env_name: str
    obs_shape: tuple[int, ...]
    action_space: Any
    algo: str
    seed: int
    chunk: int | None
    run_dir: str


def _source(run_dir: str, seed: int | None, log: Callable[[str], None], config_label: str | None = None) -> _Source:
    """The member ``seed`` (default: the first; of configuration ``config_label``
    in a sweep group) of ``run_dir``: a run of a JAX env or of a host env."""
    import jax

    host = host_config(run_dir)
    if host is not None:
        opened = open_host(run_dir, host)
        member = member_index(opened, seed, config_label)
        state = jax.tree.map(lambda x: x[member], opened.states)
        own = [f for f in algorithm_for(host.algo).own_fields if hasattr(state, f)]
        spec = opened.run.spec
        return _Source(
            state.replace(**{name: None for name in own}),
            opened.run.agent,
            spec.name,
            tuple(spec.obs_shape),
            spec.action_space,
            host.algo.name,
            opened.run.seeds[member],
            opened.chunk,
            opened.run_dir,
        )
    run = open_run(run_dir)
    for note in run.notes:
        log(note)
    member = run.member_index(run.members.seeds[0] if seed is None else int(seed), config_label)
    state = run.agent_state(member)
    state = state.replace(
        **{name: None for name in run.trainer.algorithm.own_fields}
    )  # a policy needs no envs or PRNG stream
    return _Source(
        state,
        run.trainer.agent,
        run.env.name,
        tuple(run.env.obs_shape),
        run.env.action_space,
        run.config.algo.name,
        run.members.seeds[member],
        run.meta.get("chunk"),
        run.run_dir,
    )


def _description(
    source: _Source, deterministic: bool, exported: Any, carry_size: int | None, names: list[str]
) -> dict[str, Any]:
    """``policy.json``: the env's spaces, how to call the artifact, where it came from."""
    import jax

    space = source.action_space
    action = (
        {"kind": "discrete", "n": space.n}
        if isinstance(space, Discrete)
        else {
            "kind": "continuous",
            "shape": list(space.shape),
            "low": np.asarray(space.low).tolist(),
            "high": np.asarray(space.high).tolist(),
        }
    )
    call = "exported.call(leaves (params.npz[name] for name in params), obs[B, *obs_shape] float32, key_data uint32[2]) -> actions[B, ...]"
    extra = {}
    if carry_size is not None:
        call = (
            "exported.call(leaves, carry[B, carry_size] float32, obs[B, *obs_shape] float32, key_data uint32[2])"
            " -> (carry, actions[B, ...]); the carry starts at zeros and is zeroed where an episode ends"
        )
        extra = {"carry_size": carry_size}
    return {
        "env": source.env_name,
        "algo": source.algo,
        "seed": source.seed,
        "deterministic": deterministic,
        "obs_shape": list(source.obs_shape),
        "action": action,
        "platforms": list(exported.platforms),
        "call": call,
        "params": names,
        **extra,
        "jax_version": jax.__version__,
        "checkpoint_chunk": source.chunk,
    }


def export_policy(
    run_dir: str,
    seed: int | None = None,
    out: str | None = None,
    deterministic: bool = True,
    log: Callable[[str], None] | None = None,
    config_label: str | None = None,
) -> str:
    """Export one seed's policy (a run of a JAX env or of a host env; in a sweep
    group, of configuration ``config_label``); returns the output directory.
    ``log`` gets the run's notes (an older checkpoint used; default:
    :func:`warnings.warn`)."""
    import jax

    source = _source(run_dir, seed, log or warnings.warn, config_label)
    paths, treedef = jax.tree_util.tree_flatten_with_path(source.state)
    leaves = [np.asarray(x) for _, x in paths]
    names = [jax.tree_util.keystr(path, simple=True, separator="/") for path, _ in paths]
    agent = source.agent
    choose = agent.act if deterministic else agent.sample
    recurrent = agent.init_carry is not None
    carry_size = int(agent.init_carry(source.state, ()).shape[-1]) if recurrent else None
    # what the policy reads, as JAX finds it (with a symbolic batch it keeps every argument)
    probe = _export(choose, treedef, leaves, range(len(leaves)), source.obs_shape, carry_size, batch=1)
    used = [i for i in probe.module_kept_var_idx if i < len(leaves)]
    exported = _export(choose, treedef, leaves, used, source.obs_shape, carry_size)
    blob = exported.serialize()  # before anything is written
    name = f"export-{config_label.replace(' ', '_')}-seed{source.seed}" if config_label else f"export-seed{source.seed}"
    out = out or os.path.join(source.run_dir, name)
    make_dir("out", out, "pass out=DIR in a writable directory")
    with open(os.path.join(out, "policy.jaxexport"), "wb") as f:
        f.write(blob)
    np.savez(os.path.join(out, "params.npz"), **{names[i]: leaves[i] for i in used})
    write_json(
        os.path.join(out, "policy.json"),
        _description(source, deterministic, exported, carry_size, [names[i] for i in used]),
    )
    with open(os.path.join(out, "run_policy.py"), "w") as f:
        f.write(RUNNER)
    return out


def _export(
    choose: Callable,
    treedef: Any,
    leaves: list[Any],
    used: Any,
    obs_shape: tuple,
    carry_size: int | None,
    batch: int | None = None,
) -> Any:
    """``choose`` exported as a function of the ``used`` leaves (the others are
    zeros of their shape inside), the observations ``[B, *obs_shape]`` (``B``
    symbolic unless ``batch`` is given), the carry ``[B, carry_size]`` of a recurrent policy and the key
    data ``uint32 [2]``; for every platform that can lower it."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    used = list(used)

    def state_of(given: list) -> Any:
        full = [jnp.zeros(x.shape, x.dtype) for x in leaves]
        for i, x in zip(used, given, strict=True):
            full[i] = x
        return jax.tree.unflatten(treedef, full)

    if batch is None:
        (batch,) = jax.export.symbolic_shape("B")
    param_specs = [jax.ShapeDtypeStruct(leaves[i].shape, leaves[i].dtype) for i in used]
    obs_spec = jax.ShapeDtypeStruct((batch, *obs_shape), np.float32)
    key_spec = jax.ShapeDtypeStruct((2,), np.uint32)
    if carry_size is not None:

        def policy(given: list, carry: jax.Array, obs: jax.Array, key_data: jax.Array) -> tuple:
            return choose(state_of(given), carry, obs, jax.random.wrap_key_data(key_data))

        args = (param_specs, jax.ShapeDtypeStruct((batch, carry_size), np.float32), obs_spec, key_spec)
    else:

        def policy(given: list, obs: jax.Array, key_data: jax.Array) -> jax.Array:
            return choose(state_of(given), obs, jax.random.wrap_key_data(key_data))

        args = (param_specs, obs_spec, key_spec)
    try:
        return jax.export.export(jax.jit(policy), platforms=("cpu", "cuda", "tpu"))(*args)
    except Exception:  # a platform without lowering rules here: export for this one only
        return jax.export.export(jax.jit(policy))(*args)
