"""Robustness sweeps behind ``python -m jaxrl.sweep``: :func:`plan` expands the
sweep overrides into groups of configurations (one compiled program per group of
equal static settings), :func:`run` trains every group and writes the report.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
from typing import Any

from jaxrl import envs
from jaxrl.core.config import MAX_MEMBERS, Config, seed_ids
from jaxrl.core.contract import hparams_for
from jaxrl.core.errors import ConfigError, error_line, make_dir
from jaxrl.envs.sets import parse_sets
from jaxrl.run import driver, launch, parallel, report
from jaxrl.run.config import ALGOS, check_env_actions, normalize_overrides, parse, schema, to_dict, validate
from jaxrl.run.driver import Job
from jaxrl.run.training import new_run_dir, write_config

__all__ = ["Plan", "plan", "run"]

# Keys a sweep cannot vary.
UNSWEEPABLE = {
    "env": "run one sweep per environment (compare them with python -m jaxrl.report)",
    "algo": "run one sweep per algorithm",
    "seeds": "seeds are the inner axis of every configuration; set seeds=N once",
    "seed": "set seed= once; every configuration runs the same seeds",
    "run_dir": "set it once",
    "runs_root": "set it once",
    "resume": "resume a whole sweep with resume=SWEEP_DIR",
    "progress": "set it once",
    "plots": "set it once",
    "checkpoint": "set it once",
    "keep": "set it once",
    "on_nan": "set it once",
    "deterministic": "set it once",
    "compile_cache": "set it once",
    "profile": "set it once",
    "parallel": "set it once",
    "devices": "set it once",
    "num_evals": "set it once (it fixes the evaluation points every configuration is compared at)",
}
UNSWEEPABLE_PREFIXES = {
    "dist.": "set it once",
    "sweep.": "sweep settings configure the sweep itself",
    "pbt.": "PBT runs through python -m jaxrl.train pbt.population=N",
    "eval.": "set evaluation settings once",
}


@dataclasses.dataclass
class Plan:
    base: list[str]  # the non-swept overrides
    assignments: list[dict[str, str]]  # one per configuration: swept key → value text
    configs: list[Config]
    groups: list[list[int]]  # configuration indices per static group


def _value_text(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_value_text(v) for v in value) + "]"
    return str(value)


def _label(assignment: dict[str, str]) -> str:
    return " ".join(f"{k.removeprefix('algo.')}={v}" for k, v in assignment.items()) or "base"


def _traced_keys(algo: str) -> set[str]:
    return {f"algo.{k}" for k in ALGOS[algo].TRACED}


def _static_signature(config: Config) -> str:
    data = to_dict(config)
    for key in type(config.algo).TRACED:
        data["algo"].pop(key, None)
    data.pop("run_dir", None)
    return json.dumps(data, sort_keys=True, default=str)


def _group_env(config: Config) -> Any:
    """The env of one static group, with the checks that need it."""
    try:
        env = envs.from_config(config)
    except ConfigError:
        raise
    except Exception as error:
        raise ConfigError(
            "env", config.env.name, f"could not be built ({error_line(error, 120)})", "pick another env"
        ) from None
    check_env_actions(config, env)
    driver.parse_perturb(config.eval.perturb, env)
    parse_sets(config.eval.sets, env)
    return env


def plan(argv: list[str]) -> Plan:
    """Parse sweep overrides into configurations and static groups (validating
    every configuration before anything compiles)."""
    import numpy as np
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, QuotedString, RangeSweep
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    try:
        overrides = parser.parse_overrides(normalize_overrides(argv))
    except HydraException as error:
        text = error_line(error) if str(error).strip() else "syntax error"
        raise ConfigError("overrides", " ".join(argv), text, "write KEY=v1,v2 or KEY='interval(a,b)'") from None
    base: list[str] = []
    axes: dict[str, Any] = {}
    algo = next((o.value() for o in overrides if o.key_or_group == "algo" and not o.is_sweep_override()), "ppo")
    algo = algo if algo in ALGOS else "ppo"
    for item, o in zip(argv, overrides, strict=True):
        key = o.key_or_group
        if not o.is_sweep_override():
            base.append(item)
            continue
        if key == "env.name":
            key = "env"
        if key in UNSWEEPABLE or any(key.startswith(p) for p in UNSWEEPABLE_PREFIXES):
            why = UNSWEEPABLE.get(key) or next(v for p, v in UNSWEEPABLE_PREFIXES.items() if key.startswith(p))
            raise ConfigError(key, item.partition("=")[2], "cannot be swept", why)
        known = schema(algo)
        if key not in known:
            import difflib

            close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.5)
            raise ConfigError(
                key,
                item.partition("=")[2],
                "unknown config key",
                f"did you mean {' or '.join(close)}?" if close else "see python -m jaxrl.train --help",
            )
        value = o.value()
        if isinstance(value, (ChoiceSweep, RangeSweep)):
            # quoted choices ("length=uniform(0.25,1)","…" for a text key) as their text
            axes[key] = [v.text if isinstance(v, QuotedString) else v for v in o.sweep_iterator()]
        elif isinstance(value, IntervalSweep):
            if key not in _traced_keys(algo):
                raise ConfigError(
                    key,
                    item.partition("=")[2],
                    "interval(…) sweeps need a float hyperparameter",
                    "use a list KEY=v1,v2 for static keys",
                )
            axes[key] = ("interval", float(value.start), float(value.end), "log" in value.tags)
        else:
            raise ConfigError(
                key,
                item.partition("=")[2],
                f"unsupported sweep {type(value).__name__}",
                "use KEY=v1,v2, choice(…), range(…) or interval(a,b)",
            )
        if isinstance(axes[key], list) and not axes[key]:
            raise ConfigError(key, item.partition("=")[2], "the sweep is empty", "list at least one value")

    probe = parse(base)  # unknown keys / bad values in the base fail here
    samples = probe.sweep.samples
    intervals = [k for k, v in axes.items() if isinstance(v, tuple)]
    if intervals and samples <= 0:
        raise ConfigError(
            intervals[0], "interval(…)", "random search needs a number of samples", "add sweep.samples=64"
        )
    if not axes:
        raise ConfigError("overrides", " ".join(argv) or "(none)", "nothing to sweep", "add e.g. algo.lr=1e-3,3e-3")
    if probe.pbt.population:
        raise ConfigError(
            "pbt.population",
            probe.pbt.population,
            "PBT does not combine with a sweep",
            "use python -m jaxrl.train pbt.population=N",
        )

    import math

    count = samples if samples > 0 else math.prod(len(v) for v in axes.values())
    seeds = probe.seeds  # checked per configuration below; here only its size matters
    members = count * (len(seeds) if isinstance(seeds, (list, tuple)) else seeds if type(seeds) is int else 1)
    if members > MAX_MEMBERS:  # before drawing or composing any configuration
        raise ConfigError(
            "sweep.samples" if samples > 0 else "overrides",
            samples if samples > 0 else " ".join(argv),
            f"gives {count:,} configurations × seeds = {members:,} runs; at most {MAX_MEMBERS:,} fit (every record holds a value per run)",
            "sweep fewer values or seeds, or split the sweep",
        )

    assignments: list[dict[str, str]] = []
    if samples > 0:
        rng = np.random.default_rng(probe.sweep.seed)
        for _ in range(samples):
            a = {}
            for key, axis in axes.items():
                if isinstance(axis, tuple):
                    _, lo, hi, log = axis
                    if log:
                        if lo <= 0:
                            raise ConfigError(
                                key,
                                f"interval({lo},{hi})",
                                "a log interval needs a positive lower bound",
                                "use interval bounds > 0",
                            )
                        v = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
                    else:
                        v = float(rng.uniform(lo, hi))
                    a[key] = f"{v:.6g}"
                else:
                    a[key] = _value_text(axis[int(rng.integers(len(axis)))])
            assignments.append(a)
    else:
        for combo in itertools.product(*axes.values()):
            assignments.append({k: _value_text(v) for k, v in zip(axes, combo, strict=True)})

    configs = []
    for a in assignments:
        config = validate(parse(base + [f"{k}={v}" for k, v in a.items()]))
        configs.append(config)
    groups: dict[str, list[int]] = {}
    for i, config in enumerate(configs):
        groups.setdefault(_static_signature(config), []).append(i)
    return Plan(base=base, assignments=assignments, configs=configs, groups=_chunks(list(groups.values()), probe))


def _chunks(groups: list[list[int]], probe: Config) -> list[list[int]]:
    """Static groups split into programs of at most ``sweep.max_members``
    members, whole configurations each (every seed of a configuration stays in
    one program and one summary)."""
    limit = probe.sweep.max_members
    if not limit:
        return groups
    seeds = len(seed_ids(probe))
    if limit < seeds:
        raise ConfigError(
            "sweep.max_members",
            limit,
            f"is below the {seeds} seeds of one configuration (each program holds whole configurations)",
            f"pass sweep.max_members={seeds} or more",
        )
    per = limit // seeds
    return [group[i : i + per] for group in groups for i in range(0, len(group), per)]


def job_for(plan_: Plan, group: list[int], run_dir: str, resuming: bool):
    import numpy as np

    first = plan_.configs[group[0]]
    seeds = seed_ids(first)
    member_hparams = []
    member_seeds: list[int] = []
    member_config: list[int] = []
    for local, index in enumerate(group):
        hp = hparams_for(plan_.configs[index].algo)
        for s in seeds:
            member_hparams.append(hp)
            member_seeds.append(s)
            member_config.append(local)
    import jax

    hparams = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *member_hparams)
    return Job(
        config=dataclasses.replace(first, run_dir=run_dir, resume=None),
        seeds=tuple(member_seeds),
        config_index=tuple(member_config),
        labels=tuple(_label(plan_.assignments[i]) for i in group),
        hparams=hparams,
        run_dir=run_dir,
        resuming=resuming,
        record_updates=False,
        created=not resuming,
    )


def _sweep_dir(config: Config) -> str:

    return new_run_dir(config, prefix="sweep-", again="finish")


def _done(sweep_dir: str, group: int) -> bool:
    return os.path.isfile(os.path.join(sweep_dir, f"group-{group}", "summary.json"))


def _open_sweep(resume: str, others: list[str]) -> tuple[str, dict]:
    if others:
        raise ConfigError(
            others[0].partition("=")[0],
            others[0].partition("=")[2],
            "cannot be changed when resuming a sweep",
            "drop it (only groups= and launcher settings go with resume=)",
        )
    sweep_dir = os.path.abspath(resume)
    spec_path = os.path.join(sweep_dir, "sweep.json")
    if not os.path.isfile(spec_path):
        raise ConfigError(
            "resume",
            resume,
            "is not a sweep directory (no sweep.json)",
            "pass the directory printed at the start of the sweep",
        )
    try:
        with open(spec_path) as f:
            spec = json.load(f)
        if not isinstance(spec.get("argv"), list):
            raise ValueError("no argv list")
    except (OSError, ValueError, AttributeError) as error:
        raise ConfigError(
            "resume", resume, f"holds an unreadable sweep.json ({error_line(error, 80)})", "start the sweep again"
        ) from None
    return sweep_dir, spec


def run(
    argv: list[str], stopper: Any = None, log=None, stop_after_chunks: int | None = None, out: dict | None = None
) -> int:
    """``python -m jaxrl.sweep``: plan and check the sweep, then train every
    unfinished static group with the chosen launcher and write the report.
    ``out`` (if given) receives ``sweep_dir`` and the launcher's ``failures``."""
    out = {} if out is None else out
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    argv, launcher_args, selected = launch.split(argv)
    resume = next((a.partition("=")[2] for a in argv if a.startswith("resume=")), None)
    if resume:
        sweep_dir, spec = _open_sweep(resume, [a for a in argv if not a.startswith("resume=")])
        argv = spec["argv"]
        # the recorded launcher, unless this command names its own settings
        launcher = launch.parse(launcher_args if launcher_args else spec.get("launcher", []))
        the_plan = plan(argv)
    else:
        if selected is not None:
            raise ConfigError(
                "groups", ",".join(map(str, selected)), "selects groups of an existing sweep", "add resume=SWEEP_DIR"
            )
        launcher = launch.parse(launcher_args)
        the_plan = plan(argv)
        dist = the_plan.configs[0].dist
        if dist.coordinator or dist.auto or dist.num_processes > 1:
            raise ConfigError(
                "dist.coordinator",
                dist.coordinator or "auto",
                "sweeps run each program on one host (sharded over its devices); multi-host runs go through python -m jaxrl.train",
                "drop dist.*, and spread the groups over machines with launcher=submitit_slurm or launcher=ray",
            )
        sweep_dir = _sweep_dir(the_plan.configs[0])
    first = the_plan.configs[0]
    count = len(the_plan.groups)
    if selected is not None and selected[-1] >= count:
        raise ConfigError(
            "groups", selected[-1], f"is not a group of this sweep (0 … {count - 1})", "pass groups from its sweep.json"
        )
    chosen = list(range(count)) if selected is None else selected
    remote = launcher.name != "local"
    # one env per static group: swept env settings (env.params, env.randomize,
    # env.observe, …) give each group its own, all checked before anything is written
    group_envs = {g: _group_env(the_plan.configs[the_plan.groups[g][0]]) for g in chosen}
    groups = [
        {"dir": f"group-{g}", "configurations": [_label(the_plan.assignments[i]) for i in group]}
        for g, group in enumerate(the_plan.groups)
    ]
    if not remote:  # device layout errors before anything is written (remote jobs check their own devices)
        for g in chosen:
            parallel.plan(the_plan.configs[the_plan.groups[g][0]], len(the_plan.groups[g]) * len(seed_ids(first)))
    if not resume:
        make_dir("run_dir" if first.run_dir else "runs_root", sweep_dir)
        driver.write_json(
            os.path.join(sweep_dir, "sweep.json"),
            {
                "argv": argv,
                "launcher": launch.overrides_of(launcher),
                "configurations": [{"label": _label(a), "overrides": a} for a in the_plan.assignments],
                "groups": groups,
            },
        )
    seeds = seed_ids(first)
    out["sweep_dir"] = sweep_dir
    log(f"sweep directory: {sweep_dir}")
    log(
        f"{len(the_plan.configs)} configurations × {len(seeds)} seeds = {len(the_plan.configs) * len(seeds)} runs in {count} compiled program(s)"
    )
    pending = []
    for g in chosen:
        if _done(sweep_dir, g):
            log(f"group {g}: done")
        else:
            pending.append(g)
    if remote and pending:
        log(f"launcher={launcher.name}: {len(pending)} job(s), one per group")
        failures = out["failures"] = launch.launch(launcher, sweep_dir, pending, log=log, stopper=stopper)
        if failures:
            for failure in failures:
                labels = ", ".join(groups[failure.group]["configurations"])
                log(f"failed: group {failure.group} ({labels}): {failure.reason}; log: {failure.log}")
            log(
                f"{len(failures)} of {len(pending)} job(s) failed; re-launch the unfinished groups: "
                f"python -m jaxrl.sweep resume={sweep_dir}"
            )
            return stopper.exit_code if stopper is not None and stopper.signum is not None else 1
    for g in [] if remote else pending:
        code = _run_group(the_plan, g, sweep_dir, groups[g]["dir"], group_envs[g], stopper, log, stop_after_chunks)
        if code is not None:
            return code
    if selected is not None:
        finished = sum(_done(sweep_dir, g) for g in range(count))
        log(f"{finished} of {count} groups done")
        if finished == count and not remote:
            log(f"every group is done: python -m jaxrl.sweep resume={sweep_dir} writes the report")
        if not remote:
            return 0
    missing = [g for g in range(count) if not _done(sweep_dir, g)]
    if missing:
        log(
            f"groups {','.join(map(str, missing))} are unfinished; the report needs every group: "
            f"python -m jaxrl.sweep resume={sweep_dir}"
        )
        return 0
    entries = report.load(sweep_dir)
    result = report.build(entries)
    text = report.write(entries, result, sweep_dir, plots=first.plots)
    print(text, flush=True)
    log(f"sweep directory: {sweep_dir}")
    return 0


def _run_group(
    the_plan: Plan, g: int, sweep_dir: str, name: str, env: Any, stopper: Any, log, stop_after_chunks: int | None
) -> int | None:
    """Train group ``g`` in this process; an exit code when it stopped early."""
    group = the_plan.groups[g]
    group_dir = os.path.join(sweep_dir, name)
    checkpoints = os.path.join(group_dir, "checkpoints")
    resuming = os.path.isdir(checkpoints) and any(n.isdigit() for n in os.listdir(checkpoints))
    job = job_for(the_plan, group, group_dir, resuming)
    if not resuming:
        os.makedirs(group_dir, exist_ok=True)
        write_config(os.path.join(group_dir, "config.yaml"), job.config)
    log(f"group {g}: {len(group)} configurations × {len(job.seeds) // len(group)} seeds")
    outcome = driver.execute(
        job,
        env,
        stop_after_chunks=stop_after_chunks,
        log=log,
        stopper=stopper,
        resume_cmd=f"python -m jaxrl.sweep resume={sweep_dir}",
    )
    if outcome.summary is None:
        return outcome.code
    driver.write_json(os.path.join(group_dir, "summary.json"), outcome.summary)
    if "heldout" in outcome.summary:
        print(driver.heldout_table(outcome.summary), flush=True)
    if any(c.get("sets") for c in outcome.summary["configs"]):
        print(driver.sets_table(outcome.summary), flush=True)
    return None
