"""Algorithms: the typed contract (:class:`Algorithm`, :class:`Agent`) and the registry.

>>> import jaxrl.algos
>>> jaxrl.algos.names()                   # ['ppo', 'sac', 'a2c', 'reinforce', …]
>>> jaxrl.algos.get("ppo").metrics        # what it logs
>>> jaxrl.algos.register(MY_ALGORITHM)    # then algo=my_algo works everywhere

Built in: ``ppo`` (:mod:`jaxrl.algos.ppo`), ``sac`` (:mod:`jaxrl.algos.sac`), ``a2c``
(:mod:`jaxrl.algos.a2c`), ``reinforce`` (:mod:`jaxrl.algos.reinforce`), ``pqn``
(:mod:`jaxrl.algos.pqn`), ``dqn`` (:mod:`jaxrl.algos.dqn`) and ``td3``
(:mod:`jaxrl.algos.td3`); :mod:`jaxrl.algos.replay` holds what the replay learners share.
See ``docs/contributing/algorithm.md`` for adding one.
"""

from jaxrl.core.contract import (
    LOOP_METRICS,
    Agent,
    Algorithm,
    algorithm_for,
    configs,
    get,
    hparams_for,
    names,
    own_metrics,
    register,
    unregister,
)

__all__ = [
    "Agent",
    "Algorithm",
    "LOOP_METRICS",
    "algorithm_for",
    "configs",
    "get",
    "hparams_for",
    "names",
    "own_metrics",
    "register",
    "unregister",
]
