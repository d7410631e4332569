"""Algorithms: the typed contract (:class:`Algorithm`, :class:`Agent`) and the registry.

>>> import jaxrl.algos
>>> jaxrl.algos.names()                   # ['ppo', 'sac', 'a2c', 'reinforce', …]
>>> jaxrl.algos.get("ppo").metrics        # what it logs
>>> jaxrl.algos.register(MY_ALGORITHM)    # then algo=my_algo works everywhere

Built in: ``ppo`` (:mod:`jaxrl.ppo`), ``sac`` (:mod:`jaxrl.sac`), ``a2c``
(:mod:`jaxrl.algos.a2c`) and ``reinforce`` (:mod:`jaxrl.algos.reinforce`).
See ``docs/contributing/algorithm.md`` for adding one.
"""

from jaxrl.algos.base import LOOP_METRICS, Agent, Algorithm, configs, get, names, own_metrics, register

__all__ = ["Agent", "Algorithm", "LOOP_METRICS", "configs", "get", "names", "own_metrics", "register"]
