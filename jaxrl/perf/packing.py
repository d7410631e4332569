"""``jax.lax.scan`` with its carry and outputs packed into one array per dtype.

On XLA:CPU every loop-carried array of a ``while`` loop is copied at the top
of each iteration, and every stacked output is written by its own
``dynamic-update-slice``: each a separate kernel launch, ≈ 0.2 µs apiece. A
rollout step of a small env carries a dozen tiny arrays (the env state's
fields, the observation, the episode statistics) and stacks about ten per-step
outputs, so those launches cost more than the step's arithmetic.
:func:`scan` runs the same loop with the carry and the per-step outputs
flattened and concatenated per dtype — one carried array and one stacked
output per dtype — and unpacks both outside the loop. Values are unchanged
(the packing only reshapes and concatenates).

When every leaf has the same first axis (a rollout's env axis), the packed
arrays keep it — ``[n, size]`` rather than ``[n · size]`` — so a sharding of
that axis (``parallel=data``) carries over to the packed loop. Flattened
fully, the leaves' concatenation straddled the shards, and XLA's partitioner
gathered the whole carry onto every device at every step: the data-parallel
CartPole run of ``experiments/bench/devices.py`` (64 envs on 2 simulated
CPU devices) fell from ≈ 250k to ≈ 30k env-steps/s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["pack", "unpack", "scan"]


def _common_first_axis(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """``(n,)`` when every shape has the same first axis ``n`` (the env axis), else ``()``."""
    if shapes and all(len(s) >= 1 for s in shapes) and len({s[0] for s in shapes}) == 1:
        return shapes[0][:1]
    return ()


class _Spec:
    """How a pytree was packed: its treedef, each leaf's shape, dtype and slot,
    and the leading axis every leaf shares (kept in the packed arrays)."""

    def __init__(self, tree: Any):
        leaves, self.treedef = jax.tree.flatten(tree)
        self.shapes = [tuple(np.shape(x)) for x in leaves]
        self.dtypes = [jnp.result_type(x) for x in leaves]
        self.kept = _common_first_axis(self.shapes)
        self.groups: list[np.dtype] = []
        self.slots: list[tuple[int, int, int]] = []  # (group, offset, size)
        sizes: dict[np.dtype, int] = {}
        for shape, dtype in zip(self.shapes, self.dtypes, strict=True):
            if dtype not in sizes:
                sizes[dtype] = 0
                self.groups.append(dtype)
            size = int(np.prod(shape[len(self.kept) :], dtype=np.int64))
            self.slots.append((self.groups.index(dtype), sizes[dtype], size))
            sizes[dtype] += size


def pack(tree: Any) -> tuple[tuple[jax.Array, ...], _Spec]:
    """Concatenate ``tree``'s leaves into one array per dtype (in first-seen
    order): ``[n, size]`` when every leaf has the same first axis ``n`` (an env
    axis stays an axis, so a sharding of it carries over), else 1-D ``[size]``."""
    spec = _Spec(tree)
    leaves = jax.tree.leaves(tree)
    parts: list[list[jax.Array]] = [[] for _ in spec.groups]
    for leaf, (group, _, _) in zip(leaves, spec.slots, strict=True):
        parts[group].append(jnp.reshape(leaf, spec.kept + (-1,)))
    return tuple(p[0] if len(p) == 1 else jnp.concatenate(p, axis=-1) for p in parts), spec


def unpack(arrays: tuple[jax.Array, ...], spec: _Spec, lead: tuple[int, ...] = ()) -> Any:
    """Inverse of :func:`pack`; ``lead`` are extra leading axes of ``arrays`` (e.g. ``[T]``)."""
    axis = len(lead) + len(spec.kept)
    leaves = [
        jax.lax.slice_in_dim(arrays[group], offset, offset + size, axis=axis).reshape(lead + shape)
        for (group, offset, size), shape in zip(spec.slots, spec.shapes, strict=True)
    ]
    return jax.tree.unflatten(spec.treedef, leaves)


def scan(
    f: Callable[[Any, Any], tuple[Any, Any]],
    init: Any,
    xs: Any = None,
    length: int | None = None,
) -> tuple[Any, Any]:
    """``jax.lax.scan(f, init, xs, length)`` with the carry and the per-step
    outputs packed per dtype inside the loop. Same results."""
    packed_init, carry_spec = pack(init)
    out_spec: list[_Spec] = []

    def body(packed: tuple[jax.Array, ...], x: Any) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
        carry, out = f(unpack(packed, carry_spec), x)
        new, spec = pack(carry)
        if spec.treedef != carry_spec.treedef or spec.dtypes != carry_spec.dtypes:
            raise TypeError("scan body must return a carry of the same structure and dtypes as init")
        outs, spec = pack(out)
        out_spec.append(spec)
        return new, outs

    packed_final, packed_outs = jax.lax.scan(body, packed_init, xs, length=length)
    steps = length if length is not None else jax.tree.leaves(xs)[0].shape[0]
    return unpack(packed_final, carry_spec), unpack(packed_outs, out_spec[-1], (steps,))
