"""An on-device ring replay buffer as a pytree (carried through ``lax.scan``).

Each seed owns one (vmap outside). ``add`` writes a batch of transitions at the
write pointer, wrapping around; ``sample`` draws uniformly from the filled part.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

__all__ = ["ReplayBuffer", "init", "add", "sample", "sample_indices", "sequence_indices", "take"]


@struct.dataclass
class ReplayBuffer:
    data: Any  # pytree, every leaf [capacity, ...]
    position: jax.Array  # int32 [] next slot to write
    size: jax.Array  # int32 [] filled slots (≤ capacity)

    @property
    def capacity(self) -> int:
        return jax.tree.leaves(self.data)[0].shape[0]


def init(example: Any, capacity: int) -> ReplayBuffer:
    """An empty buffer for items shaped like ``example`` (one transition)."""
    data = jax.tree.map(lambda x: jnp.zeros((capacity,) + jnp.shape(x), jnp.asarray(x).dtype), example)
    return ReplayBuffer(data, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def add(buffer: ReplayBuffer, items: Any) -> ReplayBuffer:
    """Write a batch ``[B, ...]`` of items in order, wrapping around; when
    ``B`` exceeds the capacity only the last ``capacity`` items are kept, as if
    written one by one."""
    capacity = buffer.capacity
    count = jax.tree.leaves(items)[0].shape[0]
    skip = max(0, count - capacity)  # items overwritten within this same batch
    if skip:
        items = jax.tree.map(lambda x: x[skip:], items)
    index = (buffer.position + skip + jnp.arange(count - skip)) % capacity
    data = jax.tree.map(lambda store, x: store.at[index].set(x, unique_indices=True), buffer.data, items)
    return ReplayBuffer(
        data,
        ((buffer.position + count) % capacity).astype(jnp.int32),
        jnp.minimum(buffer.size + count, capacity).astype(jnp.int32),
    )


def sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Any:
    """``batch_size`` items drawn uniformly (with replacement) from the filled slots."""
    return take(buffer, sample_indices(buffer, key, (batch_size,)))


def sample_indices(buffer: ReplayBuffer, key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """int32 ``shape`` slot indices drawn uniformly from the filled slots — e.g.
    ``[steps, batch]`` for several gradient steps' batches in one draw."""
    return jax.random.randint(key, shape, 0, jnp.maximum(buffer.size, 1))


def take(buffer: ReplayBuffer, index: jax.Array) -> Any:
    """The items at slot ``index`` ``[...]`` (leaves ``[..., *item]``)."""
    return jax.tree.map(lambda store: store[index], buffer.data)


def sequence_indices(
    buffer: ReplayBuffer, key: jax.Array, shape: tuple[int, ...], length: int, stride: int
) -> jax.Array:
    """int32 slot indices ``[*shape, length]`` of sequences of ``length`` items
    ``stride`` slots apart, each starting uniformly at a filled slot whose whole
    sequence has been written (:func:`take` gathers them).

    With ``N`` envs written as ``add`` of whole steps ``[steps · N]`` (step-major)
    into a buffer whose capacity is a multiple of ``N``, ``stride = N`` makes each
    sequence ``length`` consecutive steps of one env (n-step returns). Starts are
    counted from the oldest slot, so a sequence never runs past the newest item or
    across the write pointer."""
    capacity = buffer.capacity
    valid = jnp.maximum(buffer.size - (length - 1) * stride, 1)
    offset = jax.random.randint(key, shape, 0, valid)
    start = (buffer.position - buffer.size + offset) % capacity
    return (start[..., None] + stride * jnp.arange(length)) % capacity
