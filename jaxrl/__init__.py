"""jaxrl: a JAX-native RL trainer — the whole run is one compiled program.

The public surface, by name:

* :func:`config_for` — the config ``python -m jaxrl.train env=ENV …`` runs
  (presets applied, validated); :func:`parse` and :func:`validate` its two
  steps; :class:`Config` and :class:`ConfigError`;
* :func:`make_train` — a :class:`Trainer` of pure ``init`` / ``train_chunk`` /
  ``train`` functions for one member (``network=`` a flax module,
  ``optimizer=`` an optax transformation); vmap them over seeds yourself;
* :func:`gae` — generalized advantage estimation (``gae_reference``: its loop);
* :func:`load_policy` — ``act(obs, key)`` of a trained run;
* :mod:`jaxrl.algos` — the algorithm contract and registry; :mod:`jaxrl.ppo`
  and :mod:`jaxrl.sac` — their losses and update steps;
* :mod:`jaxrl.envs` — ``make(name)``, ``names()``, ``register_backend``;
  :mod:`jaxrl.nets` — the torso registry (``register_torso``).

Packages import only downward: CLI entry points (``jaxrl.train``, ``sweep``,
``evaluate``, ``export``, ``report``) → :mod:`jaxrl.run` (host side) →
:mod:`jaxrl.trainer` (the compiled program) → :mod:`jaxrl.algos` →
:mod:`jaxrl.nets` / :mod:`jaxrl.rl` / :mod:`jaxrl.envs` → :mod:`jaxrl.perf` →
:mod:`jaxrl.core`. Importing jaxrl changes no environment variable or XLA
flag, and loads JAX only when one of the names above is first used, so that
the CLI entry points can configure the process first
(:func:`jaxrl.perf.platform.configure`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from jaxrl.core.version import __version__

if TYPE_CHECKING:
    from jaxrl import algos, envs, nets, ppo, sac
    from jaxrl.core.config import Config as Config
    from jaxrl.core.errors import ConfigError as ConfigError
    from jaxrl.rl.advantages import gae, gae_reference
    from jaxrl.run.overrides import config_for, parse
    from jaxrl.run.policy import load_policy
    from jaxrl.run.validation import validate
    from jaxrl.trainer.loop import Trainer as Trainer
    from jaxrl.trainer.loop import make_train

# name -> (module, attribute); attribute None: the module itself
_WHERE: dict[str, tuple[str, str | None]] = {
    "Config": ("jaxrl.core.config", "Config"),
    "ConfigError": ("jaxrl.core.errors", "ConfigError"),
    "Trainer": ("jaxrl.trainer.loop", "Trainer"),
    "algos": ("jaxrl.algos", None),
    "config_for": ("jaxrl.run.overrides", "config_for"),
    "envs": ("jaxrl.envs", None),
    "gae": ("jaxrl.rl.advantages", "gae"),
    "gae_reference": ("jaxrl.rl.advantages", "gae_reference"),
    "load_policy": ("jaxrl.run.policy", "load_policy"),
    "make_train": ("jaxrl.trainer.loop", "make_train"),
    "nets": ("jaxrl.nets", None),
    "parse": ("jaxrl.run.overrides", "parse"),
    "ppo": ("jaxrl.ppo", None),
    "sac": ("jaxrl.sac", None),
    "validate": ("jaxrl.run.validation", "validate"),
}

# What ``from jaxrl import *`` and ``help(jaxrl)`` list: the functions and
# modules. The classes above (Config, ConfigError, Trainer) are importable by
# name too; ``help(jaxrl.Config)`` shows each whole.
__all__ = [
    "algos",
    "config_for",
    "envs",
    "gae",
    "gae_reference",
    "load_policy",
    "make_train",
    "nets",
    "parse",
    "ppo",
    "sac",
    "validate",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'jaxrl' has no attribute {name!r}")
    module, attribute = _WHERE[name]
    value = importlib.import_module(module)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
