"""The training job behind ``python -m jaxrl.train``: resolve a config (overrides,
presets, ``resume=``), pick the run directory, run the driver, print the
robustness table. Exit codes: 0 done, 2 bad input, 130/143 stopped after a
checkpoint.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any

from jaxrl import envs
from jaxrl.core.config import Config, seed_ids
from jaxrl.core.contract import algorithm_for, hparams_for
from jaxrl.core.errors import ConfigError, error_line, make_dir
from jaxrl.envs import canonical_name
from jaxrl.envs.sets import parse_sets
from jaxrl.perf import platform
from jaxrl.run import driver, parallel, stats
from jaxrl.run.config import check_env_actions, from_dict, parse, to_dict, validate
from jaxrl.run.driver import Job
from jaxrl.run.logs import JsonlWriter, format_count
from jaxrl.run.parallel import is_primary
from jaxrl.trainer import pbt

__all__ = ["job_for", "load_run_config", "new_run_dir", "resolve", "run", "write_config"]

# Overrides that may accompany resume= (they do not change the numbers).
RESUME_OK = {
    "progress",
    "plots",
    "keep",
    "checkpoint",
    "resume",
    "logger",
    "wandb_project",
    "compile_cache",
    "profile",
    "devices",
    "dist.coordinator",
    "dist.num_processes",
    "dist.process_id",
    "dist.auto",
    "dist.heartbeat_s",
}


def load_run_config(run_dir: str, field: str = "resume") -> Config:
    """The Config stored in ``run_dir/config.yaml`` (ConfigError naming ``field``)."""
    import yaml

    path = os.path.join(run_dir, "config.yaml")
    if not os.path.isdir(run_dir):
        raise ConfigError(
            field, run_dir, "directory does not exist", "pass the run directory printed at the start of a run"
        )
    if not os.path.isfile(path):
        raise ConfigError(
            field,
            run_dir,
            "is not a run directory (no config.yaml)",
            "pass the run directory printed at the start of a run",
        )
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
        if not isinstance(data, dict):
            raise ValueError("not a mapping")
        config = from_dict(data)
    except ConfigError as error:
        raise ConfigError(field, run_dir, f"config.yaml is invalid ({error})", "start a new run") from None
    except Exception as error:
        raise ConfigError(
            field, run_dir, f"config.yaml is corrupt ({type(error).__name__})", "start a new run"
        ) from None
    return config


def resolve(argv: list[str]) -> Config:
    """Overrides → validated Config (for ``resume=`` the run's own config)."""
    overrides = [a for a in argv if a.strip()]
    resume = None
    for item in overrides:
        key, _, value = item.partition("=")
        if key.strip() == "resume" and value not in ("", "null", "None"):
            resume = value
    if resume is None:
        return validate(parse(overrides))
    resume = os.path.abspath(os.path.expanduser(resume))
    config = load_run_config(resume)
    changes: dict[str, Any] = {}
    for item in overrides:
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in RESUME_OK:
            raise ConfigError(
                key, value, "cannot be changed when resuming (it would change the run)", "drop it, or start a new run"
            )
        if key != "resume":
            parsed = parse([item])
            section, _, name = key.rpartition(".")
            if section:  # e.g. dist.process_id: each process of a multi-process run passes its own
                changes[section] = dataclasses.replace(
                    changes.get(section, getattr(config, section)), **{name: getattr(getattr(parsed, section), name)}
                )
            else:
                changes[key] = getattr(parsed, key)
    config = dataclasses.replace(config, run_dir=resume, resume=resume, **changes)
    return validate(config)


def new_run_dir(config: Config, prefix: str = "", again: str = "continue") -> str:
    """``config.run_dir`` (which must be empty or absent), else a fresh
    ``<runs_root>/<prefix><env>-<algo>-<timestamp>`` (the sweep's too)."""
    if config.run_dir:
        path = os.path.abspath(os.path.expanduser(config.run_dir))
        if os.path.exists(path) and not os.path.isdir(path):
            raise ConfigError("run_dir", config.run_dir, "is a file, not a directory", "pick a new run_dir")
        if os.path.exists(path) and os.listdir(path):
            raise ConfigError(
                "run_dir",
                config.run_dir,
                "already exists and is not empty",
                f"pick a new run_dir, or {again} it with resume={config.run_dir}",
            )
        return path

    root = os.path.abspath(os.path.expanduser(config.runs_root))
    if os.path.exists(root) and not os.path.isdir(root):
        raise ConfigError("runs_root", config.runs_root, "is a file, not a directory", "pass runs_root=DIR")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = os.path.join(config.runs_root, f"{prefix}{canonical_name(config.env.name)}-{config.algo.name}-{stamp}")
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    return os.path.abspath(path)


def shared_run_dir(config: Config) -> str:
    """Process 0 picks (and checks) the run directory; every process gets it."""
    import numpy as np
    from jax.experimental import multihost_utils

    buffer = np.zeros(4096, np.uint8)
    error = None
    if is_primary():
        try:
            path = new_run_dir(config).encode()
            buffer[: len(path)] = np.frombuffer(path, np.uint8)
        except ConfigError as e:
            error = e
    buffer = np.asarray(multihost_utils.broadcast_one_to_all(buffer))
    if error is not None:
        raise error
    text = bytes(buffer[buffer != 0]).decode()
    if not text:
        raise ConfigError("run_dir", config.run_dir, "process 0 could not create it", "see process 0's message")
    return text


def write_config(path: str, config: Config) -> None:
    import yaml

    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        yaml.safe_dump(to_dict(config), f, sort_keys=False)
    os.replace(tmp, path)


def job_for(config: Config, run_dir: str, resuming: bool) -> Any:
    """The driver job of a train run: one configuration over its seeds, or a
    PBT population (members = seed ids seed … seed+population−1)."""
    import jax
    import numpy as np

    base = hparams_for(config.algo)
    if config.pbt.population:
        seeds = tuple(range(config.seed, config.seed + config.pbt.population))
        key = jax.random.fold_in(jax.random.key(config.pbt.seed), 1)
        hparams = pbt.init_hparams(base, config.pbt, key, len(seeds), algorithm_for(config.algo).pbt_bounds)
        label = "pbt"
    else:
        seeds = seed_ids(config)
        hparams = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (len(seeds),)).copy(), base)
        label = "default"
    return Job(
        config=config,
        seeds=seeds,
        config_index=(0,) * len(seeds),
        labels=(label,),
        hparams=hparams,
        run_dir=run_dir,
        resuming=resuming,
        record_updates=True,
        created=not resuming,
    )


def check_fitness(config: Config, eval_sets: tuple[Any, ...]) -> None:
    """``pbt.fitness`` names a set of ``eval.sets`` of a PBT run."""
    name = config.pbt.fitness
    if not name:
        return
    if not config.pbt.population:
        raise ConfigError("pbt.fitness", name, "ranks a PBT population and none is set", "add pbt.population=16")
    names = [s.name for s in eval_sets]
    if name not in names:
        raise ConfigError(
            "pbt.fitness",
            name,
            f"is not a set of eval.sets (its sets: {', '.join(names) or 'none'})",
            f'add it, e.g. eval.sets="{name}: PARAM=V1,V2", or leave pbt.fitness unset',
        )


def flat_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The one-configuration summary.json of DESIGN.md: the configuration's
    fields at top level."""
    block = dict(summary["configs"][0])
    out = {"env": summary["env"], "algo": summary["algo"], "seeds": block.pop("seeds")}
    block.pop("label", None)
    block.pop("hparams", None)
    out.update({"total_timesteps": summary["total_timesteps"], **block})
    out.update({k: v for k, v in summary.items() if k not in out and k != "configs"})
    return out


def run(config: Config, stop_after_chunks: int | None = None, log=None, stopper: Any = None) -> int:
    """Train ``config`` (validated), writing its run directory. Returns an exit code.

    ``stop_after_chunks`` stops (with a checkpoint, like SIGINT) after that many
    chunks of this invocation — for tests and scripted preemption.
    """

    if config.deterministic:
        platform.request_deterministic()
    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    own = stopper is None
    if own:
        stopper = driver.StopRequest()
        stopper.install()
    try:
        multi = parallel.start_distributed(config)
        resuming = config.resume is not None
        run_dir = config.run_dir if resuming else (shared_run_dir(config) if multi else new_run_dir(config))
        try:
            env = envs.from_config(config)
        except ConfigError:
            raise
        except Exception as error:  # e.g. an env that needs a download
            raise ConfigError(
                "env",
                config.env.name,
                f"could not be built ({error_line(error, 120)})",
                "pick another env from jaxrl.envs.names()",
            ) from None
        check_env_actions(config, env)  # before anything is written
        driver.parse_perturb(config.eval.perturb, env)
        check_fitness(config, parse_sets(config.eval.sets, env))
        job = job_for(config, run_dir, resuming)
        parallel.plan(config, len(job.seeds))  # device layout errors before anything is written
        if not resuming and parallel.is_primary():
            make_dir("run_dir" if config.run_dir else "runs_root", run_dir)
            write_config(os.path.join(run_dir, "config.yaml"), dataclasses.replace(config, run_dir=run_dir))
        outcome = driver.execute(job, env, stop_after_chunks=stop_after_chunks, log=log, stopper=stopper)
        if outcome.summary is None:
            return outcome.code
        summary = flat_summary(outcome.summary)
        driver.write_json(os.path.join(run_dir, "summary.json"), summary)
        records = None
        if config.plots:
            records = JsonlWriter(os.path.join(run_dir, "metrics.jsonl")).read()
            driver.plot_run(run_dir, records, f"{env.name} · {config.algo.name}", env.solved_return)
        finals = [float("nan") if r is None else r for r in summary["final_eval_return"]]
        what = "PBT population" if config.pbt.population else "final deterministic evaluation"
        print(
            stats.robustness_table(
                summary["seeds"],
                finals,
                summary,
                solved_return=env.solved_return,
                title=f"{env.name} · {config.algo.name} · {what} ({config.eval.episodes} episodes per seed)",
            ),
            flush=True,
        )
        if "pbt" in summary:
            print(_pbt_text(summary["pbt"]), flush=True)
        if "heldout" in summary:
            print(driver.heldout_table(summary), flush=True)
        if summary.get("sets"):
            print(driver.sets_table(summary), flush=True)
        log(
            f"compile {summary['compile_time_s']:.1f} s · train {summary['train_time_s']:.1f} s · "
            f"{_count(summary['env_steps_per_s'])} env steps/s · wall {summary['wall_time_s']:.1f} s"
        )
        log(f"run directory: {run_dir}")
        return 0
    finally:
        if own:
            stopper.restore()


def _count(n: float | None) -> str:

    return "?" if n is None else format_count(n)


def _pbt_text(pbt: dict[str, Any]) -> str:
    ranked = pbt.get("fitness", "eval")
    lines = [
        f"PBT: best member {pbt['best_member']} (final {'' if ranked == 'eval' else ranked + ' '}"
        f"return {pbt['best_final_return']}); {pbt['copies']} exploit copies"
        + ("" if ranked == "eval" else f"; ranked on eval set {ranked}")
    ]
    lines.append("  hyperparameters of the best member's lineage, chunk by chunk:")
    names = list(pbt["best_trajectory"][0]["hparams"]) if pbt["best_trajectory"] else []
    extra = "" if ranked == "eval" else f" {ranked[:8]:>8}"
    lines.append("  " + f"{'env steps':>10} {'slot':>4} {'eval':>8}{extra}  " + "  ".join(f"{n:>12}" for n in names))

    def number(value: float | None) -> str:
        return f"{value if value is not None else float('nan'):>8.1f}"

    for row in pbt["best_trajectory"]:
        fitness = "" if ranked == "eval" else " " + number(row.get("fitness"))
        lines.append(
            "  "
            + f"{row['env_steps']:>10} {row['slot']:>4} {number(row['eval_return'])}{fitness}  "
            + "  ".join(f"{row['hparams'][n]:>12.4g}" for n in names)
        )
    return "\n".join(lines)


def cpu_job(config: Config) -> tuple[int, int, bool]:
    """(members, envs per member, runs on one device) for ``platform.size_cpu_pool``."""
    members = config.pbt.population or len(seed_ids(config))
    distributed = config.dist.auto or config.dist.num_processes > 1 or bool(config.dist.coordinator)
    one_device = config.parallel == "seeds" and config.devices <= 1 and not distributed
    return members, config.num_envs, one_device
