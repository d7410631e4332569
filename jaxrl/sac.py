"""``jaxrl.sac``: SAC's loss functions and update step (the public contract's
name for them; they are defined in :mod:`jaxrl.algos.sac`)."""

from jaxrl.algos.sac import *  # noqa: F403
from jaxrl.algos.sac import __all__  # noqa: F401
