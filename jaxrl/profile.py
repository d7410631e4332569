"""``profile=true``: where the time of one update goes.

The training update is one fused XLA program, so its parts cannot be timed
from inside it. Instead each part is compiled as its own program over the same
members and shapes and timed on the run's real state (pure functions: the
run's state and numbers are untouched):

* ``env only``: ``num_steps`` steps of every env with random actions — the
  environment's ceiling at this env count;
* the algorithm's cumulative prefixes of its update (``Agent.phases``; PPO:
  rollout, then rollout + advantages);
* ``full update``: the whole update as trained.

Each phase's own cost is the difference between consecutive prefixes; the
learner is the full update minus the last prefix. The probes are timed
round-robin (one call of each per round, median over rounds), so drift in the
machine's speed shifts them alike. A rollout-bound run spends
most of its time before the learner, a learner-bound one after it.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import jax

from jaxrl._platform import compiler_options
from jaxrl.envs.core import random_steps

__all__ = ["breakdown", "format_breakdown", "median_seconds", "round_robin_seconds"]


def median_seconds(fn: Any, *args: Any, repeats: int = 5) -> float:
    """Median wall seconds of ``fn(*args)`` (a compiled or jitted function) over
    ``repeats`` calls after one warm-up call, each waited for."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def round_robin_seconds(calls: list[tuple[Any, tuple]], repeats: int = 5) -> list[float]:
    """Median wall seconds of each ``fn(*args)`` in ``calls`` (compiled or
    jitted functions), after one warm-up call each, timed round-robin: one call
    of each per round, so that a machine speeding up or slowing down during
    the measurement shifts every function alike instead of skewing their
    comparison."""
    for fn, args in calls:
        jax.block_until_ready(fn(*args))
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(repeats):
        for i, (fn, args) in enumerate(calls):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[i].append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]


def _time_interleaved(calls: list[tuple[Any, tuple]], repeats: int) -> list[tuple[float, float]]:
    """(compile seconds, median seconds per call) of each ``jax.jit(fn)(*args)``,
    compiled first, then timed by :func:`round_robin_seconds`."""
    compiled, compile_s = [], []
    for fn, args in calls:
        t0 = time.perf_counter()
        compiled.append((jax.jit(fn).lower(*args).compile(compiler_options()), args))
        compile_s.append(time.perf_counter() - t0)
    return list(zip(compile_s, round_robin_seconds(compiled, repeats), strict=True))


def breakdown(trainer: Any, states: Any, hparams: Any, repeats: int = 5) -> dict[str, Any]:
    """Time the phases of one update over every member of ``states``.

    Args:
      trainer: the run's :class:`jaxrl.loop.Trainer`.
      states: TrainState with leaves ``[M, ...]``.
      hparams: hyperparameters with leaves ``[M]``.

    Returns:
      ``{"members", "env_steps_per_update", "phases": [{"phase", "ms", "share",
      "env_steps_per_s"}], "full_update_ms", ...}``; shares are of the full update.
    """
    agent, env = trainer.agent, trainer.env
    steps = trainer.config.algo.num_steps
    members = int(jax.tree.leaves(hparams)[0].shape[0])
    params = env.default_params

    def env_only(state: Any) -> Any:
        return random_steps(env, state.agent.env_state, state.eval_key, steps, params)

    probes: list[tuple[str, Any]] = [("env only: random actions, no policy", jax.vmap(env_only))]
    for label, fn in agent.phases:
        probes.append((label, jax.vmap(lambda s, hp, fn=fn: fn(s.agent, hp))))
    probes.append(("full update", jax.vmap(lambda s, hp: trainer.update(s, hp))))

    calls = [(fn, (states,) if label.startswith("env only") else (states, hparams)) for label, fn in probes]
    timed = _time_interleaved(calls, repeats)
    measured = [(label, c, seconds) for (label, _), (c, seconds) in zip(probes, timed, strict=True)]
    full = measured[-1][2]
    env_steps = trainer.steps_per_update * members
    rows = [
        {
            "phase": measured[0][0],
            "ms": measured[0][2] * 1e3,
            "share": measured[0][2] / full,
            "env_steps_per_s": env_steps / measured[0][2],
            "cumulative": False,
        }
    ]
    previous = 0.0
    for label, _, seconds in measured[1:-1]:
        rows.append(
            {
                "phase": label,
                "ms": (seconds - previous) * 1e3,
                "share": (seconds - previous) / full,
                "cumulative_ms": seconds * 1e3,
                "env_steps_per_s": env_steps / seconds,
                "cumulative": True,
            }
        )
        previous = seconds
    rows.append(
        {
            "phase": "learner: epochs × minibatches of forward/backward + optimizer"
            if trainer.config.algo.name == "ppo"
            else "learner: gradient steps on replayed batches",
            "ms": (full - previous) * 1e3,
            "share": (full - previous) / full,
            "cumulative": True,
        }
    )
    learner_share = (full - previous) / full
    return {
        "members": members,
        "env_steps_per_update": env_steps,
        "full_update_ms": full * 1e3,
        "full_update_env_steps_per_s": env_steps / full,
        "phases": rows,
        "bound": "learner-bound" if learner_share >= 0.5 else "rollout-bound",
        "compile_s": {label: round(c, 2) for label, c, _ in measured},
        "repeats": repeats,
    }


def format_breakdown(result: dict[str, Any]) -> str:
    """The breakdown as a small text table."""
    lines = [
        f"profile: one update of {result['members']} members × {result['env_steps_per_update'] // result['members']} "
        f"env steps = {result['full_update_ms']:.2f} ms "
        f"({result['full_update_env_steps_per_s']:,.0f} env steps/s) · {result['bound']}",
        f"  {'phase':<62} {'ms':>9} {'share':>7}",
    ]
    for row in result["phases"]:
        share = f"{row['share'] * 100:6.1f}%" if row["cumulative"] else f"({row['share'] * 100:4.0f}%)"
        lines.append(f"  {row['phase']:<62} {row['ms']:9.2f} {share:>7}")
    lines.append("  (env only is the ceiling of the environment alone, not a part of the update; parts are")
    lines.append("   timed as separate programs, so they add up to the fused update only approximately)")
    return "\n".join(lines)
