"""What the training loop needs from an algorithm, and the registry of algorithms."""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

__all__ = ["Agent", "module_for", "hparams_for"]


class Agent(NamedTuple):
    """An algorithm bound to an env, a number of parallel envs and a budget."""

    init: Any  # (key, hp) -> state (for SAC: includes the random-action warm-up)
    update: Any  # (state, hp, update_idx) -> (state, metrics with episode_return_sum, episodes, finite, …)
    act: Any  # (state, obs [..., *obs], key) -> deterministic env action
    sample: Any  # (state, obs [..., *obs], key) -> env action sampled from the policy
    network: Any  # the flax module(s)
    steps_per_update: int  # env steps per update and seed
    warmup_steps: int = 0  # env steps per seed taken inside init (SAC's random warm-up)
    # For profile=true: cumulative prefixes of ``update`` as ``(label, fn(state, hp) -> outputs)``,
    # each ending one phase later than the one before; the rest of ``update`` is the learner.
    phases: tuple = ()


_MODULES = {"ppo": "jaxrl.ppo", "sac": "jaxrl.sac"}


def module_for(algo: Any) -> Any:
    """The module implementing ``algo`` (a PPOConfig, SACConfig or its name):
    it provides ``HParams`` and ``make_agent``."""
    name = algo if isinstance(algo, str) else algo.name
    return importlib.import_module(_MODULES[name])


def hparams_for(algo: Any) -> Any:
    """The traced hyperparameter pytree of an algorithm config."""
    return module_for(algo).HParams.from_config(algo)
