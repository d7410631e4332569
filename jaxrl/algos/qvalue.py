"""What the Q-learners share (PQN and the DQN family): the Q-network over a
registered torso with a linear or dueling head, the value heads (one value per
action, or a categorical, quantile or implicit quantile distribution:
:class:`ValueHead`), the
regression loss of ``Q(s, a)`` to given targets, and the checks of their
network settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl.algos.onpolicy import validate_torso
from jaxrl.core.checks import require_one_of
from jaxrl.core.errors import ConfigError
from jaxrl.envs.core import Discrete, Env
from jaxrl.nets.networks import NORMS, ImplicitQuantileNetwork, QNetwork, TwinCritic, make_torso
from jaxrl.rl import distributional
from jaxrl.rl.qlearning import td_item_loss, td_loss

__all__ = [
    "LossMetrics",
    "ValueHead",
    "value_head",
    "make_q_network",
    "q_loss",
    "td_loss",
    "validate_q_network",
    "critic_head",
    "smaller_twin",
    "validate_critic",
]


class LossMetrics(NamedTuple):
    loss: jax.Array
    q: jax.Array  # mean Q(s, a) of the minibatch


@dataclass(frozen=True)
class ValueHead:
    """What a Q-network's output per action is, and how it learns.

    * ``scalar``: one value ``Q(s, a)``, regressed to ``r + γ' Q̄(s', a*)``;
    * ``categorical`` (C51): logits on the support ``z`` (``atoms`` points from
      ``v_min`` to ``v_max``), cross-entropy to the projected target
      ``Φ(r + γ' z)`` (:func:`jaxrl.rl.distributional.categorical_target`);
    * ``quantile`` (QR-DQN): ``atoms`` quantile locations at the midpoints
      ``τ̂_i``, quantile Huber loss (threshold ``kappa``) to the target samples
      ``r + γ' θ_j(s', a*)``;
    * ``implicit`` (IQN): the quantiles at ``atoms`` levels drawn uniformly per
      item and step (:meth:`sample_levels`), the target's at as many other
      draws, the same loss at the drawn levels; acting uses evenly spaced levels.

    ``γ'`` is the transition's discount (``γ (1 − terminated)``, or the n-step
    product), so every head keeps termination and truncation apart the same way."""

    kind: str = "scalar"
    atoms: int = 0  # outputs per action (0: scalar)
    v_min: float = 0.0
    v_max: float = 0.0
    kappa: float = 1.0

    def q(self, out: jax.Array) -> jax.Array:
        """Action values ``[..., n]`` of the network's output (``[..., n]`` or ``[..., n, atoms]``)."""
        if self.kind == "categorical":
            return distributional.categorical_mean(out, self.support())
        if self.kind in ("quantile", "implicit"):
            return jnp.mean(out, axis=-1)
        return out

    def support(self) -> jax.Array:
        return distributional.support(self.v_min, self.v_max, self.atoms)

    def target(self, ret: jax.Array, discount: jax.Array, next_out: jax.Array) -> jax.Array:
        """The learning target from the return so far ``[B]``, the bootstrap
        discount ``[B]`` and the target network's output for the bootstrap
        action ``[B]`` / ``[B, atoms]``: a value ``[B]``, a distribution
        ``[B, atoms]`` or target samples ``[B, atoms]``. Gradients stopped."""
        if self.kind == "categorical":
            probs = jax.nn.softmax(next_out, axis=-1)
            return distributional.categorical_target(ret, discount, probs, self.support())
        if self.kind in ("quantile", "implicit"):
            return distributional.quantile_target(ret, discount, next_out)
        return jax.lax.stop_gradient(ret + discount * next_out)

    def loss(
        self,
        out: jax.Array,
        target: jax.Array,
        kind: str = "mse",
        levels: jax.Array | None = None,
        weights: jax.Array | None = None,
    ) -> jax.Array:
        """Mean loss of the taken actions' outputs ``[B]`` / ``[B, atoms]`` to
        :meth:`target`'s (``levels`` ``[B, atoms]``: the implicit head's drawn
        levels), each item's weighted by ``weights`` ``[B]`` when given
        (prioritized replay's importance weights)."""
        if weights is None and self.kind == "scalar":
            return td_loss(out, target, kind)
        items = self.item_loss(out, target, kind, levels)
        return jnp.mean(items if weights is None else weights * items)

    def item_loss(
        self, out: jax.Array, target: jax.Array, kind: str = "mse", levels: jax.Array | None = None
    ) -> jax.Array:
        """:meth:`loss` of each item ``[B]``."""
        if self.kind == "categorical":
            return distributional.categorical_loss(out, target)
        if self.kind in ("quantile", "implicit"):
            levels = distributional.quantile_levels(self.atoms) if levels is None else levels
            return distributional.quantile_huber_loss(out, levels, target, self.kappa)
        return td_item_loss(out, target, kind)

    def surprise(self, out: jax.Array, target: jax.Array, levels: jax.Array | None = None) -> jax.Array:
        """What prioritized replay ranks an item ``[B]`` by: the TD error ``|y − Q|``
        (scalar), the KL divergence of the prediction from the projected target
        (categorical, as Rainbow: the cross-entropy less the target's entropy), or
        the item's quantile loss."""
        if self.kind == "categorical":
            entropy = -jnp.sum(jnp.where(target > 0, target * jnp.log(jnp.where(target > 0, target, 1.0)), 0.0), -1)
            return distributional.categorical_loss(out, target) - entropy
        if self.kind == "scalar":
            return jnp.abs(target - out)
        return self.item_loss(out, target, levels=levels)

    def sample_levels(self, key: jax.Array, batch: int) -> tuple[jax.Array, jax.Array]:
        """The implicit head's levels for one gradient step: ``(τ, τ')``, each
        ``[batch, atoms]`` uniform on [0, 1), for the online and the target network."""
        key_online, key_target = jax.random.split(key)
        shape = (batch, self.atoms)
        return jax.random.uniform(key_online, shape), jax.random.uniform(key_target, shape)

    def clipped(self, ret: jax.Array, discount: jax.Array, next_out: jax.Array) -> jax.Array:
        """Categorical only: the fraction ``[]`` of the target's probability mass
        whose atom ``r + γ' z_j`` fell outside ``[v_min, v_max]`` (and was moved
        to its edge): near 0 when the support holds the returns."""
        z = self.support()
        atoms = ret[..., None] + discount[..., None] * z
        outside = (atoms < z[0]) | (atoms > z[-1])
        return jnp.mean(jnp.sum(jax.nn.softmax(next_out, axis=-1) * outside, axis=-1))


def value_head(algo: Any) -> ValueHead:
    """The head ``algo`` declares: its ``value`` field (``categorical`` with
    ``atoms``/``v_min``/``v_max``, ``quantile`` with ``quantiles``/``kappa``),
    else one value per action."""
    kind = getattr(algo, "value", "scalar")
    if kind == "categorical":
        return ValueHead(kind, algo.atoms, float(algo.v_min), float(algo.v_max))
    if kind in ("quantile", "implicit"):
        return ValueHead(kind, algo.quantiles, kappa=float(algo.kappa))
    return ValueHead()


def make_q_network(
    algo: Any, env: Env, torso: nn.Module | None = None, perf: bool = False
) -> QNetwork | ImplicitQuantileNetwork:
    """The Q-network for ``env``'s discrete actions: ``torso`` (default: the
    registered ``algo.network``, with ``algo.norm``) under a linear or dueling head
    with :func:`value_head`'s outputs per action (IQN: the implicit quantile network)."""
    if not isinstance(env.action_space, Discrete):
        raise TypeError(f"algo={algo.name} needs discrete actions; {env.name} has {env.action_space}")
    if torso is None:
        torso = make_torso(algo.network, algo, env.obs_shape)
    n = env.action_space.n
    if getattr(algo, "value", "scalar") == "implicit":
        return ImplicitQuantileNetwork(n, torso, algo.dueling, perf, algo.embedding_dim, algo.act_quantiles)
    noise_std = float(algo.noise_std) if getattr(algo, "noisy", False) else 0.0
    return QNetwork(n, torso, algo.dueling, perf, atoms=value_head(algo).atoms, noise_std=noise_std)


def q_loss(
    params: Any, network: QNetwork, obs: jax.Array, action: jax.Array, target: jax.Array, kind: str = "mse"
) -> tuple[jax.Array, LossMetrics]:
    """The Q-learners' loss on a minibatch: :func:`td_loss` of ``Q(s, a)`` (obs
    ``[B, *obs]``, int actions ``[B]``) to given targets ``[B]`` (PQN's Q(λ),
    DQN's bootstrapped ones)."""
    q = jnp.take_along_axis(network.apply(params, obs), action[:, None].astype(jnp.int32), axis=-1)[:, 0]
    loss = td_loss(q, target, kind)
    return loss, LossMetrics(loss, jnp.mean(q))


_HEAD_LOSS = {"categorical": "cross_entropy", "quantile": "quantile_huber", "implicit": "quantile_huber"}


def validate_q_network(algo: Any) -> None:
    """The Q-network settings the Q-learners share (their ranges are the fields'
    own): the torso, the loss (a distributional head has its own), and a
    categorical support that is an interval."""
    validate_torso(algo)
    kind = getattr(algo, "value", "scalar")
    if kind == "scalar":
        require_one_of("algo.loss", algo.loss, ("mse", "huber"), "mse")
        return
    require_one_of("algo.loss", algo.loss, (_HEAD_LOSS[kind],), _HEAD_LOSS[kind])
    if kind == "categorical" and not algo.v_min < algo.v_max:
        raise ConfigError(
            "algo.v_max",
            algo.v_max,
            f"must be above algo.v_min={algo.v_min} (the support runs from v_min to v_max)",
            "pass a v_min below v_max that brackets the discounted returns, e.g. algo.v_min=0 algo.v_max=100",
        )


def critic_head(algo: Any) -> ValueHead:
    """The twin critics' head a continuous-action learner's ``algo.critic`` asks for
    (SAC, TD3): one value, or a categorical distribution on ``atoms`` points from
    ``v_min`` to ``v_max``."""
    if getattr(algo, "critic", "scalar") == "categorical":
        return ValueHead("categorical", algo.atoms, float(algo.v_min), float(algo.v_max))
    return ValueHead()


def twin_critic(algo: Any, torso: Any, perf: bool) -> tuple[TwinCritic, ValueHead]:
    """The twin critics of a continuous-action learner (SAC, TD3) and their head:
    ``algo.critic_hidden_sizes`` (empty: the actor's ``algo.hidden_sizes``), with
    ``algo.norm``'s LayerNorm in the default MLPs; ``torso`` (a flax module on
    ``[obs, action]``) replaces those MLPs."""
    head = critic_head(algo)
    sizes = tuple(algo.critic_hidden_sizes) or tuple(algo.hidden_sizes)
    return TwinCritic(sizes, algo.activation, torso, perf, atoms=head.atoms, norm=algo.norm), head


def smaller_twin(head: ValueHead, logits: jax.Array) -> jax.Array:
    """Clipped double Q in distribution form: of two critics' outputs ``[2, ..., atoms]``,
    per item the one whose mean is the smaller ``[..., atoms]`` (the first on ties)."""
    means = head.q(logits)
    return jnp.where((means[0] <= means[1])[..., None], logits[0], logits[1])


def validate_critic(algo: Any) -> None:
    """``algo.critic`` is scalar or categorical, a categorical support is an interval,
    ``algo.norm`` is a known norm and ``algo.critic_hidden_sizes`` positive widths."""
    require_one_of("algo.critic", algo.critic, ("scalar", "categorical"), "categorical")
    require_one_of("algo.norm", algo.norm, NORMS, NORMS[0])
    sizes = algo.critic_hidden_sizes
    if any(isinstance(h, bool) or not isinstance(h, int) or h <= 0 for h in sizes):
        raise ConfigError(
            "algo.critic_hidden_sizes",
            list(sizes),
            "must be a list of positive integers (empty: the critics take algo.hidden_sizes)",
            "pass e.g. algo.critic_hidden_sizes=[512,256]",
        )
    if algo.critic == "categorical" and not algo.v_min < algo.v_max:
        raise ConfigError(
            "algo.v_max",
            algo.v_max,
            f"must be above algo.v_min={algo.v_min} (the critics' support runs from v_min to v_max)",
            "pass a v_min below v_max that brackets the discounted returns, e.g. algo.v_min=-250 algo.v_max=250",
        )
