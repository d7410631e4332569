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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["pack", "unpack", "scan"]


class _Spec:
    """How a pytree was packed: its treedef and each leaf's shape, dtype and slot."""

    def __init__(self, tree: Any):
        leaves, self.treedef = jax.tree.flatten(tree)
        self.shapes = [tuple(np.shape(x)) for x in leaves]
        self.dtypes = [jnp.result_type(x) for x in leaves]
        self.groups: list[np.dtype] = []
        self.slots: list[tuple[int, int, int]] = []  # (group, offset, size)
        sizes: dict[np.dtype, int] = {}
        for shape, dtype in zip(self.shapes, self.dtypes, strict=True):
            if dtype not in sizes:
                sizes[dtype] = 0
                self.groups.append(dtype)
            size = int(np.prod(shape, dtype=np.int64))
            self.slots.append((self.groups.index(dtype), sizes[dtype], size))
            sizes[dtype] += size


def pack(tree: Any) -> tuple[tuple[jax.Array, ...], _Spec]:
    """Flatten ``tree`` into one 1-D array per dtype (in first-seen order)."""
    spec = _Spec(tree)
    leaves = jax.tree.leaves(tree)
    parts: list[list[jax.Array]] = [[] for _ in spec.groups]
    for leaf, (group, _, _) in zip(leaves, spec.slots, strict=True):
        parts[group].append(jnp.ravel(leaf))
    return tuple(p[0] if len(p) == 1 else jnp.concatenate(p) for p in parts), spec


def unpack(arrays: tuple[jax.Array, ...], spec: _Spec, lead: tuple[int, ...] = ()) -> Any:
    """Inverse of :func:`pack`; ``lead`` are extra leading axes of ``arrays`` (e.g. ``[T]``)."""
    axis = len(lead)
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
