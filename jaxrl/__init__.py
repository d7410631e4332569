"""jaxrl: a JAX-native RL trainer — the whole run is one compiled program.

Public surface (stable names):

* :func:`gae` — generalized advantage estimation (associative scan);
* :func:`make_train` — pure ``init`` / ``train_chunk`` / ``train`` functions
  (``network=`` a flax module, ``optimizer=`` an optax transformation);
* :mod:`jaxrl.algos` — the algorithm contract and registry (``register``, ``get``);
  :mod:`jaxrl.algos.ppo` and :mod:`jaxrl.algos.sac` — losses and update steps
  (also ``jaxrl.ppo`` and ``jaxrl.sac``, the same modules);
* :mod:`jaxrl.envs` — ``make(name)``, ``names()``, ``register_backend``;
* :mod:`jaxrl.nets` — the torso registry (``register_torso``);
* :func:`load_policy` — ``act(obs, key)`` of a trained run;
* :mod:`jaxrl.run.config` — ``parse`` / ``validate`` of CLI-style overrides.

Packages import only downward: CLI entry points (``jaxrl.train``, ``sweep``,
``evaluate``, ``export``, ``report``) → :mod:`jaxrl.run` (host side) →
:mod:`jaxrl.trainer` (the compiled program) → :mod:`jaxrl.algos` →
:mod:`jaxrl.nets` / :mod:`jaxrl.rl` / :mod:`jaxrl.envs` → :mod:`jaxrl.perf` →
:mod:`jaxrl.core`. Importing jaxrl changes no environment variable or XLA
flag; the CLI entry points configure the process
(:func:`jaxrl.perf.platform.configure`).
"""

from jaxrl import algos, envs, nets
from jaxrl.algos import ppo, sac
from jaxrl.algos.ppo import PPOConfig
from jaxrl.core.config import Config
from jaxrl.core.errors import ConfigError
from jaxrl.core.version import __version__  # noqa: E402
from jaxrl.rl.advantages import gae, gae_reference
from jaxrl.run.policy import load_policy
from jaxrl.trainer.loop import make_train

__all__ = [
    "Config",
    "ConfigError",
    "PPOConfig",
    "algos",
    "envs",
    "gae",
    "gae_reference",
    "load_policy",
    "make_train",
    "nets",
    "ppo",
    "sac",
    "__version__",
]
