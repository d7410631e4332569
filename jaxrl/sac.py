"""``jaxrl.sac``: the public contract's name for :mod:`jaxrl.algos.sac` (the same
module object, so ``import jaxrl.sac`` and ``from jaxrl.sac import ...`` reach
every name of it)."""

import sys

from jaxrl.algos import sac

sys.modules[__name__] = sac
