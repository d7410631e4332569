"""Networks: the torso registry (``algo.network=NAME``), the MLP torso and the
actor-critic heads (:mod:`jaxrl.nets.networks`). See
``docs/contributing/network.md`` for adding a torso."""

from jaxrl.nets.networks import (
    MLP,
    ActorCritic,
    TorsoFactory,
    check_network,
    dense,
    make_torso,
    register_torso,
    torso_names,
)

__all__ = [
    "MLP",
    "ActorCritic",
    "TorsoFactory",
    "check_network",
    "dense",
    "make_torso",
    "register_torso",
    "torso_names",
]
