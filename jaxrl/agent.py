"""Compatibility names: the contract lives in :mod:`jaxrl.algos`."""

from __future__ import annotations

from typing import Any

from jaxrl.algos.base import Agent, Algorithm, get

__all__ = ["Agent", "algorithm_for", "hparams_for"]


def algorithm_for(algo: Any) -> Algorithm:
    """The registered :class:`jaxrl.algos.Algorithm` of an algorithm config (or its name)."""
    return get(algo if isinstance(algo, str) else algo.name)


def hparams_for(algo: Any) -> Any:
    """The traced hyperparameter pytree of an algorithm config."""
    return algorithm_for(algo).hparams.from_config(algo)
