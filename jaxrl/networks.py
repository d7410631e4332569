"""flax.linen networks: torsos from a registry, with policy and value heads.

A *torso* maps an observation ``[..., *obs_shape]`` to features
``[..., features]``; algorithms put their heads on it. Torsos are chosen by name
(``algo.network=mlp``; :func:`register_torso` adds one from outside the
package) or passed as a flax module to ``jaxrl.make_train(config, network=…)``.

Orthogonal initialization as in the PPO implementation-details literature
(Huang et al., 2022, "The 37 Implementation Details of PPO"): hidden layers
gain √2, policy head 0.01, value head 1.0, zero biases; :func:`init_params`
makes all of a network's orthogonal kernels from one random draw.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_batching import custom_vmap

from jaxrl.config import ConfigError

__all__ = [
    "MLP",
    "ActorCritic",
    "ACTIVATIONS",
    "TorsoFactory",
    "dense_dot_general",
    "orthogonal",
    "init_params",
    "init_many",
    "dense",
    "register_torso",
    "torso_names",
    "make_torso",
    "check_network",
    "with_perf",
    "init",
]

ACTIVATIONS = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "silu": nn.silu,
}


# Dense layers compute their kernel gradient as ``xᵀ [in, B] @ g [B, out]``
# with ``xᵀ`` materialized (see :func:`dense_dot_general`); False gives
# ``lax.dot_general``'s own backward (experiments/bench/learner.py compares both).
TRANSPOSED_BACKWARD = True


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
    (lhs_contract, rhs_contract), batch = dimension_numbers
    plain = (
        not TRANSPOSED_BACKWARD
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


def dense(features: int, scale: float, name: str | None = None, perf: bool = True) -> nn.Dense:
    """``nn.Dense`` ``[..., in] → [..., features]``: orthogonal kernel of gain
    ``scale`` (:func:`orthogonal`), zero bias; the :func:`dense_dot_general`
    product with ``perf`` (jaxrl.perf), ``lax.dot_general``'s without."""
    return nn.Dense(
        features,
        kernel_init=orthogonal(scale),
        bias_init=nn.initializers.zeros,
        name=name,
        dot_general=dense_dot_general if perf else None,
    )


class MLP(nn.Module):
    """``[..., *obs] → [..., hidden_sizes[-1]]``, activation after every layer;
    the last ``obs_ndim`` axes are flattened first (an image becomes a vector).
    ``perf``: the layers' XLA:CPU product (:func:`dense`)."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    obs_ndim: int = 1
    perf: bool = True

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        if self.obs_ndim > 1:
            x = x.reshape(x.shape[: x.ndim - self.obs_ndim] + (-1,))
        for width in self.hidden_sizes:
            x = act(dense(width, np.sqrt(2.0), perf=self.perf)(x))
        return x


class ActorCritic(nn.Module):
    """Policy and value from one observation.

    ``__call__(obs [..., *obs_shape]) -> (policy_out, value [...])`` where
    ``policy_out`` is logits ``[..., n]`` (discrete) or the Gaussian mean
    ``[..., d]`` (continuous; the state-independent ``log_std`` parameter is
    read with :meth:`log_std`). ``torso`` (default: an :class:`MLP` of
    ``hidden_sizes``) is copied for the actor and, unless ``shared_torso``, the
    critic; each copy has its own parameters. ``perf`` (jaxrl.perf) selects the
    XLA:CPU product in the heads and in every torso that has a ``perf`` field;
    the rollout and learner read it too.
    """

    action_dim: int
    discrete: bool
    obs_ndim: int = 1
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    squash: str = "clip"  # continuous actions: "tanh" or "clip" (read by jaxrl.ppo.distribution)
    log_std_init: float = 0.0
    torso: nn.Module | None = None  # [..., *obs_shape] → [..., features]
    perf: bool = True

    def _make_torso(self) -> nn.Module:
        if self.torso is None:
            return MLP(self.hidden_sizes, self.activation, self.obs_ndim, self.perf)
        return with_perf(self.torso, self.perf).clone()

    def setup(self) -> None:
        self.actor_torso = self._make_torso()
        if not self.shared_torso:
            self.critic_torso = self._make_torso()
        self.policy_head = dense(self.action_dim, 0.01, perf=self.perf)
        self.value_head = dense(1, 1.0, perf=self.perf)
        if not self.discrete:
            self.log_std_param = self.param("log_std", nn.initializers.constant(self.log_std_init), (self.action_dim,))

    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        hidden = self.actor_torso(obs)
        policy_out = self.policy_head(hidden)
        critic_hidden = hidden if self.shared_torso else self.critic_torso(obs)
        value = self.value_head(critic_hidden)[..., 0]
        return policy_out, value

    def policy(self, obs: jax.Array) -> jax.Array:
        """The policy head ``[..., n | d]`` without the critic."""
        return self.policy_head(self.actor_torso(obs))

    def value(self, obs: jax.Array) -> jax.Array:
        """``V(obs)`` ``[...]`` without the policy head."""
        hidden = self.actor_torso(obs) if self.shared_torso else self.critic_torso(obs)
        return self.value_head(hidden)[..., 0]

    def log_std(self) -> jax.Array:
        """State-independent log standard deviation ``[d]`` (continuous only)."""
        return self.log_std_param if not self.discrete else jnp.zeros((0,))


def with_perf(module: nn.Module, perf: bool) -> nn.Module:
    """``module`` with its ``perf`` field set (a module without one, as given)."""
    if "perf" in {f.name for f in dataclasses.fields(module)}:
        return module.clone(perf=perf)
    return module


def init(module: nn.Module, key: jax.Array, *example: Any, perf: bool = True) -> Any:
    """A module's parameters: :func:`init_params` (one draw for every orthogonal
    kernel) with ``perf``, ``module.init(key, *example)`` itself without."""
    return init_params(module, key, *example) if perf else module.init(key, *example)


# ---------------------------------------------------------------------------
# The torso registry
# ---------------------------------------------------------------------------

# (algo_config, obs_shape) -> a torso module [..., *obs_shape] → [..., features]
TorsoFactory = Callable[[Any, tuple[int, ...]], nn.Module]


def _mlp(algo: Any, obs_shape: tuple[int, ...]) -> nn.Module:
    return MLP(tuple(algo.hidden_sizes), algo.activation, len(obs_shape))


_TORSOS: dict[str, TorsoFactory] = {"mlp": _mlp}


def register_torso(name: str, factory: TorsoFactory, *, replace: bool = False) -> TorsoFactory:
    """Make ``algo.network=NAME`` build its torso with ``factory(algo_config,
    obs_shape)`` in this process (CLI, sweeps, resume, evaluate, export).
    A name already taken needs ``replace=True``. Returns ``factory``."""
    if not callable(factory):
        raise TypeError(f"register_torso({name!r}, ...) takes a callable (algo_config, obs_shape) -> flax module")
    if name in _TORSOS and not replace and _TORSOS[name] is not factory:
        raise ValueError(f"torso {name!r} is registered already (pass replace=True)")
    _TORSOS[name] = factory
    return factory


def torso_names() -> list[str]:
    """Every registered torso name (``mlp`` first)."""
    return list(_TORSOS)


def check_network(algo: Any) -> None:
    """``algo.network`` names a registered torso (ConfigError otherwise)."""
    if algo.network not in _TORSOS:
        raise ConfigError(
            "algo.network",
            algo.network,
            f"must be one of {', '.join(_TORSOS)}",
            "pass algo.network=mlp, or register yours with jaxrl.networks.register_torso",
        )


def make_torso(name: str, algo: Any, obs_shape: tuple[int, ...]) -> nn.Module:
    """The torso ``algo.network=name`` stands for (KeyError if none)."""
    return _TORSOS[name](algo, tuple(obs_shape))
