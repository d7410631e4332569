"""Recurrent torsos and the recurrent actor-critic.

A *recurrent torso* is a flax module with

* ``carry_size`` — the width ``C`` of its carry, a float32 ``[..., C]``
  that is all zeros at an episode's start;
* ``__call__(carry [..., C], obs [..., *obs], reset [...] | None) -> (carry, features [..., F])``
  — one step; ``reset`` zeroes the carry first where true;
* ``sequence(carry [B..., C], obs [T, B..., *obs], reset [T, B...]) -> (carry, features [T, B..., F])``
  — ``T`` steps at once (the learner's pass over a rollout), equal to ``T``
  calls of the one-step form.

Two are built in: :class:`GRU` (``algo.network=gru``, a sequential scan over
time) and :class:`LRU` (``algo.network=lru``: the Linear Recurrent Unit of
Orvieto et al., 2023, "Resurrecting Recurrent Neural Networks for Long
Sequences", arXiv:2303.06349 — a diagonal complex linear recurrence whose
sequence pass is an associative scan, ``O(log T)`` deep on accelerators).
Both encode the observation first (an MLP, or the CNN for image observations).
:class:`RecurrentActorCritic` puts separate actor and critic heads on one
recurrent torso.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.nets.networks import ACTIVATIONS, CNN, MLP, conv_layout, dense, orthogonal, register_torso, with_perf

__all__ = ["GRU", "LRU", "RecurrentActorCritic", "reset_carry", "linear_recurrence"]


def reset_carry(carry: jax.Array, reset: jax.Array | None) -> jax.Array:
    """``carry`` ``[..., C]`` zeroed where ``reset`` ``[...]`` is true."""
    if reset is None:
        return carry
    return jnp.where(reset[..., None], jnp.zeros_like(carry), carry)


def _encoder(module: nn.Module | None, hidden_sizes: Sequence[int], activation: str, obs_ndim: int, perf: bool):
    if module is not None:
        return with_perf(module, perf).clone()
    return MLP(tuple(hidden_sizes), activation, obs_ndim, perf)


class GRU(nn.Module):
    """Observation encoder, then a GRU cell (Cho et al., 2014) of ``size`` units:

    ::

        r = σ(W_r x + U_r h + b_r),  z = σ(W_z x + U_z h + b_z)
        n = tanh(W_n x + b_n + r ⊙ (U_n h + c_n)),  h' = (1 − z) ⊙ n + z ⊙ h

    (flax's ``GRUCell`` equations). The input projections of a whole sequence
    are one matrix product; the scan over time does only ``U h``.
    ``encoder``: a torso ``[..., *obs] → [..., F]`` (default: the MLP of ``hidden_sizes``).
    """

    size: int = 128
    hidden_sizes: Sequence[int] = (64,)
    activation: str = "tanh"
    obs_ndim: int = 1
    encoder: nn.Module | None = None
    perf: bool = False

    recurrent: ClassVar[bool] = True

    @property
    def carry_size(self) -> int:
        return self.size

    def setup(self) -> None:
        self.encode = _encoder(self.encoder, self.hidden_sizes, self.activation, self.obs_ndim, self.perf)
        self.inputs = dense(3 * self.size, 1.0, perf=self.perf)
        self.recurrent_kernel = self.param("recurrent_kernel", orthogonal(1.0), (self.size, 3 * self.size))
        self.recurrent_bias = self.param("recurrent_bias", nn.initializers.zeros, (self.size,))

    def _cell(self, kernel: jax.Array, bias: jax.Array, h: jax.Array, gx: jax.Array) -> jax.Array:
        n = self.size
        gh = h @ kernel
        r = jax.nn.sigmoid(gx[..., :n] + gh[..., :n])
        z = jax.nn.sigmoid(gx[..., n : 2 * n] + gh[..., n : 2 * n])
        cand = jnp.tanh(gx[..., 2 * n :] + r * (gh[..., 2 * n :] + bias))
        return (1.0 - z) * cand + z * h

    def __call__(self, carry: jax.Array, obs: jax.Array, reset: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        gx = self.inputs(self.encode(obs))
        h = self._cell(self.recurrent_kernel, self.recurrent_bias, reset_carry(carry, reset), gx)
        return h, h

    def sequence(self, carry: jax.Array, obs: jax.Array, reset: jax.Array) -> tuple[jax.Array, jax.Array]:
        gx = self.inputs(self.encode(obs))  # [T, B..., 3H]
        kernel, bias = self.recurrent_kernel, self.recurrent_bias

        def body(h, xs):
            g, r = xs
            h = self._cell(kernel, bias, reset_carry(h, r), g)
            return h, h

        return jax.lax.scan(body, carry, (gx, reset))


def linear_recurrence(
    a: jax.Array, b: jax.Array, h0: jax.Array, method: str = "associative"
) -> tuple[jax.Array, jax.Array]:
    """``h_t = a_t ⊙ h_{t−1} + b_t`` over the leading axis from ``h0``:
    ``(h_T, h [T, ...])``. ``method="associative"``: ``lax.associative_scan``
    with ``(a₁, b₁) ∘ (a₂, b₂) = (a₁a₂, a₂b₁ + b₂)`` (the first ``b`` carries
    ``a₀ h0``); ``"scan"``: the sequential loop."""
    if method == "scan":

        def body(h, xs):
            at, bt = xs
            h = at * h + bt
            return h, h

        return jax.lax.scan(body, h0, (a, b))
    b = b.at[0].add(a[0] * h0)

    def combine(left, right):
        a1, b1 = left
        a2, b2 = right
        return a1 * a2, a2 * b1 + b2

    _, h = jax.lax.associative_scan(combine, (a, b))
    return h[-1], h


class LRU(nn.Module):
    """Observation encoder ``x`` (``[..., F]``), then a Linear Recurrent Unit of
    ``size`` complex states (Orvieto et al., 2023, arXiv:2303.06349)::

        λ = exp(−exp(ν) + i·exp(θ)),  γ = √(1 − |λ|²)
        h_t = λ ⊙ h_{t−1} + γ ⊙ (x_t B)          (h reset to 0 at episode starts)
        y_t = GELU(Re(h_t C) + D ⊙ x_t) + x_t     (features [..., F])

    with ``|λ|`` initialized uniformly on the ring ``[r_min, r_max]`` and the
    phase on ``[0, max_phase]``. The carry is ``[Re h, Im h]`` (float32
    ``[..., 2·size]``). ``method``: the learner's sequence pass,
    ``associative`` (parallel over time) or ``scan`` (sequential; the same values).
    """

    size: int = 128
    hidden_sizes: Sequence[int] = (64,)
    activation: str = "tanh"
    obs_ndim: int = 1
    encoder: nn.Module | None = None
    features: int = 0  # the encoder's output width; 0: hidden_sizes[-1]
    r_min: float = 0.4
    r_max: float = 0.99
    max_phase: float = float(np.pi)
    method: str = "associative"
    perf: bool = False

    recurrent: ClassVar[bool] = True

    @property
    def carry_size(self) -> int:
        return 2 * self.size

    def setup(self) -> None:
        self.encode = _encoder(self.encoder, self.hidden_sizes, self.activation, self.obs_ndim, self.perf)
        r_min, r_max, n = self.r_min, self.r_max, self.size
        f = self.features or int(self.hidden_sizes[-1])

        def nu_init(key, shape, dtype=jnp.float32):
            u = jax.random.uniform(key, shape, dtype)
            return jnp.log(-0.5 * jnp.log(u * (r_max**2 - r_min**2) + r_min**2))

        def theta_init(key, shape, dtype=jnp.float32):
            return jnp.log(jnp.maximum(self.max_phase * jax.random.uniform(key, shape, dtype), 1e-4))

        def normal(scale):
            return lambda key, shape, dtype=jnp.float32: scale * jax.random.normal(key, shape, dtype)

        self.nu_log = self.param("nu_log", nu_init, (n,))
        self.theta_log = self.param("theta_log", theta_init, (n,))
        self.b_re = self.param("B_re", normal(1.0 / np.sqrt(2 * f)), (f, n))
        self.b_im = self.param("B_im", normal(1.0 / np.sqrt(2 * f)), (f, n))
        self.c_re = self.param("C_re", normal(1.0 / np.sqrt(n)), (n, f))
        self.c_im = self.param("C_im", normal(1.0 / np.sqrt(n)), (n, f))
        self.d = self.param("D", normal(1.0), (f,))

    def _lambda(self) -> tuple[jax.Array, jax.Array]:
        lam = jnp.exp(-jnp.exp(self.nu_log) + 1j * jnp.exp(self.theta_log))
        gamma = jnp.sqrt(1.0 - jnp.abs(lam) ** 2)
        return lam, gamma

    def _readout(self, h: jax.Array, x: jax.Array) -> jax.Array:
        y = jnp.real(h) @ self.c_re - jnp.imag(h) @ self.c_im + self.d * x
        return nn.gelu(y) + x

    def _drive(self, x: jax.Array, gamma: jax.Array) -> jax.Array:
        return (x @ self.b_re + 1j * (x @ self.b_im)) * gamma

    def __call__(self, carry: jax.Array, obs: jax.Array, reset: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        x = self.encode(obs)
        lam, gamma = self._lambda()
        carry = reset_carry(carry, reset)
        h = carry[..., : self.size] + 1j * carry[..., self.size :]
        h = lam * h + self._drive(x, gamma)
        return jnp.concatenate([jnp.real(h), jnp.imag(h)], -1).astype(jnp.float32), self._readout(h, x)

    def sequence(self, carry: jax.Array, obs: jax.Array, reset: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = self.encode(obs)  # [T, B..., F]
        lam, gamma = self._lambda()
        a = jnp.where(reset[..., None], 0.0, 1.0) * lam  # [T, B..., H]
        h0 = carry[..., : self.size] + 1j * carry[..., self.size :]
        last, h = linear_recurrence(a, self._drive(x, gamma), h0, self.method)
        out = jnp.concatenate([jnp.real(last), jnp.imag(last)], -1).astype(jnp.float32)
        return out, self._readout(h, x)


class RecurrentActorCritic(nn.Module):
    """Policy and value on one recurrent torso ``core``: after it, the actor
    and the critic each have their own hidden layer of ``head_size`` units
    (gain √2) under the policy head (0.01) and the value head (1.0).

    ``__call__(carry, obs, reset) -> (carry, policy_out, value)`` (one step);
    :meth:`step` and :meth:`sequence` give the torso's features, which
    :meth:`policy_from` and :meth:`value_from` turn into the heads' outputs.
    """

    action_dim: int
    discrete: bool
    core: nn.Module
    head_size: int = 64
    activation: str = "tanh"
    squash: str = "clip"
    log_std_init: float = 0.0
    perf: bool = False

    recurrent: ClassVar[bool] = True
    shared_torso: ClassVar[bool] = True

    @property
    def carry_size(self) -> int:
        return self.core.carry_size

    def initialize_carry(self, batch_shape: tuple[int, ...]) -> jax.Array:
        """The carry at an episode's start: float32 zeros ``[*batch_shape, C]``."""
        return jnp.zeros((*batch_shape, self.carry_size), jnp.float32)

    def setup(self) -> None:
        self.torso = with_perf(self.core, self.perf).clone()
        self.actor_hidden = dense(self.head_size, np.sqrt(2.0), perf=self.perf)
        self.critic_hidden = dense(self.head_size, np.sqrt(2.0), perf=self.perf)
        self.policy_head = dense(self.action_dim, 0.01, perf=self.perf)
        self.value_head = dense(1, 1.0, perf=self.perf)
        if not self.discrete:
            self.log_std_param = self.param("log_std", nn.initializers.constant(self.log_std_init), (self.action_dim,))

    def __call__(
        self, carry: jax.Array, obs: jax.Array, reset: jax.Array | None = None
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        carry, features = self.torso(carry, obs, reset)
        return carry, self.policy_from(features), self.value_from(features)

    def step(self, carry: jax.Array, obs: jax.Array, reset: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """One step of the torso: ``(carry, features)``."""
        return self.torso(carry, obs, reset)

    def sequence(self, carry: jax.Array, obs: jax.Array, reset: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``T`` steps of the torso: ``(carry, features [T, ...])``."""
        return self.torso.sequence(carry, obs, reset)

    def policy_from(self, features: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        return self.policy_head(act(self.actor_hidden(features)))

    def value_from(self, features: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        return self.value_head(act(self.critic_hidden(features)))[..., 0]

    def log_std(self) -> jax.Array:
        return self.log_std_param if not self.discrete else jnp.zeros((0,))


def _encoder_for(algo: Any, obs_shape: tuple[int, ...]) -> nn.Module | None:
    if len(obs_shape) == 3:
        channels, kernels, strides = conv_layout(algo)
        return CNN(channels, kernels, strides, tuple(algo.hidden_sizes), algo.activation)
    return None


def _gru(algo: Any, obs_shape: tuple[int, ...]) -> nn.Module:
    size = int(getattr(algo, "rnn_size", 128))
    return GRU(size, tuple(algo.hidden_sizes), algo.activation, len(obs_shape), _encoder_for(algo, obs_shape))


def _lru(algo: Any, obs_shape: tuple[int, ...]) -> nn.Module:
    size = int(getattr(algo, "rnn_size", 128))
    return LRU(size, tuple(algo.hidden_sizes), algo.activation, len(obs_shape), _encoder_for(algo, obs_shape))


register_torso("gru", _gru, recurrent=True)
register_torso("lru", _lru, recurrent=True)
