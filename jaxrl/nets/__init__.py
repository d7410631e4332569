"""Networks: the torso registry (``algo.network=NAME``), the MLP and CNN torsos and the
actor-critic heads (:mod:`jaxrl.nets.networks`), the recurrent torsos (GRU, LRU) and
their actor-critic (:mod:`jaxrl.nets.recurrent`). See
``docs/contributing/network.md`` for adding a torso."""

from jaxrl.nets.networks import (
    CNN,
    MLP,
    ActorCritic,
    ImplicitQuantileNetwork,
    QNetwork,
    TorsoFactory,
    TwinCritic,
    check_network,
    cosine_features,
    dense,
    is_recurrent,
    make_torso,
    patch_conv,
    register_torso,
    torso_names,
)
from jaxrl.nets.recurrent import GRU, LRU, RecurrentActorCritic, linear_recurrence, reset_carry

__all__ = [
    "CNN",
    "GRU",
    "LRU",
    "RecurrentActorCritic",
    "linear_recurrence",
    "reset_carry",
    "is_recurrent",
    "MLP",
    "ActorCritic",
    "ImplicitQuantileNetwork",
    "QNetwork",
    "TorsoFactory",
    "TwinCritic",
    "check_network",
    "cosine_features",
    "dense",
    "make_torso",
    "patch_conv",
    "register_torso",
    "torso_names",
]
