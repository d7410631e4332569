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


def make_evaluate(
    env: Env,
    act: Callable[[Any, jax.Array, jax.Array], jax.Array],
    num_episodes: int,
    max_steps: int,
    env_params: Any = None,
) -> Callable[[Any, jax.Array], EvalMetrics]:
    """``evaluate(agent_state, key, params=None) -> EvalMetrics`` (pure; vmap over
    seeds — and over env parameter settings, for held-out evaluation — outside).

    ``act(agent_state, obs [E, *obs], key) -> actions [E, ...]`` must be deterministic.
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
            action = act(agent_state, c.obs, key_act)
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
            )

        start = _Carry(
            env_state,
            obs,
            key_run,
            jnp.zeros((), jnp.int32),
            jnp.zeros((num_episodes,), jnp.float32),
            jnp.zeros((num_episodes,), jnp.int32),
            jnp.zeros((num_episodes,), jnp.bool_),
        )
        final = jax.lax.while_loop(cond, body, start)
        return EvalMetrics(final.returns, final.lengths)

    return evaluate


# ---------------------------------------------------------------------------
# python -m jaxrl.evaluate RUN_DIR [episodes=N] [seed=all|K] [deterministic=true|false] [render=true]
# ---------------------------------------------------------------------------

USAGE = """usage: python -m jaxrl.evaluate RUN_DIR [episodes=N] [seed=all|K] [deterministic=true|false] [render=true] [max_steps=N]

  Evaluates the run's latest checkpoint: every selected seed × N episodes in one
  compiled program. With the defaults (episodes = the run's eval.episodes,
  deterministic=true) it replays the run's final evaluation exactly.
"""


def _options(argv: list[str]) -> tuple[str, dict[str, str]]:
    from jaxrl.config import ConfigError

    known = {"episodes": None, "seed": "all", "deterministic": "true", "render": "false", "max_steps": None}
    run_dir = None
    options: dict[str, Any] = dict(known)
    for a in argv:
        key, sep, value = a.partition("=")
        if not sep:
            if run_dir is not None:
                raise ConfigError("run_dir", a, "only one run directory is evaluated at a time", "pass one RUN_DIR")
            run_dir = a
        elif key in known:
            options[key] = value
        else:
            raise ConfigError(
                key, value, "unknown option", "use episodes=, seed=, deterministic=, render= or max_steps="
            )
    if run_dir is None:
        raise ConfigError("run_dir", "(none)", "a run directory is needed", "pass RUN_DIR")
    for key in ("deterministic", "render"):
        if options[key] not in ("true", "false"):
            raise ConfigError(key, options[key], "must be true or false", f"pass {key}=true")
    for key in ("episodes", "max_steps"):
        if options[key] is not None:
            try:
                value = int(options[key])
            except ValueError:
                value = -1
            if value <= 0:
                raise ConfigError(key, options[key], "must be a positive integer", f"pass e.g. {key}=100")
            if value >= 2**31:
                raise ConfigError(
                    key, options[key], "must be below 2^31 (an int32 inside the program)", f"pass e.g. {key}=100"
                )
            options[key] = value
    if options["seed"] != "all":
        try:
            options["seed"] = int(options["seed"])
        except ValueError:
            raise ConfigError("seed", options["seed"], "must be all or a seed id", "pass seed=all or seed=0") from None
    return run_dir, options


def main(argv: list[str] | None = None) -> int:
    import os
    import sys
    import time

    from jaxrl.config import ConfigError

    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    try:
        from jaxrl import _platform

        _platform.configure()
        _platform.quiet_libraries()
        _platform.check_environment()
        run_dir, options = _options(argv)
        _platform.split_cpu_devices()  # as the training CLI does, before jax starts: the same layout
        from jaxrl.policy import open_run

        run = open_run(run_dir)
        members = list(range(len(run.job.seeds))) if options["seed"] == "all" else [run.member_index(options["seed"])]
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from jaxrl import parallel
    from jaxrl.driver import layout_note

    for note in run.notes:
        print(note, file=sys.stderr)
    # the selected members over as many of this process's devices as divide them (training's rule)
    layout = parallel.reading_plan(run.config, len(members))
    note = layout_note(run.meta, parallel.layout_record(layout), "this evaluation runs")
    if note:
        print(note, file=sys.stderr)

    import numpy as np

    from jaxrl import perf, stats
    from jaxrl.driver import write_json

    config, env = run.config, run.env
    episodes = options["episodes"] or config.eval.episodes
    max_steps = options["max_steps"] or config.eval.max_steps or env.max_episode_steps or 1000
    deterministic = options["deterministic"] == "true"
    agent = run.trainer.agent
    evaluate = make_evaluate(env, agent.act if deterministic else agent.sample, episodes, max_steps)
    index = np.asarray(members)
    states = jax.tree.map(lambda x: x[index], run.carry.states.agent)
    # the key of the run's last evaluation: with the defaults, the same episodes
    keys = jax.vmap(jax.random.wrap_key_data)(jnp.asarray(np.asarray(run.carry.states.last_eval_key)[index]))
    if layout is not None:
        states, keys = parallel.place((states, keys), parallel.member_shardings(layout, (states, keys)))
    t0 = time.perf_counter()
    program = jax.jit(jax.vmap(evaluate)).lower(states, keys).compile(perf.compile_options(perf.of(config)))
    try:
        from jaxrl import memory

        fix = f"pass fewer episodes= (now {episodes}) or seed=K"
        memory.check(memory.program_bytes(program), layout, "this evaluation", fix)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = program(states, keys)
    returns = np.asarray(jax.device_get(result.returns), np.float64)  # [M, E]
    seconds = time.perf_counter() - t0
    seeds = [run.job.seeds[i] for i in members]
    labels = [run.job.labels[run.job.config_index[i]] for i in members]
    multi = len(set(run.job.labels)) > 1
    solved = env.solved_return
    lines = [
        f"{env.name} · {config.algo.name} · {'deterministic' if deterministic else 'sampled'} policy · {episodes} episodes per seed · {seconds:.1f} s"
    ]
    lines.append(
        f"{'seed':>6} "
        + (f"{'configuration':<28} " if multi else "")
        + f"{'mean':>10}  {'95% CI (bootstrap)':>22} {'min':>9} {'max':>9}"
    )
    per_seed = []
    for s, label, row in zip(seeds, labels, returns, strict=True):
        lo, hi = stats.bootstrap_ci(row, np.mean, n_resamples=1000)
        per_seed.append(
            {"seed": s, "config": label, "returns": row.tolist(), "mean": float(row.mean()), "ci95": [lo, hi]}
        )
        lines.append(
            f"{s:>6} "
            + (f"{label:<28} " if multi else "")
            + f"{row.mean():>10.2f}  [{lo:>9.2f}, {hi:>9.2f}] {row.min():>9.2f} {row.max():>9.2f}"
        )
    means = returns.mean(axis=1)
    summary = stats.summarize(means, solved)
    lo, hi = summary["ci95"]
    lines.append(
        f"across {len(members)} seeds: IQM {summary['iqm']:.2f} [{lo:.2f}, {hi:.2f}], mean {summary['mean']:.2f}"
        + (f", solved {summary['solved_fraction'] * 100:.0f}%" if solved is not None else "")
    )
    print("\n".join(lines), flush=True)
    out = {
        "run_dir": run.run_dir,
        "episodes": episodes,
        "deterministic": deterministic,
        "max_steps": max_steps,
        "seeds": per_seed,
        **summary,
    }
    if options["render"] == "true":
        from jaxrl.render import episode_observations, save_gif

        member = members[0]
        obs, rewards = episode_observations(
            env, agent.act if deterministic else agent.sample, run.agent_state(member), keys[0], max_steps
        )
        path = os.path.join(run.run_dir, f"episode-seed{run.job.seeds[member]}.gif")
        frames = save_gif(path, env.name, obs, rewards)
        out["render"] = {"path": path, "frames": frames, "return": float(rewards.sum())}
        print(
            f"episode of seed {run.job.seeds[member]}: {frames} frames, return {rewards.sum():.1f} → {path}", flush=True
        )
    write_json(os.path.join(run.run_dir, "evaluation.json"), out)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
