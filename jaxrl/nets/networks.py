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

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.core.errors import ConfigError
from jaxrl.perf.dense import dense_dot_general, init_many, init_params, orthogonal

__all__ = [
    "MLP",
    "CNN",
    "NoisyDense",
    "ActorCritic",
    "ImplicitQuantileNetwork",
    "QNetwork",
    "TwinCritic",
    "ACTIVATIONS",
    "NORMS",
    "TorsoFactory",
    "dense_dot_general",
    "orthogonal",
    "init_params",
    "init_many",
    "dense",
    "register_torso",
    "torso_names",
    "is_recurrent",
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


NORMS = ("none", "layer_norm")


def _normalize(x: jax.Array, norm: str) -> jax.Array:
    """``x`` through a LayerNorm (``norm="layer_norm"``, before the activation as in
    PQN, Gallici et al., 2024) or unchanged (``"none"``)."""
    return nn.LayerNorm()(x) if norm == "layer_norm" else x


def dense(features: int, scale: float, name: str | None = None, perf: bool = False) -> nn.Dense:
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


class NoisyDense(nn.Module):
    """A factorized Gaussian noisy linear layer (Fortunato et al., 2018, "Noisy
    Networks for Exploration", arXiv:1706.10295) ``[..., in] → [..., features]``::

        y = x (μ_W + σ_W ⊙ ε_in ε_outᵀ) + μ_b + σ_b ⊙ ε_out,   ε = f(N(0, 1)),  f(e) = sgn(e) √|e|

    with ``μ ~ U[−1/√in, 1/√in]`` and ``σ = std / √in`` at initialization. One
    noise sample per application, from the ``"noise"`` rng stream, shared by
    every row of the input (a minibatch sees one noisy network, as in the
    paper; vmap over keys for independent noise per env). Applied without a
    ``"noise"`` rng, the layer is its mean ``x μ_W + μ_b`` (greedy acting,
    evaluation, export)."""

    features: int
    std: float = 0.5

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        fan_in = x.shape[-1]
        bound = 1.0 / np.sqrt(fan_in)
        uniform = lambda key, shape: jax.random.uniform(key, shape, jnp.float32, -bound, bound)  # noqa: E731
        sigma = nn.initializers.constant(self.std * bound)
        mu_w = self.param("mu_kernel", uniform, (fan_in, self.features))
        mu_b = self.param("mu_bias", uniform, (self.features,))
        sigma_w = self.param("sigma_kernel", sigma, (fan_in, self.features))
        sigma_b = self.param("sigma_bias", sigma, (self.features,))
        if not self.has_rng("noise"):
            return x @ mu_w + mu_b
        key_in, key_out = jax.random.split(self.make_rng("noise"))
        scaled = lambda e: jnp.sign(e) * jnp.sqrt(jnp.abs(e))  # noqa: E731
        eps_in = scaled(jax.random.normal(key_in, (fan_in,), mu_w.dtype))
        eps_out = scaled(jax.random.normal(key_out, (self.features,), mu_w.dtype))
        return x @ (mu_w + sigma_w * jnp.outer(eps_in, eps_out)) + (mu_b + sigma_b * eps_out)


class MLP(nn.Module):
    """``[..., *obs] → [..., hidden_sizes[-1]]``, activation after every layer;
    the last ``obs_ndim`` axes are flattened first (an image becomes a vector).
    ``norm``: a LayerNorm before each activation (``"layer_norm"``) or none.
    ``perf``: the layers' XLA:CPU product (:func:`dense`)."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    obs_ndim: int = 1
    perf: bool = False
    norm: str = "none"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        if self.obs_ndim > 1:
            x = x.reshape(x.shape[: x.ndim - self.obs_ndim] + (-1,))
        for width in self.hidden_sizes:
            x = act(_normalize(dense(width, np.sqrt(2.0), perf=self.perf)(x), self.norm))
        return x


def patch_conv(
    lhs: jax.Array,
    rhs: jax.Array,
    window_strides: Sequence[int],
    padding: Any,
    lhs_dilation: Any = None,
    rhs_dilation: Any = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> jax.Array:
    """``lax.conv_general_dilated`` for a ``VALID`` NHWC × HWIO convolution as
    strided slices concatenated into patches ``[N, H', W', kh·kw·C]`` times the
    kernel reshaped to ``[kh·kw·C, O]`` (im2col). Same result; but a convolution
    whose kernel is vmapped (one per member) is batched by XLA into a grouped
    convolution that XLA:CPU runs slowly in the backward pass, while this is a
    batched matmul and slices (``perf``'s path, :class:`CNN`)."""
    del precision, preferred_element_type
    dilated = any(d != 1 for d in (lhs_dilation or ())) or any(d != 1 for d in (rhs_dilation or ()))
    if padding != "VALID" or dilated or feature_group_count != 1 or batch_group_count != 1:
        raise ValueError("patch_conv: only VALID, undilated, ungrouped convolutions")
    kh, kw, cin, cout = rhs.shape
    sh, sw = window_strides
    n, h, w, c = lhs.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    cols = [
        lhs[:, i : i + sh * (oh - 1) + 1 : sh, j : j + sw * (ow - 1) + 1 : sw, :] for i in range(kh) for j in range(kw)
    ]
    patches = jnp.concatenate(cols, axis=-1) if len(cols) > 1 else cols[0]
    return jnp.dot(patches, rhs.reshape(kh * kw * cin, cout))


class CNN(nn.Module):
    """``[..., H, W, C] → [..., hidden_sizes[-1]]``: ``VALID`` convolutions
    (``channels[i]`` filters of ``kernels[i]``² with stride ``strides[i]``, the
    activation after each), flattened, then the MLP of ``hidden_sizes``
    (the MinAtar network of Young & Tian, 2019, with the defaults 16 × 3², 128).
    Kernels orthogonal with gain √2, zero biases; ``perf`` computes the
    convolutions as patches × kernel (:func:`patch_conv`); ``norm`` as :class:`MLP`'s,
    after every convolution and dense layer."""

    channels: Sequence[int] = (16,)
    kernels: Sequence[int] = (3,)
    strides: Sequence[int] = (1,)
    hidden_sizes: Sequence[int] = (128,)
    activation: str = "relu"
    perf: bool = False
    norm: str = "none"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        batch = x.shape[:-3]
        x = x.reshape((-1,) + x.shape[-3:])
        for width, kernel, stride in zip(self.channels, self.kernels, self.strides, strict=True):
            conv = nn.Conv(
                width,
                (kernel, kernel),
                strides=(stride, stride),
                padding="VALID",
                kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)),
                bias_init=nn.initializers.zeros,
                conv_general_dilated=patch_conv if self.perf else None,
            )
            x = act(_normalize(conv(x), self.norm))
        x = x.reshape(batch + (-1,))
        for width in self.hidden_sizes:
            x = act(_normalize(dense(width, np.sqrt(2.0), perf=self.perf)(x), self.norm))
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
    squash: str = "clip"  # continuous actions: "tanh" or "clip" (read by jaxrl.algos.ppo.distribution)
    log_std_init: float = 0.0
    torso: nn.Module | None = None  # [..., *obs_shape] → [..., features]
    perf: bool = False

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


class QNetwork(nn.Module):
    """Action values ``obs [..., *obs_shape] → Q [..., n]`` for ``n`` discrete actions:
    ``torso`` under a linear head, or under a dueling head (Wang et al., 2016,
    arXiv:1511.06581), ``Q = V + A − mean_a A``. With ``atoms > 0`` each action
    gets a distribution instead, ``[..., n, atoms]`` (categorical logits or quantile
    locations; dueling combines them per atom, as Rainbow does). ``perf`` as
    :class:`ActorCritic`'s."""

    action_dim: int
    torso: nn.Module
    dueling: bool = False
    perf: bool = False
    atoms: int = 0  # 0: one value per action; else a distribution of this many per action
    noise_std: float = 0.0  # > 0: the head's layers are NoisyDense with this σ0 (Rainbow)

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        x = with_perf(self.torso, self.perf).clone(parent=self, name="q_torso")(obs)
        return q_head(x, self.action_dim, self.dueling, self.perf, self.atoms, self.noise_std)


def q_head(
    x: jax.Array, action_dim: int, dueling: bool, perf: bool, atoms: int = 0, noise_std: float = 0.0
) -> jax.Array:
    """Inside a module's ``nn.compact`` method: features ``[..., d]`` → ``[..., n]``
    (``atoms > 0``: ``[..., n, atoms]``) by a linear head, or a dueling one whose
    advantages are centred over the actions (per atom). ``noise_std > 0``: the
    head's layers are :class:`NoisyDense` (noisy when applied with a ``"noise"`` rng)."""
    per_action = max(atoms, 1)

    def shaped(y: jax.Array) -> jax.Array:
        return y if atoms == 0 else y.reshape(*y.shape[:-1], -1, atoms)

    def layer(features: int, name: str) -> nn.Module:
        if noise_std > 0:
            return NoisyDense(features, noise_std, name=name)
        return dense(features, 1.0, name=name, perf=perf)

    if not dueling:
        return shaped(layer(action_dim * per_action, "q_head")(x))
    advantage = shaped(layer(action_dim * per_action, "advantage_head")(x))
    value = shaped(layer(per_action, "value_head")(x))
    action_axis = -1 if atoms == 0 else -2
    return value + advantage - jnp.mean(advantage, axis=action_axis, keepdims=True)


# Taylor coefficients of cos about 0, through r¹⁶ (|error| ≤ π¹⁸ / 18! ≈ 1.4e-7 on [−π, π])
_COS_TAYLOR = tuple((-1) ** k / math.factorial(2 * k) for k in range(9))


def cosine_features(taus: jax.Array, n: int) -> jax.Array:
    """IQN's level features ``cos(π i τ)``, ``i = 0 … n − 1``: ``taus [...] →
    [..., n]``.

    The argument is reduced in turns, ``u = i τ / 2``, ``r = 2π (u − round(u))``
    in ``[−π, π]``, and ``cos r`` is its Taylor polynomial through ``r¹⁶``
    (Horner): elementwise multiply-adds that XLA fuses, where ``jnp.cos`` on
    ``[B, K, n]`` is a large share of IQN's gradient step on a CPU. Reducing
    ``u`` rather than the rounded product ``π i τ`` is also more accurate in
    float32 (within 1e-5 of float64's ``cos(π i τ)`` for ``n ≤ 64``; tested)."""
    i = jnp.arange(n, dtype=jnp.float32)
    u = 0.5 * i * taus[..., None]
    r = (u - jnp.round(u)) * np.float32(2.0 * np.pi)
    r2 = r * r
    acc = jnp.full_like(r2, _COS_TAYLOR[-1])
    for c in reversed(_COS_TAYLOR[:-1]):
        acc = acc * r2 + np.float32(c)
    return acc


class ImplicitQuantileNetwork(nn.Module):
    """IQN's return quantiles at given levels (Dabney, Ostrovski, Silver & Munos,
    2018, arXiv:1806.06923): ``(obs [..., *obs_shape], taus [..., K]) → [..., n, K]``.
    Each level is embedded by ``ReLU(W cos(π i τ) + b)``, ``i = 0 … embedding_dim − 1``,
    multiplied elementwise with the torso's features, passed through one more
    dense layer with ReLU and the (optionally dueling) head. Without ``taus``,
    the ``act_quantiles`` evenly spaced midpoints ``(2k − 1) / 2K``: a
    deterministic greedy policy (and the shapes ``init`` sees)."""

    action_dim: int
    torso: nn.Module
    dueling: bool = False
    perf: bool = False
    embedding_dim: int = 64
    act_quantiles: int = 32

    @nn.compact
    def __call__(self, obs: jax.Array, taus: jax.Array | None = None) -> jax.Array:
        x = with_perf(self.torso, self.perf).clone(parent=self, name="q_torso")(obs)  # [..., d]
        if taus is None:
            k = self.act_quantiles
            mid = (2.0 * jnp.arange(1, k + 1, dtype=jnp.float32) - 1.0) / (2.0 * k)
            taus = jnp.broadcast_to(mid, x.shape[:-1] + (k,))
        cosines = cosine_features(taus, self.embedding_dim)  # [..., K, E]
        width = x.shape[-1]
        phi = nn.relu(dense(width, np.sqrt(2.0), name="tau_embedding", perf=self.perf)(cosines))
        h = nn.relu(dense(width, np.sqrt(2.0), name="q_hidden", perf=self.perf)(x[..., None, :] * phi))
        return jnp.swapaxes(q_head(h, self.action_dim, self.dueling, self.perf), -1, -2)  # [..., K, n] → [..., n, K]


class TwinCritic(nn.Module):
    """Twin Q-functions of a continuous-action learner (SAC, TD3):
    ``(obs [..., obs], action [..., d]) → [2, ...]``, each a torso (default: an
    MLP of ``hidden_sizes``) on ``[obs, action]`` under a linear head; with
    ``atoms`` > 0, each head gives the logits of a categorical return
    distribution, ``[2, ..., atoms]``. ``norm``: the default MLPs' LayerNorm
    before each activation (``"layer_norm"``) or none."""

    hidden_sizes: Sequence[int] = (256, 256)
    activation: str = "relu"
    torso: nn.Module | None = None  # [..., obs + action] → [..., features]
    perf: bool = False
    atoms: int = 0
    norm: str = "none"

    @nn.compact
    def __call__(self, obs: jax.Array, action: jax.Array) -> jax.Array:
        x = jnp.concatenate([obs, action], axis=-1)

        def torso(i: int) -> nn.Module:
            if self.torso is None:
                return MLP(self.hidden_sizes, self.activation, perf=self.perf, norm=self.norm)
            return with_perf(self.torso, self.perf).clone(parent=self, name=f"q{i}_torso")

        if self.atoms:
            return jnp.stack([dense(self.atoms, 1.0, perf=self.perf)(torso(i)(x)) for i in range(2)])
        qs = [dense(1, 1.0, perf=self.perf)(torso(i)(x))[..., 0] for i in range(2)]
        return jnp.stack(qs)


def with_perf(module: nn.Module, perf: bool) -> nn.Module:
    """``module`` with its ``perf`` field set (a module without one, as given)."""
    if "perf" in {f.name for f in dataclasses.fields(module)}:
        return module.clone(perf=perf)
    return module


def init(module: nn.Module, key: jax.Array, *example: Any, perf: bool = False) -> Any:
    """A module's parameters: :func:`init_params` (one draw for every orthogonal
    kernel) with ``perf``, ``module.init(key, *example)`` itself without."""
    return init_params(module, key, *example) if perf else module.init(key, *example)


# ---------------------------------------------------------------------------
# The torso registry
# ---------------------------------------------------------------------------

# (algo_config, obs_shape) -> a torso module [..., *obs_shape] → [..., features]
TorsoFactory = Callable[[Any, tuple[int, ...]], nn.Module]


def _mlp(algo: Any, obs_shape: tuple[int, ...]) -> nn.Module:
    return MLP(tuple(algo.hidden_sizes), algo.activation, len(obs_shape), norm=getattr(algo, "norm", "none"))


# Conv layout defaults for configs without the fields (PPO's config has them).
CONV_DEFAULTS = {"conv_channels": (16,), "conv_kernels": (3,), "conv_strides": (1,)}


def conv_layout(algo: Any) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``(channels, kernels, strides)`` of an algorithm config (defaults where it has none)."""
    return tuple(tuple(getattr(algo, name, default)) for name, default in CONV_DEFAULTS.items())  # type: ignore[return-value]


def _cnn(algo: Any, obs_shape: tuple[int, ...]) -> nn.Module:
    if len(obs_shape) != 3:
        raise ConfigError(
            "algo.network",
            "cnn",
            f"needs image observations [H, W, C]; this env's are {list(obs_shape)}",
            "pass algo.network=mlp (or auto)",
        )
    channels, kernels, strides = conv_layout(algo)
    return CNN(
        channels, kernels, strides, tuple(algo.hidden_sizes), algo.activation, norm=getattr(algo, "norm", "none")
    )


def _auto(algo: Any, obs_shape: tuple[int, ...]) -> nn.Module:
    return _cnn(algo, obs_shape) if len(obs_shape) == 3 else _mlp(algo, obs_shape)


_TORSOS: dict[str, TorsoFactory] = {"auto": _auto, "mlp": _mlp, "cnn": _cnn}
_RECURRENT: set[str] = set()


def register_torso(name: str, factory: TorsoFactory, *, replace: bool = False, recurrent: bool = False) -> TorsoFactory:
    """Make ``algo.network=NAME`` build its torso with ``factory(algo_config,
    obs_shape)`` in this process (CLI, sweeps, resume, evaluate, export).
    A name already taken needs ``replace=True``. ``recurrent``: the torso
    keeps a carry (the interface of :mod:`jaxrl.nets.recurrent`). Returns ``factory``."""
    if not callable(factory):
        raise TypeError(f"register_torso({name!r}, ...) takes a callable (algo_config, obs_shape) -> flax module")
    if name in _TORSOS and not replace and _TORSOS[name] is not factory:
        raise ValueError(f"torso {name!r} is registered already (pass replace=True)")
    _TORSOS[name] = factory
    (_RECURRENT.add if recurrent else _RECURRENT.discard)(name)
    return factory


def is_recurrent(name: str) -> bool:
    """Whether the torso registered as ``name`` keeps a carry (a GRU, an LRU, …)."""
    return name in _RECURRENT


def torso_names() -> list[str]:
    """Every registered torso name (``auto``, ``mlp``, ``cnn`` first)."""
    return list(_TORSOS)


def check_network(algo: Any) -> None:
    """``algo.network`` names a registered torso (ConfigError otherwise)."""
    if algo.network not in _TORSOS:
        raise ConfigError(
            "algo.network",
            algo.network,
            f"must be one of {', '.join(_TORSOS)}",
            "pass algo.network=auto (an MLP, or a CNN for image observations), or register yours with jaxrl.nets.register_torso",
        )


def make_torso(name: str, algo: Any, obs_shape: tuple[int, ...]) -> nn.Module:
    """The torso ``algo.network=name`` stands for (KeyError if none)."""
    return _TORSOS[name](algo, tuple(obs_shape))
