"""Where a sweep's jobs run: ``launcher=local`` (this process, one group after
another), ``submitit_local`` / ``submitit_slurm`` (one submitit job per group)
or ``ray`` (one Ray task per group).

Every job is the command a user would type to run that group by hand,
``python -m jaxrl.sweep resume=SWEEP_DIR groups=G launcher=local``: it reads the
sweep from ``sweep.json``, vmaps its members in one program and writes
``group-G/summary.json`` into the one sweep directory (shared storage when the
jobs run on other machines). The launching process waits for every job, names
the failed ones with their logs, and writes the report when all are done.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
import os
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jaxrl.core.errors import ConfigError, error_line, install_command

__all__ = ["ENGINES", "Failure", "LauncherConfig", "job_command", "launch", "parse", "run_group", "split"]

ENGINES = ("local", "submitit_local", "submitit_slurm", "ray")


@dataclass(frozen=True)
class LauncherConfig:
    """``python -m jaxrl.sweep … launcher=NAME launcher.KEY=VALUE``: the engine
    that runs the sweep's groups (``hydra/launcher=NAME`` and
    ``hydra.launcher.KEY=VALUE`` are accepted as the same keys)."""

    name: str = "local"  # local (this process) | submitit_local | submitit_slurm | ray
    parallel: int = 0  # jobs running at once; 0: every job at once (local: always one)
    timeout_min: int = 60  # submitit: each job's time limit in minutes
    cpus_per_job: int = 0  # CPU cores per job; 0: submitit's default, 1 Ray CPU
    gpus_per_job: int = 0  # GPUs per job (submitit gpus_per_node, Ray num_gpus)
    mem_gb: int = 0  # submitit: memory per job in GB; 0: the cluster's default
    partition: str = ""  # submitit_slurm: the SLURM partition
    account: str = ""  # submitit_slurm: the SLURM account
    qos: str = ""  # submitit_slurm: the SLURM quality of service
    constraint: str = ""  # submitit_slurm: a SLURM node constraint, e.g. "a100"
    slurm_args: str = ""  # submitit_slurm: more sbatch options, e.g. "exclusive=true gres=gpu:1"
    setup: str = ""  # submitit_slurm: shell lines run before each job, separated by ';' (module load …; source …)
    folder: str = ""  # submitit: where job files and logs go; "": SWEEP_DIR/jobs
    address: str = ""  # ray: "" starts a local Ray cluster for the sweep; "auto" or "ray://HOST:PORT" joins one
    python: str = ""  # the Python each job runs; "": the launching interpreter (sys.executable)


FIELDS = {f.name: f for f in dataclasses.fields(LauncherConfig)}
# what an engine needs installed: (module, extra)
NEEDS = {"submitit_local": ("submitit", "submitit"), "submitit_slurm": ("submitit", "submitit"), "ray": ("ray", "ray")}
SLURM_ONLY = ("partition", "account", "qos", "constraint", "slurm_args", "setup")


def split(argv: list[str]) -> tuple[list[str], list[str], list[int] | None]:
    """``argv`` → (the sweep's own overrides, the launcher's ``KEY=VALUE``
    overrides with the ``launcher.`` prefix dropped, the ``groups=`` selection)."""
    rest: list[str] = []
    launcher: list[str] = []
    groups: list[int] | None = None
    for item in argv:
        key, sep, value = item.partition("=")
        if not sep:
            rest.append(item)
        elif key in ("launcher", "hydra/launcher"):
            launcher.append(f"name={value}")
        elif key.startswith(("launcher.", "hydra.launcher.")):
            launcher.append(f"{key.split('launcher.', 1)[1]}={value}")
        elif key == "groups":
            try:
                groups = sorted({int(v) for v in value.strip("[]").split(",") if v.strip()})
            except ValueError:
                raise ConfigError("groups", value, "must be group numbers", "pass e.g. groups=0,3") from None
            if not groups or min(groups) < 0:
                raise ConfigError("groups", value, "must be group numbers ≥ 0", "pass e.g. groups=0,3")
        else:
            rest.append(item)
    return rest, launcher, groups


def parse(overrides: list[str]) -> LauncherConfig:
    """``["name=ray", "parallel=4", …]`` → a checked :class:`LauncherConfig`."""
    values: dict[str, Any] = {}
    for item in overrides:
        key, _, text = item.partition("=")
        if key not in FIELDS:
            close = difflib.get_close_matches(key, list(FIELDS), n=2, cutoff=0.5)
            raise ConfigError(
                f"launcher.{key}",
                text,
                "unknown launcher key",
                f"did you mean launcher.{' or launcher.'.join(close)}?"
                if close
                else "see the launcher keys: python -m jaxrl.sweep --help",
            )
        if FIELDS[key].type in ("int", int):
            try:
                number = int(text)
            except ValueError:
                raise ConfigError(f"launcher.{key}", text, "must be an integer", f"pass launcher.{key}=1") from None
            if number < 0:
                raise ConfigError(f"launcher.{key}", text, "must be ≥ 0", f"pass launcher.{key}=0")
            values[key] = number
        else:
            values[key] = text
    config = LauncherConfig(**values)
    if config.name not in ENGINES:
        close = difflib.get_close_matches(config.name, ENGINES, n=1, cutoff=0.4)
        raise ConfigError(
            "launcher",
            config.name,
            f"must be one of {' | '.join(ENGINES)}",
            f"did you mean launcher={close[0]}?" if close else "pass launcher=submitit_slurm, or launcher=ray",
        )
    if config.name != "submitit_slurm":
        for key in SLURM_ONLY:
            if getattr(config, key):
                raise ConfigError(
                    f"launcher.{key}", getattr(config, key), f"is a SLURM setting; launcher={config.name}", "drop it"
                )
    if config.address and config.name != "ray":
        raise ConfigError("launcher.address", config.address, f"is a Ray setting; launcher={config.name}", "drop it")
    if config.timeout_min < 1:
        raise ConfigError("launcher.timeout_min", config.timeout_min, "must be ≥ 1 minute", "pass e.g. 60")
    if config.name in NEEDS and importlib.util.find_spec(NEEDS[config.name][0]) is None:
        module, extra = NEEDS[config.name]
        raise ConfigError("launcher", config.name, f"needs {module}, which is not installed", install_command(extra))
    return config


def overrides_of(config: LauncherConfig) -> list[str]:
    """The ``KEY=VALUE`` overrides that rebuild ``config`` (defaults left out)."""
    default = LauncherConfig()
    return [f"{k}={getattr(config, k)}" for k in FIELDS if getattr(config, k) != getattr(default, k)]


def job_command(sweep_dir: str, group: int, python: str = "") -> list[str]:
    """One job: the command that runs group ``group`` of the sweep in ``sweep_dir``."""
    return [python or sys.executable, "-m", "jaxrl.sweep", f"resume={sweep_dir}", f"groups={group}", "launcher=local"]


def log_path(sweep_dir: str, group: int) -> str:
    return os.path.join(sweep_dir, "jobs", f"group-{group}.log")


def run_group(sweep_dir: str, group: int, python: str = "") -> str:
    """The body of one job, on whichever machine runs it: :func:`job_command`
    as a subprocess, its output in ``SWEEP_DIR/jobs/group-G.log``. Returns the
    group's ``summary.json`` path; raises ``RuntimeError`` with the job's last
    error line when the command fails."""
    path = log_path(sweep_dir, group)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as log:
        log.write(" ".join(job_command(sweep_dir, group, python)) + "\n")
        log.flush()
        code = subprocess.call(job_command(sweep_dir, group, python), stdout=log, stderr=subprocess.STDOUT)
    summary = os.path.join(sweep_dir, f"group-{group}", "summary.json")
    if code != 0 or not os.path.isfile(summary):
        with open(path, errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
        errors = [line for line in lines if line.startswith("error:")]
        reason = (errors or lines or ["no output"])[-1][:300]
        raise RuntimeError(f"exit {code}: {reason}")
    return summary


@dataclass(frozen=True)
class Failure:
    """A job that did not finish its group."""

    group: int
    reason: str
    log: str


class _Submitit:
    """One submitit job per group (``cluster="local"``: subprocesses of this
    machine; ``"slurm"``: sbatch jobs)."""

    def __init__(self, config: LauncherConfig, sweep_dir: str) -> None:
        import submitit

        self.config, self.sweep_dir = config, sweep_dir
        folder = config.folder or os.path.join(sweep_dir, "jobs", "submitit")
        cluster = "local" if config.name == "submitit_local" else "slurm"
        self.executor = submitit.AutoExecutor(folder=os.path.join(folder, "%j"), cluster=cluster)
        params: dict[str, Any] = {
            "name": f"jaxrl-{os.path.basename(sweep_dir)}",
            "timeout_min": config.timeout_min,
            "nodes": 1,
            "tasks_per_node": 1,
        }
        if config.cpus_per_job:
            params["cpus_per_task"] = config.cpus_per_job
        if config.gpus_per_job:
            params["gpus_per_node"] = config.gpus_per_job
        if config.mem_gb:
            params["mem_gb"] = config.mem_gb
        for key in ("partition", "account", "qos", "constraint"):
            if getattr(config, key):
                params[f"slurm_{key}"] = getattr(config, key)
        if config.slurm_args:
            extra = {}
            for item in config.slurm_args.split():
                key, sep, value = item.partition("=")
                extra[key] = value if sep else True
            params["slurm_additional_parameters"] = extra
        if config.setup:
            params["slurm_setup"] = [line.strip() for line in config.setup.split(";") if line.strip()]
        self.executor.update_parameters(**params)

    def submit(self, group: int) -> Any:
        return self.executor.submit(run_group, self.sweep_dir, group, self.config.python)

    def name(self, handle: Any) -> str:
        return f"{self.config.name} job {handle.job_id}"

    def done(self, handle: Any) -> bool:
        return handle.done()

    def error(self, handle: Any) -> str | None:
        try:
            handle.result()
        except Exception as error:  # submitit wraps the job's exception with its traceback
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            mine = [line for line in lines if line.startswith("RuntimeError: exit")]
            return (mine[-1].removeprefix("RuntimeError: ") if mine else error_line(error, 300)) or "failed"
        return None

    def cancel(self, handle: Any) -> None:
        handle.cancel(check=False)

    def close(self) -> None:
        pass


class _Ray:
    """One Ray task per group, in a fresh worker process (``max_calls=1``),
    with ``cpus_per_job`` CPUs and ``gpus_per_job`` GPUs reserved."""

    def __init__(self, config: LauncherConfig, sweep_dir: str) -> None:
        import ray

        self.ray, self.config, self.sweep_dir, self.started = ray, config, sweep_dir, False
        if not ray.is_initialized():
            if config.address:
                ray.init(address=config.address, log_to_driver=False)
            else:
                ray.init(include_dashboard=False, log_to_driver=False)
                self.started = True
        self.task = ray.remote(
            num_cpus=config.cpus_per_job or 1, num_gpus=config.gpus_per_job, max_calls=1, max_retries=0
        )(run_group)

    def submit(self, group: int) -> Any:
        return self.task.remote(self.sweep_dir, group, self.config.python)

    def name(self, handle: Any) -> str:
        return f"ray task {handle.task_id().hex()[:12]}"

    def done(self, handle: Any) -> bool:
        ready, _ = self.ray.wait([handle], timeout=0)
        return bool(ready)

    def error(self, handle: Any) -> str | None:
        try:
            self.ray.get(handle)
        except Exception as error:
            cause = getattr(error, "cause", None) or error
            return error_line(cause, 300)
        return None

    def cancel(self, handle: Any) -> None:
        self.ray.cancel(handle, force=True)

    def close(self) -> None:
        if self.started:
            self.ray.shutdown()


ENGINE_CLASSES: dict[str, Callable[[LauncherConfig, str], Any]] = {
    "submitit_local": _Submitit,
    "submitit_slurm": _Submitit,
    "ray": _Ray,
}


def launch(
    config: LauncherConfig,
    sweep_dir: str,
    groups: list[int],
    log: Callable[[str], None],
    stopper: Any = None,
    poll_s: float = 0.5,
) -> list[Failure]:
    """Run ``groups`` of the sweep in ``sweep_dir`` as jobs of ``config.name``
    (at most ``config.parallel`` at once), wait for them all and return the
    ones that failed. A stop request (Ctrl-C, SIGTERM) cancels the running jobs."""
    with warnings.catch_warnings():  # jax's fork warning: the engines fork only to exec a new program
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        return _launch(ENGINE_CLASSES[config.name](config, sweep_dir), config, sweep_dir, groups, log, stopper, poll_s)


def _launch(engine: Any, config, sweep_dir, groups, log, stopper, poll_s) -> list[Failure]:
    queue, running, failures = list(groups), {}, []
    limit = config.parallel or len(queue)
    try:
        while queue or running:
            while queue and len(running) < limit:
                group = queue.pop(0)
                running[group] = engine.submit(group)
                log(f"group {group}: {engine.name(running[group])}, log {log_path(sweep_dir, group)}")
            for group, handle in list(running.items()):
                if not engine.done(handle):
                    continue
                del running[group]
                reason = engine.error(handle)
                if reason is None:
                    log(f"group {group}: done")
                else:
                    failures.append(Failure(group, reason, log_path(sweep_dir, group)))
                    log(f"group {group}: failed ({reason})")
            if stopper is not None and stopper.signum is not None:
                for handle in running.values():
                    engine.cancel(handle)
                failures += [Failure(g, "cancelled", log_path(sweep_dir, g)) for g in [*running, *queue]]
                return failures
            if running:
                time.sleep(poll_s)
    finally:
        engine.close()
    return failures
