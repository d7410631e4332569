"""Craftax (an open-ended Minecraft-like survival world) behind the jaxrl
contract: ``env=craftax:Craftax-Classic-Symbolic-v1`` (``pip install 'jaxrl[craftax]'``).

- **Episode ends**: Craftax's ``done`` mixes death (and, in full Craftax,
  beating the final boss) with its ``max_timesteps`` time limit. The adapter
  asks the env's own terminal rule without the time limit: an episode that
  ends that way is ``terminated``, one that ends only by the limit is
  ``truncated``.
- **Resets**: building a Craftax start state generates a world, about ten
  times the cost of a step on a CPU. A drawn rollout (``draw_steps``: PPO,
  PQN, the replay algorithms) builds one fresh world per ``reset_share``
  consecutive envs of each step (default 16, Craftax's own "optimistic
  reset") and hands it to each of them whose episode ends there; two envs
  ending on the same step next to each other may start the same world.
  ``reset_share=1`` gives every env its own, exactly what :meth:`Env.step`
  (evaluation) does.
- **Parameters**: Craftax's ``EnvParams`` (day length, spawn chances, mob
  health, …) are env parameters for ``env.params``, ``env.randomize`` and
  ``eval.sets``.
- Observations: ``*-Symbolic-*`` a flat float vector, ``*-Pixels-*`` an image ``[H, W, 3]``.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxrl.envs.core import Discrete
from jaxrl.envs.suite import SuiteEnv, load, suite_backend, suite_id, unknown

__all__ = ["BACKEND", "CRAFTAX_IDS", "CraftaxEnv"]

CRAFTAX_IDS = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1", "Craftax-Symbolic-v1", "Craftax-Pixels-v1")

_NEVER = 2**31 - 1


class CraftaxEnv(SuiteEnv):
    """A Craftax env built with ``auto_reset=False`` (its ``reset_env``/``step_env``)."""

    def __init__(self, env: Any, name: str, reset_share: int = 16):
        self.env = env
        self.name = name
        self.default_params = env.default_params
        self.reset_share = int(reset_share)
        self.action_space = Discrete(int(env.action_space(env.default_params).n))
        obs, _ = jax.eval_shape(env.reset_env, jax.random.key(0), env.default_params)
        self.obs_shape = tuple(int(s) for s in obs.shape)
        self.max_episode_steps = int(env.default_params.max_timesteps)

    def _start(self, key, params):
        obs, state = self.env.reset_env(key, params)
        return state, jnp.asarray(obs, jnp.float32)

    def _advance(self, key, raw, action, params):
        obs, state, reward, done, _ = self.env.step_env(key, raw, action, params)
        terminated = jnp.logical_and(done, self.env.is_terminal(state, params.replace(max_timesteps=_NEVER)))
        truncated = jnp.logical_and(done, ~terminated)
        return state, jnp.asarray(obs, jnp.float32), reward, terminated, truncated


def _make(canonical: str, **options: Any) -> CraftaxEnv:
    name = suite_id(canonical)
    if name not in CRAFTAX_IDS:
        raise unknown(canonical, "Craftax", CRAFTAX_IDS)

    def build() -> CraftaxEnv:
        from craftax.craftax_env import make_craftax_env_from_name

        return CraftaxEnv(make_craftax_env_from_name(name, auto_reset=False), canonical)

    return load(canonical, "craftax", "craftax", "craftax", "craftax", build)


BACKEND = suite_backend("craftax", CRAFTAX_IDS, _make, lambda canonical: "discrete", "craftax", "craftax")
