"""Presets as data: ``<algorithm>.yaml`` maps an env id (canonical, e.g.
``CartPole-v1`` or ``navix:Navix-DoorKey-5x5-v0``) to the overrides applied
under the user's own when ``python -m jaxrl.train env=ID algo=<algorithm>``
runs; the key ``host`` holds an algorithm's settings for every host env
(``env=gymnasium:ID``, ``envpool:ID``), under the env's own. Adding a preset
edits a YAML file, not Python."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

__all__ = ["load_presets", "path_of"]

_HERE = os.path.dirname(os.path.abspath(__file__))


def path_of(algorithm: str) -> str:
    """The preset file of a built-in algorithm."""
    return os.path.join(_HERE, f"{algorithm}.yaml")


def load_presets(algorithm: str) -> Mapping[str, Mapping[str, Any]]:
    """``{env id: {key: value}}`` of ``<algorithm>.yaml`` (lists become tuples)."""
    import yaml

    with open(path_of(algorithm)) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{path_of(algorithm)}: expected a mapping of env ids to mappings of overrides")
    return {str(env): {str(k): _frozen(v) for k, v in overrides.items()} for env, overrides in data.items()}


def _frozen(value: Any) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value
