"""``jaxrl.ppo``: PPO's loss functions and update steps (the public contract's
name for them; they are defined in :mod:`jaxrl.algos.ppo`)."""

from jaxrl.algos.ppo import *  # noqa: F403
from jaxrl.algos.ppo import __all__  # noqa: F401
