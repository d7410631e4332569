"""XLA:CPU kernels of dense layers, used when ``perf`` is on (:mod:`jaxrl.perf`).

* :func:`dense_dot_general` — ``nn.Dense``'s product with the kernel gradient
  laid out for XLA:CPU and a vmap rule for products over a handful of features;
* :func:`init_params` / :func:`init_many` — every orthogonal kernel of one or
  more modules from one normal draw and one QR per shape (:func:`orthogonal`
  is the initializer that takes part).

Both equal the plain flax path to float tolerance (values and gradients) or in
distribution (initial kernels); tests/test_networks.py and
tests/test_perf_switch.py check it.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.custom_batching import custom_vmap

__all__ = [
    "SMALL_CONTRACTION",
    "dense_dot_general",
    "make_dot_general",
    "init_many",
    "init_params",
    "orthogonal",
]


# Products contracting at most this many features are computed, under
# ``vmap``, as that many broadcast multiply-adds (see :func:`_product`).
SMALL_CONTRACTION = 8


@custom_vmap
def _small_product(a: jax.Array, b: jax.Array) -> jax.Array:
    return a @ b


@_small_product.def_vmap
def _small_product_batched(
    axis_size: int, in_batched: tuple[bool, bool], a: jax.Array, b: jax.Array
) -> tuple[jax.Array, bool]:
    # a [S?, ..., K], b [S?, K, N] → Σ_k a[..., k] b[k]: one elementwise loop
    a_batched, b_batched = in_batched
    if not b_batched:  # one kernel for all: an ordinary (larger) product
        return (a if a_batched else jnp.broadcast_to(a, (axis_size, *a.shape))) @ b, True
    if axis_size == 1:  # a vmap over one seed: the unbatched product
        return ((a[0] if a_batched else a) @ b[0])[None], True
    if not a_batched:
        a = a[None]
    lead = (1,) * (a.ndim - 2)  # a's axes between the seed axis and K
    out = None
    for k in range(a.shape[-1]):
        term = a[..., k : k + 1] * b[:, k].reshape((axis_size, *lead, b.shape[-1]))
        out = term if out is None else out + term
    return out, True


def _product(a: jax.Array, b: jax.Array) -> jax.Array:
    """``a [..., K] @ b [K, N]``; batched by ``vmap`` with ``K ≤ SMALL_CONTRACTION``,
    as ``Σ_k a[..., k] b[k]``.

    A product over a handful of features — the first layer on a small
    observation, the policy head's ``∂x`` over a few actions — does almost no
    arithmetic, yet XLA:CPU's batched dot (the product ``vmap`` over seeds
    makes of it) spends as long on it as on a 64 × 64 layer: 140 µs for
    16 × [128, 2] @ [2, 64] against 3 µs as multiply-adds, which also fuse
    with the bias and the activation. Unbatched, the plain product is as
    fast, and as a fused loop XLA:CPU would split it over its threads at a
    loss (one-seed PPO 12 % slower), so it stays a dot."""
    if a.shape[-1] > SMALL_CONTRACTION:
        return a @ b
    return _small_product(a, b)


@jax.custom_vjp
def _matmul(x: jax.Array, kernel: jax.Array) -> jax.Array:
    return _product(x, kernel)


def _matmul_fwd(x: jax.Array, kernel: jax.Array) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    return _product(x, kernel), (x, kernel)


def _matmul_bwd(res: tuple[jax.Array, jax.Array], g: jax.Array) -> tuple[jax.Array, jax.Array]:
    x, kernel = res
    rows, cot = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])  # [B, in], [B, out]
    if kernel.shape[-1] == 1:
        # One output (a value, Q or 1-d action head): ∂W = Σ_b x_b g_b as a
        # column sum. As a product XLA:CPU emits a slow matrix-vector loop
        # that also re-evaluates the cotangent's producers (SAC's soft target)
        # for every kernel row: 12–20 µs per head per SAC step (its four
        # heads: 9 % of the update).
        grad_kernel = jnp.sum(rows * cot, axis=0)[:, None]
    else:
        x_t = jax.lax.optimization_barrier(rows.T)  # [in, B], kept materialized
        grad_kernel = x_t @ cot
    return _product(g, kernel.T).astype(x.dtype), grad_kernel.astype(kernel.dtype)


_matmul.defvjp(_matmul_fwd, _matmul_bwd)


def make_dot_general(transposed_backward: bool = True) -> Any:
    """``nn.Dense``'s product ``x [..., in] @ kernel [in, out]`` as a
    ``dot_general`` argument: :func:`dense_dot_general` (``transposed_backward``,
    jaxrl's), else ``lax.dot_general`` itself (``experiments/bench/learner.py``
    compares both backward layouts)."""

    def dot_general(
        x: jax.Array,
        kernel: jax.Array,
        dimension_numbers: Any,
        precision: Any = None,
        preferred_element_type: Any = None,
    ) -> jax.Array:
        return _dot_general(x, kernel, dimension_numbers, precision, preferred_element_type, transposed_backward)

    return dot_general


def dense_dot_general(
    x: jax.Array,
    kernel: jax.Array,
    dimension_numbers: Any,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> jax.Array:
    """``nn.Dense``'s product ``x [..., in] @ kernel [in, out]`` — the values and
    gradients of ``lax.dot_general``, with the kernel gradient laid out for XLA:CPU.

    Autodiff of ``x @ kernel`` gives ``∂kernel`` as a product contracting the
    batch axis of both ``x`` and ``g``, which XLA:CPU runs ≈ 1.6× slower than
    the same product with ``xᵀ`` materialized first (a 64 × 256 copy); an
    optimization barrier keeps XLA from folding the transpose back in. Other
    dimension numbers, precisions or kernel ranks use ``lax.dot_general``.
    """
    return _dot_general(x, kernel, dimension_numbers, precision, preferred_element_type, True)


def _dot_general(
    x: jax.Array,
    kernel: jax.Array,
    dimension_numbers: Any,
    precision: Any,
    preferred_element_type: Any,
    transposed_backward: bool,
) -> jax.Array:
    (lhs_contract, rhs_contract), batch = dimension_numbers
    plain = (
        not transposed_backward
        or precision is not None
        or preferred_element_type is not None
        or kernel.ndim != 2
        or tuple(rhs_contract) != (0,)
        or tuple(lhs_contract) != (x.ndim - 1,)
        or tuple(map(tuple, batch)) != ((), ())
    )
    if plain:
        return jax.lax.dot_general(x, kernel, dimension_numbers, precision, preferred_element_type)
    return _matmul(x, kernel)


class _Kernels:
    """Orthogonal kernels for :func:`init_many`: first only their requests are
    recorded (``made=None``), then the made kernels are handed out in order."""

    def __init__(self, made: list[jax.Array] | None = None):
        self.made, self.requests = made, []

    def take(self, shape: tuple[int, int], scale: float, dtype: Any) -> jax.Array:
        index = len(self.requests)
        self.requests.append((shape, scale))
        return jnp.zeros(shape, dtype) if self.made is None else self.made[index].astype(dtype)


# set by :func:`init_many` while it initializes modules
_KERNELS: contextvars.ContextVar[_Kernels | None] = contextvars.ContextVar("jaxrl_init_kernels", default=None)


def orthogonal(scale: float) -> nn.initializers.Initializer:
    """``nn.initializers.orthogonal(scale)`` for ``[in, out]`` kernels — inside
    :func:`init_params` made from its one shared normal draw (same distribution)."""
    own = nn.initializers.orthogonal(scale)

    def init(key: jax.Array, shape: Sequence[int], dtype: Any = jnp.float32) -> jax.Array:
        kernels = _KERNELS.get()
        if kernels is None or len(shape) != 2:
            return own(key, shape, dtype)
        return kernels.take((int(shape[0]), int(shape[1])), scale, dtype)

    return init


def _orthogonal_kernels(key: jax.Array, requests: list[tuple[tuple[int, int], float]]) -> list[jax.Array]:
    """``scale · Q`` for every ``(shape, scale)``: ``Q`` the orthonormal factor
    (signs fixed by ``R``'s diagonal, so Haar-distributed; Mezzadri, 2007) of a
    standard-normal matrix. One normal draw and one batched QR per shape."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i, ((rows, cols), _) in enumerate(requests):
        groups.setdefault((max(rows, cols), min(rows, cols)), []).append(i)
    normals = jax.random.normal(key, (sum(len(ix) * m * n for (m, n), ix in groups.items()),))
    made: list[jax.Array] = [jnp.zeros(())] * len(requests)
    start = 0
    for (m, n), ix in groups.items():
        a = normals[start : start + len(ix) * m * n].reshape(len(ix), m, n)
        start += len(ix) * m * n
        q, r = jnp.linalg.qr(a)
        q = q * jnp.sign(jnp.sum(r * jnp.eye(n), axis=-2))[:, None, :]
        for j, i in enumerate(ix):
            (rows, cols), scale = requests[i]
            made[i] = scale * (q[j] if rows >= cols else q[j].T)
    return made


def init_params(module: nn.Module, key: jax.Array, *example: Any) -> Any:
    """``module.init(key, *example)``, its orthogonal kernels (:func:`orthogonal`)
    made from one normal draw instead of one draw per layer.

    Each random draw is code XLA compiles on its own (≈ 60 ms each on a
    2-core CPU), so per-layer draws and QRs made network initialization about
    a sixth of the compile time of a small SAC program. The kernels have the
    distribution of ``module.init``'s (orthogonal, scaled), not its values.
    """
    return init_many(key, (module, *example))[0]


def init_many(key: jax.Array, *calls: tuple[Any, ...]) -> tuple[Any, ...]:
    """:func:`init_params` of several ``(module, *example)``: one normal draw
    and one QR per kernel shape for all of them."""
    key_init, key_normals = jax.random.split(key)
    # one key per module, sliced once (both passes use it: the first is abstract)
    keys = list(jax.random.split(key_init, len(calls))) if len(calls) > 1 else [key_init]

    def each(kernels: _Kernels, init: Any) -> tuple[Any, ...]:
        token = _KERNELS.set(kernels)
        try:
            return tuple(init(module.init, k, *ex) for k, (module, *ex) in zip(keys, calls, strict=True))
        finally:
            _KERNELS.reset(token)

    recorded = _Kernels()
    each(recorded, lambda f, *args: jax.eval_shape(f, *args))
    made = _orthogonal_kernels(key_normals, recorded.requests) if recorded.requests else []
    return each(_Kernels(made), lambda f, *args: f(*args))
