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
flag; the CLI entry points configure the process
(:func:`jaxrl.perf.platform.configure`).
"""

from jaxrl import algos, envs, nets, ppo, sac
from jaxrl.core.config import Config
from jaxrl.core.errors import ConfigError
from jaxrl.core.version import __version__
from jaxrl.rl.advantages import gae, gae_reference
from jaxrl.run.overrides import config_for, parse
from jaxrl.run.policy import load_policy
from jaxrl.run.validation import validate
from jaxrl.trainer.loop import Trainer, make_train

__all__ = [
    "Config",
    "ConfigError",
    "Trainer",
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
