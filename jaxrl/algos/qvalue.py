"""What the Q-learners share (PQN and DQN): the Q-network over a registered
torso with a linear or dueling head, the regression loss of ``Q(s, a)`` to
given targets, and the checks of their network settings."""

from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxrl.algos.onpolicy import validate_torso
from jaxrl.core.checks import require_one_of
from jaxrl.envs.core import Discrete, Env
from jaxrl.nets.networks import QNetwork, make_torso
from jaxrl.rl.qlearning import td_loss

__all__ = ["LossMetrics", "make_q_network", "q_loss", "td_loss", "validate_q_network"]


class LossMetrics(NamedTuple):
    loss: jax.Array
    q: jax.Array  # mean Q(s, a) of the minibatch


def make_q_network(algo: Any, env: Env, torso: nn.Module | None = None, perf: bool = False) -> QNetwork:
    """The Q-network for ``env``'s discrete actions: ``torso`` (default: the
    registered ``algo.network``, with ``algo.norm``) under a linear or dueling head."""
    if not isinstance(env.action_space, Discrete):
        raise TypeError(f"algo={algo.name} needs discrete actions; {env.name} has {env.action_space}")
    if torso is None:
        torso = make_torso(algo.network, algo, env.obs_shape)
    return QNetwork(env.action_space.n, torso, algo.dueling, perf)


def q_loss(
    params: Any, network: QNetwork, obs: jax.Array, action: jax.Array, target: jax.Array, kind: str = "mse"
) -> tuple[jax.Array, LossMetrics]:
    """The Q-learners' loss on a minibatch: :func:`td_loss` of ``Q(s, a)`` (obs
    ``[B, *obs]``, int actions ``[B]``) to given targets ``[B]`` (PQN's Q(λ),
    DQN's bootstrapped ones)."""
    q = jnp.take_along_axis(network.apply(params, obs), action[:, None].astype(jnp.int32), axis=-1)[:, 0]
    loss = td_loss(q, target, kind)
    return loss, LossMetrics(loss, jnp.mean(q))


def validate_q_network(algo: Any) -> None:
    """The Q-network settings PQN and DQN share (their ranges are the fields' own)."""
    validate_torso(algo)
    require_one_of("algo.loss", algo.loss, ("mse", "huber"), "mse")
