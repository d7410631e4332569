"""What the on-policy learners share (PPO, A2C, REINFORCE and PQN): the epoch
and minibatch driver, the one batched pass that values a rollout's
observations and final observations, the learning-rate schedules, the choice
of scan for the return recursions, and the torso settings' checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.core.checks import check_mlp, require_one_of, require_positive_int
from jaxrl.core.errors import ConfigError
from jaxrl.nets.networks import NORMS, check_network, is_recurrent

__all__ = [
    "StepResult",
    "run_epochs",
    "values_and_next",
    "truncation_slots",
    "truncation_index",
    "next_values_from",
    "scan_method",
    "scheduled_lr",
    "explained_variance",
    "validate_torso",
]


class StepResult(NamedTuple):
    """One learner step's (or a whole :func:`run_epochs`') outcome."""

    params: Any
    opt_state: Any
    lr: jax.Array
    metrics: Any  # the loss's metrics NamedTuple of scalars
    grad_norm: jax.Array


def run_epochs(
    params: Any,
    opt_state: Any,
    lr: jax.Array,
    key: jax.Array,
    algo: Any,
    minibatches: Callable[[jax.Array], Any],
    step: Callable[..., StepResult],
    metrics_type: type,
) -> StepResult:
    """``algo.update_epochs`` epochs; each draws its shuffle key, gets
    ``minibatches(key) -> xs`` (leading axis ``num_minibatches``) and scans
    ``step(params, opt_state, lr, x) -> StepResult`` over them. Metrics (a
    ``metrics_type`` NamedTuple of scalars, the loss's own) are means over all steps."""
    n_mb = algo.num_minibatches

    def epoch(carry, _):
        params, opt_state, lr, key, sums = carry
        key, key_perm = jax.random.split(key)

        def minibatch(carry, x):
            params, opt_state, lr, sums = carry
            out = step(params, opt_state, lr, x)
            return (out.params, out.opt_state, out.lr, sums + jnp.stack([*out.metrics, out.grad_norm])), None

        (params, opt_state, lr, sums), _ = jax.lax.scan(minibatch, (params, opt_state, lr, sums), minibatches(key_perm))
        return (params, opt_state, lr, key, sums), None

    # The key rides in the carry (not as scanned-over xs) so jax.debug_key_reuse
    # can follow it under vmap. Metrics are summed in the carry (one vector:
    # the loss metrics, then the gradient norm), in step order, so a seed's
    # numbers do not depend on how many seeds are vmapped beside it.
    zeros = jnp.zeros((len(metrics_type._fields) + 1,), jnp.float32)
    (params, opt_state, lr, _, sums), _ = jax.lax.scan(
        epoch, (params, opt_state, lr, key, zeros), None, length=algo.update_epochs
    )
    means = sums / float(algo.update_epochs * n_mb)
    return StepResult(params, opt_state, lr, metrics_type(*means[:-1]), means[-1])


def values_and_next(
    value_fn: Any, obs: jax.Array, final_obs: jax.Array, truncated: jax.Array, last_obs: jax.Array, period: int | None
) -> tuple[jax.Array, jax.Array]:
    """``(V(s_t), V(final_obs_t))``, each ``[T, N]``, of a rollout's observations
    ``[T, N, *obs]`` in one batched pass of ``value_fn`` (``[..., *obs] → [...]``;
    PQN passes ``max_a Q``). ``final_obs_t`` is ``s_{t+1}`` unless step ``t``
    ended an episode, so when the truncation is a time limit of ``period`` steps
    the pass covers ``V(s_t)``, the at most ``⌈T / P⌉`` truncations per env and the
    last observation ``last_obs`` ``[N, *obs]`` — ``T + ⌈T / P⌉ + 1`` rows per env
    instead of ``2T`` (:func:`next_values_from`)."""
    steps = obs.shape[0]
    per_env = truncation_slots(steps, period)
    compact = per_env is not None
    if not compact:
        extra = final_obs  # V(final_obs) of every step
    else:  # only where an env truncated, and after the last step
        index = truncation_index(truncated, per_env)
        obs_ndim = obs.ndim - 2
        picked = jnp.take_along_axis(final_obs, index.reshape(index.shape + (1,) * obs_ndim), axis=0)
        extra = jnp.concatenate([picked, last_obs[None]])
    values = value_fn(jnp.concatenate([obs, extra]))
    value, extra_values = values[:steps], values[steps:]
    if compact:
        return value, next_values_from(value, extra_values, index, truncated)
    return value, extra_values


def truncation_slots(steps: int, period: int | None) -> int | None:
    """How many truncations per env a rollout of ``steps`` steps evaluates
    ``V(final_obs)`` for: ``⌈steps / period⌉`` (the most an env with a time
    limit of ``period`` steps can have), or ``None`` — a pass over every
    step's ``final_obs`` — without a period or when that would be no smaller."""
    if period is None:
        return None
    slots = -(-steps // period)
    return slots if slots + 1 < steps else None


def truncation_index(truncated: jax.Array, per_env: int) -> jax.Array:
    """int32 ``[K, N]``: the step of each env's ``k``-th truncation in a
    ``[T, N]`` rollout (``K = per_env``, which must bound the count); 0 in
    the slots of an env that truncated fewer times."""
    count = jnp.cumsum(truncated.astype(jnp.int32), axis=0)
    return jnp.stack([jnp.argmax(count > k, axis=0).astype(jnp.int32) for k in range(per_env)])


def next_values_from(value: jax.Array, extra: jax.Array, index: jax.Array, truncated: jax.Array) -> jax.Array:
    """``V(final_obs)`` ``[T, N]`` from ``value = V(s_t)`` ``[T, N]``, ``extra``
    ``[K + 1, N]`` (the values at the ``K`` :func:`truncation_index` slots,
    then of the observation after the last step) and the truncation flags.

    Where step ``t`` did not end an episode, ``final_obs_t`` is ``s_{t+1}``, so
    its value is ``value[t + 1]`` (or ``extra[K]`` at the last step); where it
    truncated, the value computed at its slot. Where it terminated the result
    is ``V(s_{t+1})`` of the reset state, which GAE multiplies by zero."""
    following = jnp.concatenate([value[1:], extra[-1:]])
    step = jax.lax.broadcasted_iota(jnp.int32, value.shape, 0)
    for k in range(index.shape[0]):
        following = jnp.where(truncated & (step == index[k]), extra[k], following)
    return following


def scan_method(setting: str) -> str:
    """The scan of a return recursion (GAE, Q(λ)) for ``setting``: ``auto`` →
    the sequential scan on the CPU, the associative scan elsewhere
    (DESIGN.md: measured per backend); ``scan`` or ``associative`` as given."""
    if setting != "auto":
        return setting
    return "scan" if jax.default_backend() == "cpu" else "associative"


def scheduled_lr(schedule: str, base: jax.Array, update_idx: jax.Array, num_updates: int, current: Any = None) -> Any:
    """The learning rate of update ``update_idx``: ``base`` annealed linearly to 0
    over ``num_updates`` (``linear``), ``base`` (``constant``), or the state's own
    ``current`` rate (``adaptive``, moved by the learner)."""
    if schedule == "linear":
        return base * (1.0 - update_idx.astype(jnp.float32) / num_updates)
    if schedule == "constant":
        return base
    return current


def explained_variance(values: jax.Array, targets: jax.Array) -> jax.Array:
    """``1 − Var[G − V] / Var[G]`` (NaN-free: 0 when Var[G] is 0)."""
    var_targets = jnp.var(targets)
    return jnp.where(var_targets > 0, 1.0 - jnp.var(targets - values) / jnp.maximum(var_targets, 1e-12), 0.0)


def validate_torso(algo: Any, recurrent: bool = False) -> None:
    """``algo.network`` and the torso's layout (MLP, conv layers, recurrent size);
    ``recurrent``: the algorithm trains recurrent torsos."""
    check_network(algo)
    check_mlp(algo)
    if is_recurrent(algo.network) and not recurrent:
        raise ConfigError(
            "algo.network",
            algo.network,
            f"is a recurrent torso, which algo={algo.name} does not train (PPO does)",
            "pass algo=ppo, or algo.network=auto",
        )
    layout = [(name, getattr(algo, name, None)) for name in ("conv_channels", "conv_kernels", "conv_strides")]
    for name, values in layout:
        if values is None:
            continue
        if not values or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in values):
            raise ConfigError(
                f"algo.{name}", list(values), "must be a non-empty list of positive integers", f"pass algo.{name}=[3]"
            )
        if len(values) != len(algo.conv_channels):
            raise ConfigError(
                f"algo.{name}",
                list(values),
                f"must have one entry per conv layer (algo.conv_channels has {len(algo.conv_channels)})",
                f"pass {len(algo.conv_channels)} values",
            )
    if hasattr(algo, "rnn_size"):
        require_positive_int("algo.rnn_size", algo.rnn_size, 128)
    if hasattr(algo, "norm"):
        require_one_of("algo.norm", algo.norm, NORMS, NORMS[0])
