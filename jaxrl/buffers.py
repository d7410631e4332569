"""An on-device ring replay buffer as a pytree (carried through ``lax.scan``).

Each seed owns one (vmap outside). ``add`` writes a batch of transitions at the
write pointer, wrapping around; ``sample`` draws uniformly from the filled part.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

__all__ = ["ReplayBuffer", "init", "add", "sample"]


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
    """Write a batch ``[B, ...]`` of items (``B`` ≤ capacity), wrapping around."""
    capacity = buffer.capacity
    count = jax.tree.leaves(items)[0].shape[0]
    index = (buffer.position + jnp.arange(count)) % capacity
    data = jax.tree.map(lambda store, x: store.at[index].set(x), buffer.data, items)
    return ReplayBuffer(
        data,
        ((buffer.position + count) % capacity).astype(jnp.int32),
        jnp.minimum(buffer.size + count, capacity).astype(jnp.int32),
    )


def sample(buffer: ReplayBuffer, key: jax.Array, batch_size: int) -> Any:
    """``batch_size`` items drawn uniformly (with replacement) from the filled slots."""
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(buffer.size, 1))
    return jax.tree.map(lambda store: store[index], buffer.data)
