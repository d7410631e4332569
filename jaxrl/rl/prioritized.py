"""Proportional prioritized replay's sum-tree as a pytree (Schaul, Quan,
Antonoglou & Silver 2016, "Prioritized Experience Replay", arXiv:1511.05952).

A binary tree over ``L`` leaves (``L`` the smallest power of two ≥ capacity)
stored flat: node ``i``'s children are ``2i`` and ``2i + 1``, ``nodes[1]`` is the
total, the leaves are ``nodes[L:L + capacity]``. ``update`` sets leaves and
recomputes only their ancestors; ``sample`` draws stratified proportional to the
leaves. Each seed owns one tree (vmap outside); it sits beside a
:mod:`jaxrl.rl.buffers` ring buffer, its slots being the buffer's slots.
Priorities must be finite and ≥ 0 (the caller's duty; nothing checks them).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

__all__ = ["SumTree", "init", "total", "priorities", "update", "find", "sample", "importance_weights", "priority"]


@struct.dataclass
class SumTree:
    nodes: jax.Array  # float32 [2L]; nodes[0] unused (0), nodes[1] the total
    capacity: int = struct.field(pytree_node=False)

    @property
    def leaves(self) -> int:
        """``L``: the smallest power of two ≥ capacity."""
        return self.nodes.shape[-1] // 2


def init(capacity: int) -> SumTree:
    """An all-zero tree over ``capacity`` slots."""
    if capacity < 1:
        raise ValueError(f"capacity must be ≥ 1, got {capacity}")
    leaves = 1 << (capacity - 1).bit_length()
    return SumTree(jnp.zeros((2 * leaves,), jnp.float32), capacity)


def total(tree: SumTree) -> jax.Array:
    """float32 ``[]``: the sum of all priorities."""
    return tree.nodes[1]


def priorities(tree: SumTree) -> jax.Array:
    """float32 ``[capacity]``: the slots' priorities."""
    return tree.nodes[tree.leaves : tree.leaves + tree.capacity]


def update(tree: SumTree, index: jax.Array, priority: jax.Array) -> SumTree:
    """Set slot ``index`` int32 ``[K]`` to ``priority`` float32 ``[K]`` (finite,
    ≥ 0), then recompute their ancestors level by level: O(K log L), not a
    rebuild. A slot given several times takes its last priority; indices outside
    ``[0, capacity)`` are ignored."""
    leaves, size = tree.leaves, 2 * tree.leaves
    index = jnp.asarray(index, jnp.int32).reshape(-1)
    priority = jnp.asarray(priority, jnp.float32).reshape(-1)
    # last occurrence wins, whatever order XLA's scatter writes in: a stable sort
    # groups equal indices in call order and only the last of each group is kept
    order = jnp.argsort(index, stable=True)
    index, priority = index[order], priority[order]
    last = (index != jnp.roll(index, -1)) | (jnp.arange(index.shape[0]) == index.shape[0] - 1)
    keep = last & (index >= 0) & (index < tree.capacity)
    node = jnp.where(keep, index + leaves, size)  # size: out of range, dropped
    nodes = tree.nodes.at[node].set(priority, mode="drop")
    for _ in range(leaves.bit_length() - 1):  # log2 L levels, leaves' parents first
        node = jnp.where(node < size, node // 2, size)
        # parents shared by several touched nodes all get the same (correct) sum
        children = nodes.at[2 * node].get(mode="clip") + nodes.at[2 * node + 1].get(mode="clip")
        nodes = nodes.at[node].set(children, mode="drop")
    return tree.replace(nodes=nodes)


def find(tree: SumTree, mass: jax.Array) -> jax.Array:
    """int32 ``[...]``: for each ``mass`` float32 ``[...]`` in ``[0, total)``, the
    slot whose prefix-sum interval holds it: the smallest ``i`` with
    ``cumsum(p)[i] > mass`` (``np.searchsorted(cumsum(p), mass, side="right")``).

    The descent goes right only into a subtree of positive sum, so when the total
    is positive a zero-priority slot is never returned, however rounding errs:
    a mass at or past the total (or one that rounding pushes past a subtree's
    sum) gives the last positive slot of the subtree it reached, and a negative
    mass counts as 0. An empty tree (total 0) gives slot 0."""
    nodes = tree.nodes
    mass = jnp.maximum(jnp.asarray(mass, jnp.float32), 0.0)
    node = jnp.ones(mass.shape, jnp.int32)
    for _ in range(tree.leaves.bit_length() - 1):
        left, right = nodes[2 * node], nodes[2 * node + 1]
        go_right = (mass >= left) & (right > 0)
        mass = jnp.where(go_right, mass - left, mass)
        node = 2 * node + go_right.astype(jnp.int32)
    return jnp.clip(node - tree.leaves, 0, tree.capacity - 1)


def sample(tree: SumTree, key: jax.Array, batch_size: int) -> tuple[jax.Array, jax.Array]:
    """Stratified proportional sampling: ``[0, total)`` split into ``batch_size``
    equal segments, one uniform point in each. Returns the slots int32 ``[B]``
    (non-decreasing) and their probabilities ``p_i / total`` float32 ``[B]``
    (0 for an empty tree, whose draws are all slot 0)."""
    mass = (jnp.arange(batch_size) + jax.random.uniform(key, (batch_size,))) * (total(tree) / batch_size)
    index = find(tree, mass)
    norm = jnp.where(total(tree) > 0, total(tree), 1.0)
    return index, tree.nodes[index + tree.leaves] / norm


def importance_weights(probs: jax.Array, size: jax.Array | int, beta: jax.Array | float) -> jax.Array:
    """float32 ``[B]``: ``w_i = (size · P(i))^(−β)`` over the filled ``size``,
    divided by the batch's largest, so the largest is 1. Computed in log space
    with ``probs`` floored at the smallest normal float32, so a probability of 0
    (never drawn) still gives finite weights."""
    probs = jnp.maximum(jnp.asarray(probs, jnp.float32), jnp.finfo(jnp.float32).tiny)
    log_w = -jnp.asarray(beta, jnp.float32) * jnp.log(jnp.asarray(size, jnp.float32) * probs)
    return jnp.exp(log_w - jnp.max(log_w))


def priority(td_error_or_loss: jax.Array, alpha: jax.Array | float, eps: float = 1e-6) -> jax.Array:
    """``[B]``: ``(|x| + eps)^α``, the priority stored for a new TD error or loss
    (α = 0: uniform replay)."""
    return (jnp.abs(td_error_or_loss) + eps) ** alpha
