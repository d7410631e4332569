"""``jaxrl.ppo``: the public contract's name for :mod:`jaxrl.algos.ppo` (the same
module object, so ``import jaxrl.ppo`` and ``from jaxrl.ppo import ...`` reach
every name of it)."""

import sys

from jaxrl.algos import ppo

sys.modules[__name__] = ppo
