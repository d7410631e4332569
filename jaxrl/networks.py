"""flax.linen networks: MLP torsos with policy and value heads.

Orthogonal initialization as in the PPO implementation-details literature
(Huang et al., 2022, "The 37 Implementation Details of PPO"): hidden layers
gain √2, policy head 0.01, value head 1.0, zero biases.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["MLP", "ActorCritic", "ACTIVATIONS"]

ACTIVATIONS = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "elu": nn.elu,
    "gelu": nn.gelu,
    "silu": nn.silu,
}


def _dense(features: int, scale: float, name: str | None = None) -> nn.Dense:
    return nn.Dense(
        features,
        kernel_init=nn.initializers.orthogonal(scale),
        bias_init=nn.initializers.zeros,
        name=name,
    )


class MLP(nn.Module):
    """``[..., d_in] → [..., hidden_sizes[-1]]``, activation after every layer."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        for width in self.hidden_sizes:
            x = act(_dense(width, np.sqrt(2.0))(x))
        return x


class ActorCritic(nn.Module):
    """Policy and value from one observation.

    ``__call__(obs [..., *obs_shape]) -> (policy_out, value [...])`` where
    ``policy_out`` is logits ``[..., n]`` (discrete) or the Gaussian mean
    ``[..., d]`` (continuous; the state-independent ``log_std`` parameter is
    read with :meth:`log_std`).
    """

    action_dim: int
    discrete: bool
    obs_ndim: int = 1
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    shared_torso: bool = False
    squash: str = "clip"  # continuous actions: "tanh" or "clip" (read by jaxrl.ppo.distribution)
    log_std_init: float = 0.0

    def setup(self) -> None:
        self.actor_torso = MLP(self.hidden_sizes, self.activation)
        if not self.shared_torso:
            self.critic_torso = MLP(self.hidden_sizes, self.activation)
        self.policy_head = _dense(self.action_dim, 0.01)
        self.value_head = _dense(1, 1.0)
        if not self.discrete:
            self.log_std_param = self.param("log_std", nn.initializers.constant(self.log_std_init), (self.action_dim,))

    def _flatten(self, obs: jax.Array) -> jax.Array:
        if self.obs_ndim == 1:
            return obs
        lead = obs.shape[: obs.ndim - self.obs_ndim]
        return obs.reshape(lead + (-1,))

    def __call__(self, obs: jax.Array) -> tuple[jax.Array, jax.Array]:
        x = self._flatten(obs)
        hidden = self.actor_torso(x)
        policy_out = self.policy_head(hidden)
        critic_hidden = hidden if self.shared_torso else self.critic_torso(x)
        value = self.value_head(critic_hidden)[..., 0]
        return policy_out, value

    def policy(self, obs: jax.Array) -> jax.Array:
        """The policy head ``[..., n | d]`` without the critic."""
        return self.policy_head(self.actor_torso(self._flatten(obs)))

    def value(self, obs: jax.Array) -> jax.Array:
        """``V(obs)`` ``[...]`` without the policy head."""
        x = self._flatten(obs)
        hidden = self.actor_torso(x) if self.shared_torso else self.critic_torso(x)
        return self.value_head(hidden)[..., 0]

    def log_std(self) -> jax.Array:
        """State-independent log standard deviation ``[d]`` (continuous only)."""
        return self.log_std_param if not self.discrete else jnp.zeros((0,))
