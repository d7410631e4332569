"""Trained policies out of a run directory.

>>> act = jaxrl.load_policy("runs/CartPole-v1-ppo-…", seed=3)
>>> action = jax.jit(act)(obs, jax.random.key(0))     # obs [..., *obs_shape]

The returned ``act(obs, key) -> action`` is pure (the member's parameters and
observation-normalizer statistics are closed over as constants), accepts any
leading batch shape and includes observation normalization and the clipping
of continuous actions to the env's bounds.

A recurrent policy (``algo.network=gru`` / ``lru``) returns a
:class:`RecurrentPolicy` instead: ``carry = policy.init_carry(batch_shape)``
then ``carry, action = policy(carry, obs, key)`` at every step, with the carry
zeroed where an episode ended (``jaxrl.nets.reset_carry(carry, done)``).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jaxrl.core.config import Config
from jaxrl.core.errors import ConfigError
from jaxrl.envs.host import is_host
from jaxrl.run import program, sweeping
from jaxrl.run.host import OpenedHostRun, host_member, open_host_run
from jaxrl.run.overrides import load_run_config
from jaxrl.run.spec import Members, RunSpec, members_of, pick_members, prepare

__all__ = ["Run", "RecurrentPolicy", "open_run", "load_policy"]


@dataclass
class Run:
    """A finished or stopped run (or sweep group), loaded from disk."""

    spec: RunSpec  # the run as it trained (its env, trainer, members)
    carry: Any  # program.Carry from the newest intact checkpoint, on this process's first device
    meta: dict[str, Any]
    notes: tuple[str, ...] = ()  # one line each, e.g. that an older checkpoint was used (newer ones unreadable)

    @property
    def run_dir(self) -> str:
        return self.spec.run_dir

    @property
    def config(self) -> Config:
        return self.spec.config

    @property
    def env(self) -> Any:
        return self.spec.env

    @property
    def trainer(self) -> Any:
        return self.spec.trainer

    @property
    def members(self) -> Members:
        return self.spec.members

    def member_index(self, seed: int, config_label: str | None = None) -> int:
        """Index of the member with seed id ``seed`` (and ``config_label`` in sweeps)."""
        members = self.members
        return pick_members(members.seeds, members.config_index, members.labels, seed, config_label)[0]

    def agent_state(self, member: int) -> Any:
        """One member's agent state, cut out of the vmapped state."""
        import jax

        return jax.tree.map(lambda x: x[member], self.carry.states.agent)


def _sweep_members(run_dir: str) -> Members | None:
    """The members of a sweep group directory (None for a train run)."""
    parent = os.path.dirname(os.path.abspath(run_dir))
    spec_path = os.path.join(parent, "sweep.json")
    if not os.path.isfile(spec_path):
        return None
    with open(spec_path) as f:
        spec = json.load(f)
    name = os.path.basename(os.path.abspath(run_dir))
    index = next((i for i, g in enumerate(spec["groups"]) if g["dir"] == name), None)
    if index is None:
        return None
    plan = sweeping.plan(spec["argv"])
    return sweeping.group_members(plan, plan.groups[index])


def open_host(run_dir: str, config: Any) -> OpenedHostRun:
    """A host-env run directory (``config``: its config) with its newest
    checkpoint: a train run, or a sweep group with its configurations."""
    path = os.path.abspath(os.fspath(run_dir))
    return open_host_run(path, config, _sweep_members(path))


def open_run(run_dir: str) -> Run:
    """Load a run directory's config and latest checkpoint (ConfigError if unusable)."""
    if not isinstance(run_dir, (str, os.PathLike)) or not os.path.isdir(run_dir):
        raise ConfigError("run_dir", run_dir, "does not exist", "pass a directory printed by python -m jaxrl.train")
    run_dir = os.path.abspath(os.fspath(run_dir))
    if not os.path.isfile(os.path.join(run_dir, "config.yaml")):
        raise ConfigError(
            "run_dir",
            run_dir,
            "is not a run directory (no config.yaml)",
            "pass a directory printed by python -m jaxrl.train",
        )
    config = load_run_config(run_dir, field="run_dir")
    if is_host(config.env.name):
        raise ConfigError(
            "run_dir",
            run_dir,
            f"trained on a host env ({config.env.name}); open_run reads runs of JAX envs",
            "use jaxrl.run.host.open_host_run, or python -m jaxrl.evaluate / jaxrl.export / jaxrl.load_policy (both kinds)",
        )
    members = _sweep_members(run_dir) or members_of(config)
    spec = prepare(config, run_dir, members=members, resuming=True, layout=False)
    restored = program.load_carry(spec, field="run_dir")
    notes = [program.fallback_note(restored, spec.trainer)]
    return Run(spec, restored.state, restored.meta, tuple(n for n in notes if n))


@dataclass(frozen=True)
class RecurrentPolicy:
    """A trained recurrent policy: ``policy(carry, obs, key) -> (carry, action)``
    (pure; parameters closed over) and ``init_carry(batch_shape)``, the float32
    zeros ``[*batch_shape, carry_size]`` an episode starts from."""

    step: Callable[[Any, Any, Any], Any]
    carry_size: int

    def init_carry(self, batch_shape: tuple[int, ...] = ()) -> Any:
        import jax.numpy as jnp

        return jnp.zeros((*tuple(batch_shape), self.carry_size), jnp.float32)

    def __call__(self, carry: Any, obs: Any, key: Any) -> Any:
        return self.step(carry, obs, key)


def host_config(run_dir: Any) -> Config | None:
    """The config of a host-env run directory (``None``: not one, or not a run directory)."""
    if not isinstance(run_dir, (str, os.PathLike)) or not os.path.isfile(os.path.join(run_dir, "config.yaml")):
        return None
    config = load_run_config(os.fspath(run_dir), field="run_dir")
    return config if is_host(config.env.name) else None


def load_policy(
    run_dir: str, seed: int | None = None, deterministic: bool = True, config: str | None = None
) -> Callable[..., Any]:
    """``act(obs, key) -> action`` of one trained seed (default: the run's first
    seed); a :class:`RecurrentPolicy` for a recurrent network.

    ``deterministic`` picks the mode of the policy (argmax / mean); otherwise
    actions are sampled with ``key``. ``config`` selects a configuration's
    label inside a sweep group directory.
    """
    host = host_config(run_dir)
    if host is not None:
        state, agent = host_member(open_host(run_dir, host), seed, config)
    else:
        run = open_run(run_dir)
        for note in run.notes:
            warnings.warn(note, stacklevel=2)
        member = run.member_index(run.members.seeds[0] if seed is None else int(seed), config)
        state = run.agent_state(member)
        agent = run.trainer.agent
    choose = agent.act if deterministic else agent.sample
    if agent.init_carry is not None:
        carry_size = int(agent.init_carry(state, ()).shape[-1])
        return RecurrentPolicy(lambda carry, obs, key: choose(state, carry, obs, key), carry_size)

    def act(obs: Any, key: Any) -> Any:
        """The trained policy's action for ``obs`` (``[*batch, *obs_shape]``, any
        leading batch shape, normalized inside as in training): ``[*batch]`` int32
        for discrete actions, ``[*batch, action_dim]`` within the env's bounds for
        continuous ones. ``key`` (a ``jax.random.key``) is used only when sampling."""
        return choose(state, obs, key)

    return act
