"""``python -m jaxrl.evaluate RUN_DIR [episodes=N] [seed=all|K] [deterministic=true|false] [render=true] [eval.sets=…]``

Evaluates a run's latest checkpoint: every selected seed × N episodes in one
compiled program (the in-program evaluation, :mod:`jaxrl.trainer.evaluate`);
``eval.sets=`` adds named evaluation sets (:mod:`jaxrl.envs.sets`) without
retraining; ``render=true`` writes a GIF per seed.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any

LAUNCHED = time.perf_counter()  # before the imports: the header's time since launch includes them

from jaxrl.perf import platform  # noqa: E402, I001  (first: it settles the process before jax loads)

if __name__ == "__main__":  # python -m jaxrl.evaluate: XLA's log level and flags before jaxlib loads
    platform.configure()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from jaxrl import perf  # noqa: E402
from jaxrl.core.contract import policy_step  # noqa: E402
from jaxrl.core.errors import ConfigError  # noqa: E402
from jaxrl.envs.host import render_episode  # noqa: E402
from jaxrl.run import memory, parallel, stats  # noqa: E402
from jaxrl.run.host import evaluate_host_run, host_member, pick  # noqa: E402
from jaxrl.run.io import write_json  # noqa: E402
from jaxrl.run.policy import host_config, open_host, open_run  # noqa: E402
from jaxrl.run.render import episode_observations, save_frames_gif, save_gif  # noqa: E402
from jaxrl.run.rundir import layout_note  # noqa: E402
from jaxrl.run.spec import pick_members  # noqa: E402
from jaxrl.run.summary import set_blocks, sets_table  # noqa: E402
from jaxrl.trainer.evaluate import make_evaluate  # noqa: E402
from jaxrl.trainer.loop import make_evaluate_sets, make_train  # noqa: E402

__all__ = ["USAGE", "main"]


USAGE = """usage: python -m jaxrl.evaluate RUN_DIR [episodes=N] [seed=all|K] [config=LABEL] [deterministic=true|false] [render=true] [max_steps=N] [eval.sets=SETS]

  Evaluates the run's latest checkpoint: every selected seed × N episodes in one
  compiled program. With the defaults (episodes = the run's eval.episodes,
  deterministic=true) it replays the run's final evaluation exactly.
  eval.sets="nominal; test: length=1.5,2 gravity=15; wide: length=uniform(0.25,2)"
  also evaluates named sets (train: the training distribution; nominal: the
  env's own parameters; NAME: a grid and/or per-episode draws) and reports each
  set's IQM and its gap to train; the run's own eval.sets replay its final
  set evaluation exactly. A sweep group directory (SWEEP_DIR/group-G) holds
  several configurations with the same seed ids: config=LABEL (a label of its
  report, e.g. config="lr=0.001") evaluates that configuration's seeds only.
"""


def _options(argv: list[str]) -> tuple[str, dict[str, str]]:

    known = {
        "episodes": None,
        "seed": "all",
        "deterministic": "true",
        "render": "false",
        "max_steps": None,
        "eval.sets": "",
        "config": None,
    }
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
                key,
                value,
                "unknown option",
                "use episodes=, seed=, config=, deterministic=, render=, max_steps= or eval.sets=",
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


def _evaluate_host(run_dir: str, config: Any, options: dict[str, str]) -> int:
    """``evaluate`` of a run on a host env (``env=gymnasium:ID``): fresh episodes
    of each seed on the run's own env; ``render=true`` draws one episode of the
    first selected seed with the env's own ``rgb_array`` frames."""
    import os
    import sys

    if options["eval.sets"]:
        print(
            f"error: eval.sets={options['eval.sets']}: is not available for runs on host envs yet; fix: drop it",
            file=sys.stderr,
        )
        return 2
    opened = open_host(run_dir, config)
    episodes = options["episodes"] or config.eval.episodes
    max_steps = options["max_steps"] or config.eval.max_steps or opened.run.spec.max_episode_steps or 10_000
    deterministic = options["deterministic"] == "true"
    run = opened.run
    first = pick(run, options["seed"], options["config"])[0]  # a seed or configuration the run lacks: one line
    if options["render"] == "true":  # before any episode is played: an env that cannot draw is one line
        shown = run.seeds[first]
        label = run.labels[run.config_index[first]] if run.labels else None
        state, agent = host_member(opened, shown, label)
        init_carry, step = policy_step(agent, deterministic)
        step = jax.jit(step)
        keys = iter(jax.random.split(jax.random.key(54321), max_steps + 1))
        held = [init_carry(state, (1,))]  # a recurrent policy's carry over the one episode (None: memoryless)

        def act(obs: Any) -> Any:
            held[0], action = step(state, held[0], obs, next(keys))
            return action

        frames, rewards = render_episode(opened.run.spec, act, shown, max_steps)
    out = evaluate_host_run(opened, episodes, options["seed"], deterministic, max_steps, options["config"])
    policy = "deterministic" if deterministic else "sampled"
    print(f"{opened.run.spec.name} · {config.algo.name} · {policy} policy · {episodes} episodes per seed")
    for row in out["seeds"]:
        name = f"{row['config']} seed {row['seed']}" if "config" in row else f"{row['seed']:>6}"
        print(f"{name} {row['mean']:>10.2f}  [{row['ci95'][0]:>9.2f}, {row['ci95'][1]:>9.2f}]")
    print(f"across {len(out['seeds'])} seed(s): IQM {out['iqm']:.2f} [{out['ci95'][0]:.2f}, {out['ci95'][1]:.2f}]")
    if options["render"] == "true":
        path = os.path.join(opened.run_dir, f"episode-seed{shown}.gif")
        count = save_frames_gif(path, opened.run.spec.name, frames, rewards)
        out["render"] = {"path": path, "frames": count, "return": float(rewards.sum())}
        print(f"episode of seed {shown}: {count} frames, return {rewards.sum():.1f} → {path}", flush=True)
    write_json(os.path.join(opened.run_dir, "evaluation.json"), out)
    return 0


def main(argv: list[str] | None = None) -> int:
    import os
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE)
        return 0
    try:
        platform.configure()
        platform.quiet_libraries()
        run_dir, options = _options(argv)
        # as the training CLI does, before jax starts: the same layout
        process = platform.process_settings(cpu_devices=platform.split_cpu_devices())

        host = host_config(run_dir)
        if host is not None:  # a run on a host env: its own envs, stepped here
            return _evaluate_host(run_dir, host, options)
        run = open_run(run_dir)
        m = run.members
        members = pick_members(m.seeds, m.config_index, m.labels, options["seed"], options["config"])
        # eval.sets= of this evaluation, parsed as the run's own are: by the trainer
        config = run.config
        with_sets = dataclasses.replace(config, eval=dataclasses.replace(config.eval, sets=options["eval.sets"]))
        eval_sets = make_train(with_sets, run.env).eval_sets
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2

    for note in run.notes:
        print(note, file=sys.stderr)
    # the selected members over as many of this process's devices as divide them (training's rule)
    layout = parallel.reading_plan(run.config, len(members))
    # a subset of the members cannot keep training's layout, and the tool chose both: no note then
    note = layout_note(run.meta, parallel.layout_record(layout), "this evaluation runs")
    if note and options["seed"] == "all":
        print(note, file=sys.stderr)

    import numpy as np

    config, env = run.config, run.env
    episodes = options["episodes"] or config.eval.episodes
    max_steps = options["max_steps"] or config.eval.max_steps or env.max_episode_steps or 1000
    deterministic = options["deterministic"] == "true"
    agent = run.trainer.agent
    evaluate = make_evaluate(
        env, agent.act if deterministic else agent.sample, episodes, max_steps, init_carry=agent.init_carry
    )
    index = np.asarray(members)
    states = jax.tree.map(lambda x: x[index], run.carry.states.agent)
    # the key of the run's last evaluation: with the defaults, the same episodes
    keys = jax.vmap(jax.random.wrap_key_data)(jnp.asarray(np.asarray(run.carry.states.last_eval_key)[index]))
    if layout is not None:
        states, keys = parallel.place((states, keys), parallel.member_shardings(layout, (states, keys)))
    t0 = time.perf_counter()
    options_ = perf.compile_options(perf.of(config), process.opt_level)
    program = jax.jit(jax.vmap(evaluate)).lower(states, keys).compile(options_)
    try:
        fix = f"pass fewer episodes= (now {episodes}) or seed=K"
        memory.check(memory.program_bytes(program), layout, "this evaluation", fix)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    result = program(states, keys)
    set_means = None
    if eval_sets:
        run_sets = make_evaluate_sets(
            eval_sets,
            env,
            agent.act if deterministic else agent.sample,
            episodes,
            max_steps,
            init_carry=agent.init_carry,
        )
        sets_program = jax.jit(jax.vmap(run_sets)).lower(states, keys, result).compile(options_)
        try:
            memory.check(memory.program_bytes(sets_program), layout, "this evaluation", fix + " or fewer sets")
        except ConfigError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        found = jax.device_get(sets_program(states, keys, result))
        set_means = {s.name: np.asarray(found[s.name].returns, np.float64).mean(axis=1) for s in eval_sets}
    returns = np.asarray(jax.device_get(result.returns), np.float64)  # [M, E]
    seconds = time.perf_counter() - t0
    seeds = [run.members.seeds[i] for i in members]
    labels = [run.members.labels[run.members.config_index[i]] for i in members]
    multi = len(set(run.members.labels)) > 1
    solved = env.solved_return
    lines = [
        f"{env.name} · {config.algo.name} · {'deterministic' if deterministic else 'sampled'} policy · {episodes} episodes per seed · {seconds:.1f} s"
        + (f" ({time.perf_counter() - LAUNCHED:.1f} s since launch)" if __name__ == "__main__" else "")
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
        f"across {len(members)} seed{'s' if len(members) != 1 else ''}: IQM {summary['iqm']:.2f} [{lo:.2f}, {hi:.2f}], mean {summary['mean']:.2f}"
        + (f", solved {summary['solved_fraction'] * 100:.0f}%" if solved is not None else "")
    )
    out = {
        "run_dir": run.run_dir,
        "episodes": episodes,
        "deterministic": deterministic,
        "max_steps": max_steps,
        "seeds": per_seed,
        **summary,
    }
    if set_means is not None:
        blocks = []
        for label in dict.fromkeys(labels):
            rows = [i for i, name in enumerate(labels) if name == label]
            blocks.append(
                {
                    "label": label,
                    **set_blocks({k: v.tolist() for k, v in set_means.items()}, means.tolist(), rows, solved),
                }
            )
        lines.append(sets_table({"configs": blocks, "solved_threshold": solved}))
        if multi:
            out["configs"] = blocks
        else:
            out.update({k: blocks[0][k] for k in ("sets", "generalization_gap")})
        out["eval_sets"] = options["eval.sets"]
    print("\n".join(lines), flush=True)
    if options["render"] == "true":
        member = members[0]
        obs, rewards = episode_observations(
            env, policy_step(agent, deterministic), run.agent_state(member), keys[0], max_steps
        )
        path = os.path.join(run.run_dir, f"episode-seed{run.members.seeds[member]}.gif")
        frames = save_gif(path, env.name, obs, rewards)
        out["render"] = {"path": path, "frames": frames, "return": float(rewards.sum())}
        print(
            f"episode of seed {run.members.seeds[member]}: {frames} frames, return {rewards.sum():.1f} → {path}",
            flush=True,
        )
    write_json(os.path.join(run.run_dir, "evaluation.json"), out)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
