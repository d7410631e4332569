"""Deterministic evaluation inside the compiled program.

Each evaluation runs ``num_episodes`` fresh copies of the env (their own
resets, never the training envs) with the policy's deterministic action
(argmax / mean) until every copy has finished one episode or ``max_steps``
have passed; only the first episode of each copy counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxrl.core.contract import reset_carry
from jaxrl.envs.core import Env

__all__ = ["EvalMetrics", "make_evaluate"]


class EvalMetrics(NamedTuple):
    returns: jax.Array  # [E] undiscounted raw return of each eval episode
    lengths: jax.Array  # [E] int32 episode lengths


class _Carry(NamedTuple):
    env_state: Any
    obs: jax.Array
    key: jax.Array
    t: jax.Array
    returns: jax.Array
    lengths: jax.Array
    finished: jax.Array
    policy: Any = None  # a recurrent policy's carry [E, C]


def make_evaluate(
    env: Env,
    act: Callable[[Any, jax.Array, jax.Array], jax.Array],
    num_episodes: int,
    max_steps: int,
    env_params: Any = None,
    init_carry: Callable[[Any, tuple[int, ...]], Any] | None = None,
) -> Callable[[Any, jax.Array], EvalMetrics]:
    """``evaluate(agent_state, key, params=None) -> EvalMetrics`` (pure; vmap over
    seeds — and over env parameter settings, for held-out evaluation — outside).

    ``act(agent_state, obs [E, *obs], key) -> actions [E, ...]`` must be deterministic.
    With ``init_carry`` (a recurrent policy, :attr:`jaxrl.algos.Agent.init_carry`)
    ``act(agent_state, carry, obs, key) -> (carry, actions)``; the carry starts
    from ``init_carry`` and is zeroed where an episode ended.
    """
    default_params = env.default_params if env_params is None else env_params
    reset = jax.vmap(env.reset, in_axes=(0, None))
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def evaluate(agent_state: Any, key: jax.Array, params: Any = None) -> EvalMetrics:
        env_params = default_params if params is None else params
        key_reset, key_run = jax.random.split(key)
        env_state, obs = reset(jax.random.split(key_reset, num_episodes), env_params)

        def cond(c: _Carry) -> jax.Array:
            return jnp.logical_and(c.t < max_steps, ~jnp.all(c.finished))

        def body(c: _Carry) -> _Carry:
            key, key_act, key_env = jax.random.split(c.key, 3)
            if init_carry is None:
                policy, action = None, act(agent_state, c.obs, key_act)
            else:
                policy, action = act(agent_state, c.policy, c.obs, key_act)
            env_state, out = step(jax.random.split(key_env, num_episodes), c.env_state, action, env_params)
            live = ~c.finished
            return _Carry(
                env_state,
                out.obs,
                key,
                c.t + 1,
                c.returns + jnp.where(live, out.reward, 0.0),
                c.lengths + live.astype(jnp.int32),
                jnp.logical_or(c.finished, out.done),
                reset_carry(policy, out.done),
            )

        start = _Carry(
            env_state,
            obs,
            key_run,
            jnp.zeros((), jnp.int32),
            jnp.zeros((num_episodes,), jnp.float32),
            jnp.zeros((num_episodes,), jnp.int32),
            jnp.zeros((num_episodes,), jnp.bool_),
            None if init_carry is None else init_carry(agent_state, (num_episodes,)),
        )
        final = jax.lax.while_loop(cond, body, start)
        return EvalMetrics(final.returns, final.lengths)

    return evaluate
