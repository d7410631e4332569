"""jaxrl: a JAX-native RL trainer — the whole run is one compiled program.

Public surface (stable names):

* :func:`gae` — generalized advantage estimation (associative scan);
* :func:`make_train` — pure ``init`` / ``train_chunk`` / ``train`` functions;
* :mod:`jaxrl.ppo` — PPO losses and update steps;
* :mod:`jaxrl.envs` — ``make(name)``, ``names()``.

The CLI lives in ``jaxrl.train`` (``python -m jaxrl.train``); the
single-program trainer is reached through ``make_train(config).train``.
"""

from jaxrl import _platform

_platform.configure()

from jaxrl import envs, ppo  # noqa: E402
from jaxrl.advantages import gae, gae_reference  # noqa: E402
from jaxrl.config import Config, ConfigError, PPOConfig  # noqa: E402
from jaxrl.loop import make_train  # noqa: E402


def load_policy(run_dir, seed=None, deterministic=True, config=None):
    """``act(obs, key) -> action`` of one trained seed; see :func:`jaxrl.policy.load_policy`."""
    from jaxrl.policy import load_policy as _load

    return _load(run_dir, seed=seed, deterministic=deterministic, config=config)


__version__ = "0.1.0"

__all__ = [
    "Config",
    "ConfigError",
    "PPOConfig",
    "envs",
    "gae",
    "gae_reference",
    "load_policy",
    "make_train",
    "ppo",
    "__version__",
]
