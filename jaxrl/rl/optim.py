"""Optimizers are optax ``GradientTransformation``s built from traced hyperparameters.

Every learner step is ``optimizer(lr, max_norm)`` — a transformation built
inside the compiled program from the member's own (traced, vmappable,
PBT-able) learning rate and gradient-norm bound — applied with
``optax.apply_updates``. The default is optax's own chain

    optax.flatten(optax.chain(clip_by_global_norm(max_norm),
                              optax.scale_by_adam(eps=eps),
                              optax.scale_by_learning_rate(lr)))

over the parameters raveled into one vector (``optax.flatten``): a step is a
handful of fused loops instead of several per parameter leaf
(``experiments/bench/learner.py`` measures it against a per-leaf chain).
Research code passes its own to ``jaxrl.make_train(config, optimizer=…)``:

* a function of the learning rate returning a transformation, e.g.
  ``optax.adamw`` or ``lambda lr: optax.sgd(lr, momentum=0.9)`` — it is called
  with the traced learning rate (the schedule, sweeps and PBT still move it);
* or a ready ``optax.GradientTransformation`` (its own learning rate and
  schedule; ``algo.lr`` then only feeds the logged ``lr`` metric).

Either way the gradients are clipped to ``algo.max_grad_norm`` first (pass a
large bound to switch that off) and the pre-clip norm is logged as ``grad_norm``.

``weight_decay`` > 0 makes the default chain AdamW (Loshchilov & Hutter 2019):
``optax.add_decayed_weights(weight_decay)`` between Adam's scaling and ``−lr``,
so every parameter shrinks by ``lr · weight_decay`` per step, decoupled from
the gradient's moments (what ``optax.adamw`` and PyTorch's ``AdamW`` do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from jax.flatten_util import ravel_pytree

__all__ = [
    "Optimizer",
    "Spec",
    "clip_by_global_norm",
    "default",
    "make",
    "init",
    "apply",
    "global_norm",
    "tree_all_finite",
]

# What research code may pass as ``optimizer=``: None (the default chain), a
# function of the learning rate returning a transformation, or a transformation.
Spec = optax.GradientTransformation | Callable[[jax.Array], optax.GradientTransformation] | None


def clip_by_global_norm(max_norm: jax.Array | float) -> optax.GradientTransformation:
    """Scale the updates by ``min(1, max_norm / ‖g‖)`` (``‖g‖`` the global L2 norm).

    The same clip as ``optax.clip_by_global_norm`` written as one factor, so a
    flattened chain multiplies its vector once."""

    def init_fn(params: Any) -> optax.EmptyState:
        del params
        return optax.EmptyState()

    def update_fn(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        del params
        factor = jnp.minimum(1.0, max_norm / jnp.maximum(optax.tree.norm(updates), 1e-12))
        return jax.tree.map(lambda u: u * factor.astype(u.dtype), updates), state

    return optax.GradientTransformation(init_fn, update_fn)


def default(
    lr: jax.Array | float, max_norm: jax.Array | float, eps: float = 1e-8, weight_decay: float = 0.0
) -> optax.GradientTransformation:
    """jaxrl's optimizer: global-norm clip, Adam (AdamW with ``weight_decay`` > 0),
    ``−lr``, over one raveled vector."""
    decay = [optax.add_decayed_weights(weight_decay)] if weight_decay else []
    return optax.flatten(
        optax.chain(
            clip_by_global_norm(max_norm), optax.scale_by_adam(eps=eps), *decay, optax.scale_by_learning_rate(lr)
        )
    )


class Optimizer(NamedTuple):
    """``build(lr, max_norm) -> optax.GradientTransformation``: one learner's
    optimizer as a function of its traced hyperparameters."""

    build: Callable[[Any, Any], optax.GradientTransformation]

    def init(self, params: Any) -> Any:
        """Optimizer state for ``params`` (its structure never depends on the hyperparameters)."""
        return self.build(jnp.float32(0.0), jnp.float32(1.0)).init(params)


def make(spec: Spec = None, eps: float = 1e-8, weight_decay: float = 0.0) -> Optimizer:
    """The :class:`Optimizer` ``spec`` stands for (see the module docstring);
    ``weight_decay`` (a static value) applies to the default chain only."""
    if spec is None:
        return Optimizer(lambda lr, max_norm: default(lr, max_norm, eps, weight_decay))
    if weight_decay:
        raise ValueError(
            f"weight_decay={weight_decay} applies to jaxrl's default optimizer; "
            "put the decay into the optimizer you pass (e.g. optax.adamw)"
        )
    if isinstance(spec, optax.GradientTransformation):
        return Optimizer(lambda lr, max_norm: optax.chain(clip_by_global_norm(max_norm), spec))
    if callable(spec):
        return Optimizer(lambda lr, max_norm: optax.chain(clip_by_global_norm(max_norm), spec(lr)))
    raise TypeError(
        f"optimizer must be an optax.GradientTransformation or a function lr -> one (e.g. optax.adamw), "
        f"not {type(spec).__name__}"
    )


def global_norm(tree: Any) -> jax.Array:
    """float32 []: the L2 norm of every leaf of ``tree`` taken together (over the raveled leaves)."""
    flat = ravel_pytree(tree)[0]
    return jnp.sqrt(jnp.sum(jnp.square(flat)))


def init(params: Any, eps: float = 1e-8, optimizer: Optimizer | None = None) -> Any:
    """State of ``optimizer`` (default: :func:`default`) for ``params``."""
    return (optimizer or make(None, eps)).init(params)


def apply(
    params: Any,
    grads: Any,
    opt_state: Any,
    lr: jax.Array,
    max_norm: jax.Array,
    eps: float = 1e-8,
    optimizer: Optimizer | None = None,
) -> tuple[Any, Any, jax.Array]:
    """One step of ``optimizer`` (default: :func:`default`) built from ``lr`` and
    ``max_norm``: ``(params + updates, opt_state, pre-clip gradient norm [])``."""
    tx = (optimizer or make(None, eps)).build(lr, max_norm)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, global_norm(grads)


def tree_all_finite(tree: Any) -> jax.Array:
    """bool []: every element of every leaf is finite (one check over the
    raveled leaves, not one kernel per leaf)."""
    return jnp.all(jnp.isfinite(ravel_pytree(tree)[0]))
