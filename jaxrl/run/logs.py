"""Host-side logging: live progress fed from the compiled loop, dashboards
(TensorBoard, W&B). JSON lines are :mod:`jaxrl.run.io`'s.

(Named ``logs`` so it never shadows the standard library's ``logging``.)
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TextIO

import numpy as np

from jaxrl.core.errors import ConfigError, error_line
from jaxrl.run.stats import iqm

__all__ = ["LiveProgress", "format_count", "scalars", "make_writers", "open_dashboards", "flat"]


def format_count(n: float) -> str:
    """``1234567 → '1.23M'``."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def _format_time(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class LiveProgress:
    """Receives progress from the host loop between the pieces of a chunk and
    renders one status line: env steps (the warm-up's included, as in the run's
    header), steps/s, mean/min/max recent episode return across seeds, ETA.

    On a terminal the line is redrawn in place; otherwise a line is printed at
    most every ``interval`` seconds.
    """

    def __init__(
        self,
        total_updates: int,
        steps_per_update: int,
        num_seeds: int,
        start_update: int = 0,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = 5.0,
        warmup_steps: int = 0,
    ):
        self.total_updates = total_updates
        self.warmup_steps = warmup_steps
        self.steps_per_update = steps_per_update
        self.num_seeds = num_seeds
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval = 0.25 if self.tty else interval
        self.last_return = np.full(num_seeds, np.nan)
        self.update = start_update
        self._t_first: float | None = None
        self._u_first = start_update
        self._t_print = 0.0
        self._lock = threading.Lock()
        self._dirty = False

    def __call__(self, progress: Any) -> None:
        with self._lock:
            now = time.perf_counter()
            update = int(np.asarray(progress.update))
            sums = np.asarray(progress.episode_return_sum, np.float64)
            counts = np.asarray(progress.episodes)
            have = counts > 0
            self.last_return[have] = sums[have] / counts[have]
            if self._t_first is None:
                self._t_first, self._u_first = now, update - 1
            self.update = update
            if self.enabled and (now - self._t_print >= self.interval or update >= self.total_updates):
                self._t_print = now
                self._render(now)

    def steps_per_second(self, now: float | None = None) -> float:
        if self._t_first is None:
            return math.nan
        now = time.perf_counter() if now is None else now
        elapsed = now - self._t_first
        done = (self.update - self._u_first) * self.steps_per_update * self.num_seeds
        return done / elapsed if elapsed > 0 else math.nan

    def line(self, now: float | None = None) -> str:
        now = time.perf_counter() if now is None else now
        frac = self.update / max(1, self.total_updates)
        width = 20
        filled = int(round(frac * width))
        bar = "█" * filled + "░" * (width - filled)
        rate = self.steps_per_second(now)
        remaining = (self.total_updates - self.update) * self.steps_per_update * self.num_seeds
        eta = remaining / rate if rate and math.isfinite(rate) and rate > 0 else math.nan
        steps = self.warmup_steps + self.update * self.steps_per_update
        total = self.warmup_steps + self.total_updates * self.steps_per_update
        ret = self.last_return[np.isfinite(self.last_return)]
        ret_text = f"return mean {ret.mean():.1f} min {ret.min():.1f} max {ret.max():.1f}" if ret.size else "return -"
        return (
            f"[{bar}] {frac * 100:3.0f}% | {format_count(steps)}/{format_count(total)} steps/seed"
            f" × {self.num_seeds} | {format_count(rate) if math.isfinite(rate) else '?'} steps/s"
            f" | {ret_text} | ETA {_format_time(eta)}"
        )

    def _render(self, now: float) -> None:
        text = self.line(now)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
            self._dirty = True
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        with self._lock:
            if self.enabled and self.tty and self._dirty:
                self.stream.write("\n")
                self.stream.flush()
                self._dirty = False

    def message(self, text: str) -> None:
        """Print a line without mangling the live status line."""
        with self._lock:
            if self.tty and self._dirty:
                self.stream.write("\r\x1b[2K")
            self.stream.write(text + "\n")
            if self.tty and self._dirty:
                self.stream.write(self.line())
            self.stream.flush()


# ---------------------------------------------------------------------------
# Dashboards: TensorBoard and Weights & Biases (optional extras)
# ---------------------------------------------------------------------------

LOGGERS = ("jsonl", "tensorboard", "wandb", "tensorboard+wandb")
EPISODE_SCALARS = ("episode_return", "episode_length")  # training episodes (every algorithm)
EVAL_SCALARS = ("eval_return", "eval_length")


def _iqm(values: list[float]) -> float | None:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return None

    return iqm(finite)


def scalars(record: dict[str, Any], members: list[str], metrics: tuple[str, ...] = ()) -> dict[str, float]:
    """Dashboard scalars of one metrics record: one curve per member plus the
    across-member IQM of the returns (non-finite values are left out).

    ``metrics`` are the algorithm's declared per-update metrics
    (:attr:`jaxrl.algos.Algorithm.metrics`): under ``train/`` from update
    records, and from eval records where those carry a chunk's means (sweeps'
    strided records)."""
    out: dict[str, float] = {}
    prefix = "train" if record["type"] == "update" else "eval"
    if record["type"] == "update":
        names = (*EPISODE_SCALARS, *metrics)
    else:
        names = (*EVAL_SCALARS, *EPISODE_SCALARS, *(m for m in metrics if m in record))
    for name in names:
        values = record.get(name)
        if values is None:
            continue
        values = [None if v is None else float(v) for v in np.asarray(values, dtype=object).tolist()]
        tag = name.removeprefix("eval_") if prefix == "eval" and name.startswith("eval_") else name
        group = "train" if prefix == "eval" and not name.startswith("eval_") else prefix
        for member, v in zip(members, values, strict=True):
            if v is not None and math.isfinite(v):
                out[f"{group}/{tag}/{member}"] = v
        if name in ("episode_return", "eval_return"):
            value = _iqm(values)
            if value is not None:
                out[f"{group}/{tag}_iqm"] = value
    pipeline = record.get("pipeline")  # host-env runs: the actor–learner pipeline's figures of the update
    if isinstance(pipeline, dict):
        for name, v in pipeline.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                out[f"pipeline/{name}"] = float(v)
        busy = sum(pipeline.get(k, 0.0) for k in ("actor_env_s", "actor_infer_s", "actor_copy_s"))
        if pipeline.get("learn_s"):
            out["pipeline/rollout_over_learn"] = (
                busy / pipeline["learn_s"]
            )  # > 1.25: rollout-bound; < 0.8: learner-bound
    for name, values in (record.get("eval_sets") or {}).items():  # eval.sets: one curve per set and member
        values = [None if v is None else float(v) for v in np.asarray(values, dtype=object).tolist()]
        for member, v in zip(members, values, strict=True):
            if v is not None and math.isfinite(v):
                out[f"eval_sets/{name}/{member}"] = v
        value = _iqm(values)
        if value is not None:
            out[f"eval_sets/{name}_iqm"] = value
    return out


class TensorBoardWriter:
    """``<run_dir>/tensorboard``: one scalar curve per member and tag, IQM curves,
    the config as text (tensorboardX)."""

    def __init__(
        self,
        run_dir: str,
        members: list[str],
        config_text: str,
        purge_step: int | None = None,
        metrics: tuple[str, ...] = (),
    ):
        from tensorboardX import SummaryWriter

        self.members = members
        self.metrics = metrics
        # on resume, ``purge_step`` is the env steps of the last record kept: TensorBoard
        # hides the events from the given step on, so the kept record's step stays shown
        self.writer = SummaryWriter(
            os.path.join(run_dir, "tensorboard"), purge_step=None if purge_step is None else purge_step + 1
        )
        if not purge_step:
            self.writer.add_text("config", "```\n" + config_text + "\n```", 0)

    def write(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            for tag, value in scalars(record, self.members, self.metrics).items():
                self.writer.add_scalar(tag, value, record["env_steps"])
        self.writer.flush()

    def finish(self, hparams: dict[str, Any], results: dict[str, float]) -> None:
        clean = {k: v for k, v in hparams.items() if isinstance(v, (int, float, str, bool))}
        self.writer.add_hparams(clean, {f"final/{k}": v for k, v in results.items() if v is not None}, name="hparams")

    def close(self) -> None:
        self.writer.close()


class WandbWriter:
    """Weights & Biases run in ``<run_dir>/wandb`` (``WANDB_MODE=offline`` needs
    no network); resumes the same W&B run after ``resume=``."""

    def __init__(
        self, run_dir: str, members: list[str], config: dict[str, Any], project: str, metrics: tuple[str, ...] = ()
    ):
        import wandb

        self.metrics = metrics
        id_path = os.path.join(run_dir, "wandb_id.txt")
        run_id = open(id_path).read().strip() if os.path.exists(id_path) else uuid.uuid4().hex[:12]
        with open(id_path, "w") as f:
            f.write(run_id)
        self.members = members
        self.run = wandb.init(
            project=project,
            name=os.path.basename(os.path.normpath(run_dir)),
            id=run_id,
            resume="allow",
            dir=run_dir,
            config=config,
            reinit=True,
        )

    def write(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            values = scalars(record, self.members, self.metrics)
            if values:
                self.run.log(values, step=int(record["env_steps"]))

    def finish(self, hparams: dict[str, Any], results: dict[str, float]) -> None:
        self.run.summary.update({f"final/{k}": v for k, v in results.items() if v is not None})

    def close(self) -> None:
        self.run.finish()


def make_writers(
    logger: str,
    run_dir: str,
    members: list[str],
    config: dict[str, Any],
    project: str,
    purge_step: int | None,
    metrics: tuple[str, ...] = (),
) -> list[Any]:
    """The dashboard writers ``logger`` asks for (JSON lines are always
    written); ``metrics``: the algorithm's declared per-update metrics."""
    import yaml

    writers: list[Any] = []
    if "tensorboard" in logger:
        text = yaml.safe_dump(config, sort_keys=False)
        writers.append(TensorBoardWriter(run_dir, members, text, purge_step, metrics))
    if "wandb" in logger:
        writers.append(WandbWriter(run_dir, members, config, project, metrics))
    return writers


def open_dashboards(
    logger: str,
    project: str,
    config: dict[str, Any],
    run_dir: str,
    members: list[str],
    start_env_steps: int,
    metrics: tuple[str, ...],
    on_failure: Callable[[], None],
) -> list[Any]:
    """The dashboard writers ``logger`` asks for (none for ``jsonl``): one curve per
    member and declared metric, continuing after ``start_env_steps``; ``config``
    the run's settings as a dict. One that cannot start is a setup problem:
    ``on_failure()`` cleans up, then a one-line ConfigError."""
    if logger == "jsonl":
        return []
    try:
        return make_writers(logger, run_dir, members, config, project, start_env_steps or None, metrics=metrics)
    except Exception as error:
        on_failure()
        raise ConfigError(
            "logger", logger, f"could not start ({error_line(error)})", "check the logger's setup, or pass logger=jsonl"
        ) from None


def flat(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"algo": {"lr": 1}} → {"algo.lr": 1}``."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v if not isinstance(v, (list, tuple)) else str(list(v))
    return out
