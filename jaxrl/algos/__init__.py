"""Algorithms: the typed contract (:class:`Algorithm`, :class:`Agent`), the
registry, the built-in algorithms and the building blocks they share.

>>> import jaxrl.algos
>>> jaxrl.algos.names()                   # ['ppo', 'sac', 'a2c', 'reinforce', …]
>>> jaxrl.algos.get("ppo").metrics        # what it logs
>>> jaxrl.algos.register(MY_ALGORITHM)    # then algo=my_algo works everywhere

Built in, one thin module each: ``ppo``, ``a2c``, ``reinforce``, ``impala`` (on the
actor-critic pieces of :mod:`jaxrl.algos.actor_critic`), ``pqn`` and ``dqn``
(with ``c51``, ``qrdqn`` and ``iqn``, its distributional heads, and ``rainbow``; Q-networks and value
heads: :mod:`jaxrl.algos.qvalue`), ``sac`` and ``td3`` (continuous
control with replay); :mod:`jaxrl.algos.onpolicy` and :mod:`jaxrl.algos.replay`
hold what the on-policy and the replay learners share, and
``jaxrl/algos/presets/<name>.yaml`` each algorithm's presets. No algorithm
module imports another. See ``docs/contributing/algorithm.md`` for adding one.
"""

from jaxrl.algos import a2c, dqn, impala, ppo, pqn, reinforce, sac, td3
from jaxrl.core.contract import (
    LOOP_METRICS,
    Act,
    Agent,
    Algorithm,
    Collect,
    Init,
    InitCarry,
    Learn,
    LoopMetrics,
    RecurrentAct,
    algorithm_for,
    configs,
    get,
    names,
    own_metrics,
    register,
    register_builtin,
    unregister,
)
from jaxrl.core.fields import HParams, setting, traced

for _algorithm in (
    ppo.ALGORITHM,
    sac.ALGORITHM,
    a2c.ALGORITHM,
    reinforce.ALGORITHM,
    pqn.ALGORITHM,
    dqn.ALGORITHM,
    dqn.C51,
    dqn.QRDQN,
    dqn.IQN,
    dqn.RAINBOW,
    td3.ALGORITHM,
    impala.ALGORITHM,
):
    register_builtin(_algorithm)
del _algorithm

__all__ = [
    "Act",
    "Agent",
    "Algorithm",
    "Collect",
    "HParams",
    "Init",
    "InitCarry",
    "LOOP_METRICS",
    "Learn",
    "LoopMetrics",
    "RecurrentAct",
    "algorithm_for",
    "configs",
    "get",
    "names",
    "own_metrics",
    "register",
    "setting",
    "traced",
    "unregister",
]
