"""Population-based training inside the compiled program.

Jaderberg et al. (2017), "Population Based Training of Neural Networks",
arXiv:1711.09846; the truncation-selection variant used by rl_games/DexPBT
(Petrenko et al., 2023, arXiv:2305.12127). Members are vmapped; every
``interval`` updates the worst ``fraction`` of the population copies the
weights, optimizer and normalizer state of a random member of the best
``fraction`` (exploit) and perturbs the copied hyperparameters (explore).

Both steps are pure functions of ``(states, hparams, fitness, key)`` and run
inside the jitted chunk, so the population never leaves the device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.core.config import PBTConfig

__all__ = ["PBTStep", "init_hparams", "exploit_explore"]

Bounds = Mapping[str, tuple[float, float, bool]]  # name -> (lo, hi, log): jaxrl.algos.Algorithm.pbt_bounds


class PBTStep(NamedTuple):
    parents: jax.Array  # int32 [P]: member copied at this step, −1 where the slot kept its own
    fitness: jax.Array  # float32 [P]: the score used for ranking


def init_hparams(base: Any, cfg: PBTConfig, key: jax.Array, population: int, bounds: Bounds) -> Any:
    """Initial population hyperparameters ``[P]``: member 0 keeps ``base``;
    the others draw each evolved value as ``base × f``, ``log f ~ U[−log s, log s]``
    (``s = init_spread``), clipped to its bounds."""
    values = {}
    keys = jax.random.split(key, len(cfg.hparams))
    for k, name in zip(keys, cfg.hparams, strict=True):
        lo, hi, _ = bounds[name]
        log_spread = jnp.log(jnp.float32(cfg.init_spread))
        factor = jnp.exp(jax.random.uniform(k, (population,), minval=-log_spread, maxval=log_spread))
        factor = factor.at[0].set(1.0)
        values[name] = jnp.clip(getattr(base, name) * factor, lo, hi).astype(jnp.float32)
    batched = jax.tree.map(lambda x: jnp.broadcast_to(x, (population,)).astype(jnp.float32), base)
    return batched.replace(**values)


def _explore(value: jax.Array, bound: tuple[float, float, bool], cfg: PBTConfig, key: jax.Array) -> jax.Array:
    lo, hi, log = bound
    key_choice, key_factor, key_resample = jax.random.split(key, 3)
    factors = jnp.asarray(cfg.perturb_factors, jnp.float32)
    factor = factors[jax.random.randint(key_factor, value.shape, 0, factors.shape[0])]
    if log:
        resampled = jnp.exp(jax.random.uniform(key_resample, value.shape, minval=jnp.log(lo), maxval=jnp.log(hi)))
    else:
        resampled = jax.random.uniform(key_resample, value.shape, minval=lo, maxval=hi)
    resample = jax.random.uniform(key_choice, value.shape) < cfg.resample_prob
    return jnp.clip(jnp.where(resample, resampled, value * factor), lo, hi)


def exploit_explore(
    states: Any,
    hparams: Any,
    fitness: jax.Array,
    key: jax.Array,
    cfg: PBTConfig,
    bounds: Bounds,
    own_fields: tuple[str, ...],
) -> tuple[Any, Any, PBTStep]:
    """One PBT step on a population ``[P]``.

    Members are ranked by ``fitness`` (NaN counts as worst). Each of the
    ``n = max(1, ⌊fraction·P⌋)`` worst members copies a uniformly chosen member
    of the ``n`` best: its whole training state except ``own_fields`` (the
    algorithm's :attr:`~jaxrl.algos.Algorithm.own_fields`: its envs and PRNG
    stream), its failure flag, and its hyperparameters, which it then perturbs
    — each evolved value is resampled within its ``bounds`` with probability
    ``resample_prob``, else multiplied by a random ``perturb_factors`` entry —
    and clips to those bounds.
    """
    population = fitness.shape[0]
    n = max(1, int(population * cfg.fraction))
    score = jnp.where(jnp.isnan(fitness), -jnp.inf, fitness)
    order = jnp.argsort(score)  # ascending: worst first
    bottom, top = order[:n], order[population - n :]
    key_pick, key_explore = jax.random.split(key)
    source = top[jax.random.randint(key_pick, (n,), 0, n)]
    index = jnp.arange(population).at[bottom].set(source)
    replaced = jnp.zeros((population,), bool).at[bottom].set(True)

    def take(x):
        return x[index]

    agent = states.agent
    copied = {}
    for f in dataclasses.fields(agent):
        value = getattr(agent, f.name)
        copied[f.name] = value if f.name in own_fields else jax.tree.map(take, value)
    new_states = states.replace(agent=agent.replace(**copied), failed_at=take(states.failed_at))

    new_hparams = jax.tree.map(take, hparams)
    explored = {}
    for k, name in zip(jax.random.split(key_explore, len(cfg.hparams)), cfg.hparams, strict=True):
        current = getattr(new_hparams, name)
        explored[name] = jnp.where(replaced, _explore(current, bounds[name], cfg, k), current)
    new_hparams = new_hparams.replace(**explored)
    parents = jnp.where(replaced, index, -1).astype(jnp.int32)
    return new_states, new_hparams, PBTStep(parents, score)


def lineage(parents: list[list[int]], final_member: int) -> list[int]:
    """The slot of ``final_member``'s ancestor during every chunk.

    ``parents[c][i]`` is the slot that member ``i`` copied in the PBT step after
    chunk ``c`` (−1: it kept its own state), for chunks ``0 … C−2``. Returns
    ``slots`` of length ``C`` with ``slots[c]`` the slot whose training during
    chunk ``c`` the final member inherited."""
    slots = [final_member]
    slot = final_member
    for step in reversed(parents):
        parent = step[slot]
        slot = slot if parent < 0 else parent
        slots.append(slot)
    return list(reversed(slots))
