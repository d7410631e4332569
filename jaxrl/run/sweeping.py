"""Robustness sweeps behind ``python -m jaxrl.sweep``: :func:`plan` expands the
sweep overrides into groups of configurations (one compiled program per group of
equal static settings, each configuration resolved by
:func:`jaxrl.run.overrides.resolve`), :func:`run` prepares every group's
:class:`~jaxrl.run.spec.RunSpec` before anything is written, trains them and
writes the report. Which keys may be swept each field declares itself
(:func:`jaxrl.core.config.sweep_refusal`).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import math
import os
import sys
from typing import Any

from jaxrl.core.config import MAX_MEMBERS, Config, seed_ids, sweep_refusal
from jaxrl.core.errors import ConfigError, error_line, make_dir
from jaxrl.core.fields import HParams, traced_names
from jaxrl.envs.host import is_host
from jaxrl.perf import platform
from jaxrl.perf.platform import Process
from jaxrl.run import launch, report
from jaxrl.run.host import HostRun, prepare_host, run_host
from jaxrl.run.io import write_json
from jaxrl.run.loop import execute
from jaxrl.run.overrides import ALGOS, normalize_overrides, resolve, schema, to_dict
from jaxrl.run.rundir import new_run_dir, write_config
from jaxrl.run.spec import Members, RunSpec, prepare
from jaxrl.run.summary import heldout_table, sets_table

__all__ = ["Plan", "plan", "group_members", "group_spec", "host_group", "run"]


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
    return {f"algo.{k}" for k in traced_names(ALGOS[algo])}


def _static_signature(config: Config) -> str:
    data = to_dict(config)
    for key in traced_names(type(config.algo)):
        data["algo"].pop(key, None)
    data.pop("run_dir", None)
    return json.dumps(data, sort_keys=True, default=str)


def plan(argv: list[str]) -> Plan:
    """Parse sweep overrides into configurations and static groups (validating
    every configuration before anything compiles)."""
    base, axes = _axes(argv)
    probe = resolve(base, check=False)  # unknown keys / bad values in the base fail here
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
    if samples > 0:
        assignments = _samples(axes, samples, probe.sweep.seed)
    else:
        assignments = [
            {k: _value_text(v) for k, v in zip(axes, combo, strict=True)} for combo in itertools.product(*axes.values())
        ]
    configs = [resolve(base + [f"{k}={v}" for k, v in a.items()]) for a in assignments]
    groups: dict[str, list[int]] = {}
    for i, config in enumerate(configs):
        groups.setdefault(_static_signature(config), []).append(i)
    return Plan(base=base, assignments=assignments, configs=configs, groups=_chunks(list(groups.values()), probe))


def _axes(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """``(base overrides, {swept key: values or ("interval", lo, hi, log)})`` of a sweep's argv."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        overrides = OverridesParser.create().parse_overrides(normalize_overrides(argv))
    except HydraException as error:
        text = error_line(error) if str(error).strip() else "syntax error"
        raise ConfigError("overrides", " ".join(argv), text, "write KEY=v1,v2 or KEY='interval(a,b)'") from None
    algo = next((o.value() for o in overrides if o.key_or_group == "algo" and not o.is_sweep_override()), "ppo")
    algo = algo if algo in ALGOS else "ppo"
    base: list[str] = []
    axes: dict[str, Any] = {}
    for item, o in zip(argv, overrides, strict=True):
        if not o.is_sweep_override():
            base.append(item)
            continue
        key = "env" if o.key_or_group == "env.name" else o.key_or_group
        axes[key] = _axis(key, item.partition("=")[2], o, algo)
    return base, axes


def _axis(key: str, text: str, override: Any, algo: str) -> Any:
    """One swept key's values (a list) or random-search interval; refused with
    one line when the key cannot be swept, is unknown or the sweep is empty."""
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, QuotedString, RangeSweep

    why = sweep_refusal(key, ALGOS[algo])
    if why:
        raise ConfigError(key, text, "cannot be swept", why)
    known = schema(algo)
    if key not in known:
        close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.5)
        hint = f"did you mean {' or '.join(close)}?" if close else "see python -m jaxrl.train --help"
        raise ConfigError(key, text, "unknown config key", hint)
    value = override.value()
    if isinstance(value, (ChoiceSweep, RangeSweep)):
        # quoted choices ("length=uniform(0.25,1)","…" for a text key) as their text
        values = [v.text if isinstance(v, QuotedString) else v for v in override.sweep_iterator()]
        if not values:
            raise ConfigError(key, text, "the sweep is empty", "list at least one value")
        return values
    if isinstance(value, IntervalSweep):
        if key not in _traced_keys(algo):
            raise ConfigError(
                key, text, "interval(…) sweeps need a float hyperparameter", "use a list KEY=v1,v2 for static keys"
            )
        return ("interval", float(value.start), float(value.end), "log" in value.tags)
    raise ConfigError(
        key, text, f"unsupported sweep {type(value).__name__}", "use KEY=v1,v2, choice(…), range(…) or interval(a,b)"
    )


def _samples(axes: dict[str, Any], samples: int, seed: int) -> list[dict[str, str]]:
    """Random search: ``samples`` assignments, choices drawn uniformly and
    intervals uniformly or log-uniformly."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(samples):
        a = {}
        for key, axis in axes.items():
            if not isinstance(axis, tuple):
                a[key] = _value_text(axis[int(rng.integers(len(axis)))])
                continue
            _, lo, hi, log = axis
            if log and lo <= 0:
                raise ConfigError(
                    key,
                    f"interval({lo},{hi})",
                    "a log interval needs a positive lower bound",
                    "use interval bounds > 0",
                )
            v = float(np.exp(rng.uniform(np.log(lo), np.log(hi)))) if log else float(rng.uniform(lo, hi))
            a[key] = f"{v:.6g}"
        out.append(a)
    return out


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


def group_members(plan_: Plan, group: list[int]) -> Members:
    """The members of one static group: every configuration × every seed, each
    configuration's traced hyperparameters stacked (one record per chunk)."""
    import jax
    import numpy as np

    seeds = seed_ids(plan_.configs[group[0]])
    member_hparams = []
    member_seeds: list[int] = []
    member_config: list[int] = []
    for local, index in enumerate(group):
        hp = HParams.from_config(plan_.configs[index].algo)
        for s in seeds:
            member_hparams.append(hp)
            member_seeds.append(s)
            member_config.append(local)
    hparams = jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *member_hparams)
    labels = tuple(_label(plan_.assignments[i]) for i in group)
    return Members(tuple(member_seeds), tuple(member_config), labels, hparams, record_updates=False)


def group_spec(plan_: Plan, g: int, sweep_dir: str, process: Process, layout: bool = True, env: Any = None) -> RunSpec:
    """Group ``g``'s RunSpec (its directory ``SWEEP_DIR/group-g``, resumed when
    it holds a checkpoint); ``layout=False`` leaves the device layout to the job
    that runs it (a remote launcher's)."""
    group = plan_.groups[g]
    group_dir = os.path.join(sweep_dir, f"group-{g}")
    checkpoints = os.path.join(group_dir, "checkpoints")
    resuming = os.path.isdir(checkpoints) and any(n.isdigit() for n in os.listdir(checkpoints))
    config = dataclasses.replace(plan_.configs[group[0]], resume=None)
    return prepare(
        config,
        group_dir,
        process=process,
        members=group_members(plan_, group),
        env=env,
        resuming=resuming,
        layout=layout,
        resume_cmd=f"python -m jaxrl.sweep resume={sweep_dir}",
    )


def host_group(plan_: Plan, g: int, sweep_dir: str) -> tuple[HostRun, str, bool]:
    """Group ``g`` on a host env: its prepared pipeline run (every configuration's
    seeds as members of one learner, each with its own envs), its directory and
    whether it resumes from a checkpoint there."""
    group = plan_.groups[g]
    group_dir = os.path.join(sweep_dir, f"group-{g}")
    checkpoints = os.path.join(group_dir, "checkpoints")
    resuming = os.path.isdir(checkpoints) and any(n.isdigit() for n in os.listdir(checkpoints))
    config = dataclasses.replace(plan_.configs[group[0]], resume=None)
    return prepare_host(config, group_members(plan_, group)), group_dir, resuming


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
    argv: list[str],
    stopper: Any = None,
    log: Any = None,
    stop_after_chunks: int | None = None,
    out: dict | None = None,
    process: Process | None = None,
) -> int:
    """``python -m jaxrl.sweep``: plan and check the sweep, then train every
    unfinished static group with the chosen launcher and write the report.
    ``out`` (if given) receives ``sweep_dir`` and the launcher's ``failures``."""
    out = {} if out is None else out
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    argv, launcher_args, selected = launch.split(argv)
    sweep_dir, argv, launcher, the_plan, resumed = _open(argv, launcher_args, selected)
    count = len(the_plan.groups)
    if selected is not None and selected[-1] >= count:
        raise ConfigError(
            "groups", selected[-1], f"is not a group of this sweep (0 … {count - 1})", "pass groups from its sweep.json"
        )
    chosen = list(range(count)) if selected is None else selected
    remote = launcher.name != "local"
    # every chosen group prepared — its env (swept env settings give each group its own),
    # trainer, checks and, for this host's own jobs, its device layout — before anything is written
    process = process or platform.process_settings()
    if is_host(the_plan.configs[0].env.name):  # the actor–learner pipeline, one learner per group
        specs: dict[int, Any] = {g: host_group(the_plan, g, sweep_dir) for g in chosen}
    else:
        specs = {g: group_spec(the_plan, g, sweep_dir, process, layout=not remote) for g in chosen}
    groups = [
        {"dir": f"group-{g}", "configurations": [_label(the_plan.assignments[i]) for i in group]}
        for g, group in enumerate(the_plan.groups)
    ]
    first = the_plan.configs[0]
    if not resumed:
        make_dir("run_dir" if first.run_dir else "runs_root", sweep_dir)
        write_json(
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
        code = _launch(launcher, sweep_dir, pending, groups, log, stopper, out)
        if code is not None:
            return code
    for g in [] if remote else pending:
        code = _run_group(specs[g], g, log, stopper, stop_after_chunks)
        if code is not None:
            return code
    return _report(sweep_dir, count, selected, remote, first.plots, log)


def _open(argv: list[str], launcher_args: list[str], selected: list[int] | None) -> tuple:
    """``(sweep_dir, argv, launcher, plan, resumed)``: a new sweep's, or with
    ``resume=SWEEP_DIR`` the recorded one's (its launcher unless new settings are given)."""
    resume = next((a.partition("=")[2] for a in argv if a.startswith("resume=")), None)
    if resume:
        sweep_dir, spec = _open_sweep(resume, [a for a in argv if not a.startswith("resume=")])
        argv = spec["argv"]
        launcher = launch.parse(launcher_args if launcher_args else spec.get("launcher", []))
        return sweep_dir, argv, launcher, plan(argv), True
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
    return _sweep_dir(the_plan.configs[0]), argv, launcher, the_plan, False


def _launch(
    launcher: Any, sweep_dir: str, pending: list[int], groups: list[dict], log: Any, stopper: Any, out: dict
) -> int | None:
    """The pending groups as jobs of a remote launcher; an exit code when some failed."""
    log(f"launcher={launcher.name}: {len(pending)} job(s), one per group")
    failures = out["failures"] = launch.launch(launcher, sweep_dir, pending, log=log, stopper=stopper)
    if not failures:
        return None
    for failure in failures:
        labels = ", ".join(groups[failure.group]["configurations"])
        log(f"failed: group {failure.group} ({labels}): {failure.reason}; log: {failure.log}")
    log(
        f"{len(failures)} of {len(pending)} job(s) failed; re-launch the unfinished groups: "
        f"python -m jaxrl.sweep resume={sweep_dir}"
    )
    return stopper.exit_code if stopper is not None and stopper.signum is not None else 1


def _report(sweep_dir: str, count: int, selected: list[int] | None, remote: bool, plots: bool, log: Any) -> int:
    """The sweep's report once every group is done (``groups=`` runs never write it)."""
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
    text = report.write(entries, result, sweep_dir, plots=plots)
    print(text, flush=True)
    log(f"sweep directory: {sweep_dir}")
    return 0


def _run_group(spec: Any, g: int, log: Any, stopper: Any, stop_after_chunks: int | None) -> int | None:
    """Train group ``g`` (its RunSpec, or a host env's :func:`host_group`) in
    this process; an exit code when it stopped early."""
    if isinstance(spec, tuple):
        run, group_dir, _ = spec
        count = len(run.labels)
        log(f"group {g}: {count} configurations × {len(run.seeds) // count} seeds")
        code = run_host(run.config, log, stopper, stop_after_chunks, group=spec)
        return None if code == 0 and os.path.isfile(os.path.join(group_dir, "summary.json")) else code
    if not spec.resuming:
        os.makedirs(spec.run_dir, exist_ok=True)
        write_config(os.path.join(spec.run_dir, "config.yaml"), spec.config)
    members = spec.members
    log(f"group {g}: {len(members.labels)} configurations × {len(members) // len(members.labels)} seeds")
    outcome = execute(spec, stop_after_chunks=stop_after_chunks, log=log, stopper=stopper)
    if outcome.summary is None:
        return outcome.code
    write_json(os.path.join(spec.run_dir, "summary.json"), outcome.summary)
    if "heldout" in outcome.summary:
        print(heldout_table(outcome.summary), flush=True)
    if any(c.get("sets") for c in outcome.summary["configs"]):
        print(sets_table(outcome.summary), flush=True)
    return None
