"""``jaxrl.config``: the old home of the config names, kept for one release.

Parsing and validation moved to :mod:`jaxrl.run.config` (``parse``,
``validate``, ``to_dict``, ``PRESETS``, …), the dataclasses to
:mod:`jaxrl.core.config` (``Config``, ``seed_ids``, …), ``ConfigError`` to
:mod:`jaxrl.core.errors`, ``PPOConfig`` to :mod:`jaxrl.algos.ppo` and
``SACConfig`` to :mod:`jaxrl.algos.sac`. This module is :mod:`jaxrl.run.config`
itself, which holds all of those names but ``SACConfig``.
"""

import sys
import warnings

from jaxrl.run import config

warnings.warn(
    "jaxrl.config is now jaxrl.run.config (parse, validate) and jaxrl.core.config (the dataclasses); "
    "the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = config
