"""Comparisons of finished runs and sweeps behind ``python -m jaxrl.report``:
:func:`load` run/sweep directories into :class:`Entry` rows, :func:`build` the
statistics (IQM, mean, median, optimality gap with stratified-bootstrap CIs,
probability of improvement, solved fraction), :func:`write` report.md/csv/json
and the plots.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jaxrl.core.errors import ConfigError, make_dir
from jaxrl.run import stats
from jaxrl.run.io import write_json
from jaxrl.run.records import EvalRecord
from jaxrl.run.records import read as read_records
from jaxrl.run.stats import iqm_band, performance_profile, thin

__all__ = ["Entry", "build", "load", "markdown", "plot", "write"]


@dataclass
class Entry:
    """One configuration's runs."""

    label: str
    env: str
    algo: str
    seeds: list[int]
    finals: list[float | None]  # final deterministic eval return per seed (None: failed)
    steps: np.ndarray  # [P] env steps of the evaluation points
    curves: np.ndarray  # [S, P] eval return per seed and point
    solved: float | None
    source: str
    hparams: dict[str, float] = field(default_factory=dict)

    @property
    def scores(self) -> np.ndarray:
        return np.asarray([v for v in self.finals if v is not None], np.float64)


def _read_json(path: str) -> Any:
    with open(path) as f:
        return json.load(f)


def _eval_curves(run_dir: str, eval_set: str | None = None) -> tuple[np.ndarray, np.ndarray, list[float | None]]:
    """``(env_steps [P], curves [S, P], final value per seed)`` of the run's
    evaluation, or of its evaluation set ``eval_set`` (``eval.sets``)."""
    evals = [r for r in read_records(os.path.join(run_dir, "metrics.jsonl")) if isinstance(r, EvalRecord)]
    if eval_set is None:
        values = [r.eval_return for r in evals]
    else:
        tracked = list(evals[-1].eval_sets or {}) if evals else []
        if eval_set not in tracked:
            raise ConfigError(
                "set",
                eval_set,
                f"{run_dir} did not track it (its eval.sets: {', '.join(tracked) or 'none'})",
                "pass one of those, or train with eval.sets=…",
            )
        values = [r.eval_sets[eval_set] for r in evals]
    steps = np.asarray([r.env_steps for r in evals])
    curves = np.asarray([[np.nan if v is None else v for v in row] for row in values], np.float64).T
    finals = [None if v is None else float(v) for v in values[-1]] if values else []
    return steps, curves, finals


def _entries_of_run(run_dir: str, prefix: str = "", eval_set: str | None = None) -> list[Entry]:
    summary = _read_json(os.path.join(run_dir, "summary.json"))
    steps, curves, set_finals = _eval_curves(run_dir, eval_set)
    name = os.path.basename(os.path.normpath(run_dir))
    if "configs" not in summary:  # a train run: one configuration
        return [
            Entry(
                label=prefix or name,
                env=summary["env"],
                algo=summary["algo"],
                seeds=list(summary["seeds"]),
                finals=list(summary["final_eval_return"]) if eval_set is None else _alive(set_finals, summary),
                steps=steps,
                curves=curves,
                solved=summary.get("solved_threshold"),
                source=run_dir,
            )
        ]
    out, start = [], 0
    for block in summary["configs"]:
        n = len(block["seeds"])
        out.append(
            Entry(
                label=(prefix + " " if prefix else "") + block["label"],
                env=summary["env"],
                algo=summary["algo"],
                seeds=list(block["seeds"]),
                finals=list(block["final_eval_return"])
                if eval_set is None
                else _alive(set_finals[start : start + n], block),
                steps=steps,
                curves=curves[start : start + n],
                solved=summary.get("solved_threshold"),
                source=run_dir,
                hparams=block.get("hparams", {}),
            )
        )
        start += n
    return out


def _alive(values: list[float | None], block: dict[str, Any]) -> list[float | None]:
    """A set's final values with failed seeds (None in the summary) left out as None."""
    return [None if f is None else v for v, f in zip(values, block["final_eval_return"], strict=True)]


def load(path: str, eval_set: str | None = None) -> list[Entry]:
    """Entries of a run directory, a sweep group directory or a sweep directory
    (``eval_set``: scored on that evaluation set instead of the run's own
    evaluation)."""
    if not os.path.isdir(path):
        raise ConfigError("run_dir", path, "does not exist", "pass a directory printed by jaxrl.train or jaxrl.sweep")
    try:
        if os.path.isfile(os.path.join(path, "sweep.json")):
            sweep = _read_json(os.path.join(path, "sweep.json"))
            entries: list[Entry] = []
            for group in sweep["groups"]:
                group_dir = os.path.join(path, group["dir"])
                if not os.path.isfile(os.path.join(group_dir, "summary.json")):
                    raise ConfigError(
                        "run_dir",
                        path,
                        f"sweep group {group['dir']} has not finished",
                        f"finish it: python -m jaxrl.sweep resume={path}",
                    )
                entries += _entries_of_run(group_dir, eval_set=eval_set)
            return entries
        if os.path.isfile(os.path.join(path, "summary.json")):
            return _entries_of_run(path, eval_set=eval_set)
    except ConfigError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as error:
        raise ConfigError(
            "run_dir",
            path,
            f"holds unreadable results ({type(error).__name__}: {error})",
            "re-run it or remove it from the list",
        ) from None
    raise ConfigError(
        "run_dir",
        path,
        "has no summary.json (unfinished or not a run)",
        f"finish it with resume={path}, or pass a finished run",
    )


def _stats(entry: Entry, target: float | None) -> dict[str, Any]:

    x = entry.scores
    row: dict[str, Any] = {
        "label": entry.label,
        "env": entry.env,
        "algo": entry.algo,
        "runs": len(entry.finals),
        "failed": len(entry.finals) - x.size,
    }
    if x.size == 0:
        return row
    for name, fn in (("iqm", stats.iqm), ("mean", np.mean), ("median", np.median)):
        row[name] = float(fn(x))
        row[f"{name}_ci95"] = list(stats.stratified_bootstrap_ci([x], fn))
    if target is not None:
        gap = lambda s: stats.optimality_gap(s, target)  # noqa: E731
        row["optimality_gap"] = gap(x)
        row["optimality_gap_ci95"] = list(stats.stratified_bootstrap_ci([x], gap))
    if entry.solved is not None:
        row["solved_fraction"] = float(np.sum(x >= entry.solved)) / len(entry.finals)
    row["hparams"] = entry.hparams
    row["source"] = entry.source
    return row


def build(entries: list[Entry], target: float | None = None, compare: int = 3) -> dict[str, Any]:
    """Statistics per entry (sorted by IQM, best first) and the probability of
    improvement of the best over the next ``compare`` entries."""

    if target is None:
        targets = {e.solved for e in entries}
        target = targets.pop() if len(targets) == 1 else None
    rows = sorted((_stats(e, target) for e in entries), key=lambda r: -r.get("iqm", -np.inf))
    by_label = {e.label: e for e in entries}
    comparisons = []
    if rows and "iqm" in rows[0]:
        best = by_label[rows[0]["label"]]
        for row in rows[1 : 1 + compare]:
            other = by_label[row["label"]]
            if other.scores.size == 0:
                continue
            comparisons.append(
                {
                    "x": best.label,
                    "y": other.label,
                    "p": stats.probability_of_improvement(best.scores, other.scores),
                    "ci95": list(stats.probability_of_improvement_ci(best.scores, other.scores)),
                }
            )
    return {"target": target, "rows": rows, "probability_of_improvement": comparisons}


def _fmt(row: dict[str, Any], name: str) -> str:
    if name not in row:
        return "–"
    lo, hi = row[f"{name}_ci95"]
    return f"{row[name]:.1f} [{lo:.1f}, {hi:.1f}]"


def markdown(report: dict[str, Any]) -> str:
    rows = report["rows"]
    scored = report.get("eval_set")
    gap = report["target"] is not None
    head = "| # | configuration | env | IQM [95% CI] | mean [95% CI] | median [95% CI] |"
    sep = "|---|---|---|---|---|---|"
    if gap:
        head += f" optimality gap (target {report['target']:g}) |"
        sep += "---|"
    head += " solved | runs |"
    sep += "---|---|"
    lines = (
        [f"Scored on evaluation set `{scored}` (eval.sets), final policies.", "", head, sep] if scored else [head, sep]
    )
    for i, r in enumerate(rows, 1):
        solved = f"{r['solved_fraction'] * 100:.0f}%" if r.get("solved_fraction") is not None else "–"
        runs = f"{r['runs']}" + (f" ({r['failed']} failed)" if r["failed"] else "")
        line = f"| {i} | {r['label']} | {r['env']} | {_fmt(r, 'iqm')} | {_fmt(r, 'mean')} | {_fmt(r, 'median')} |"
        if gap:
            line += f" {_fmt(r, 'optimality_gap')} |"
        lines.append(line + f" {solved} | {runs} |")
    if report["probability_of_improvement"]:
        lines.append("")
        lines.append("Probability of improvement (a random run of X beats one of Y):")
        lines.append("")
        lines.append("| X | Y | P(X > Y) [95% CI] |")
        lines.append("|---|---|---|")
        for c in report["probability_of_improvement"]:
            lines.append(f"| {c['x']} | {c['y']} | {c['p']:.2f} [{c['ci95'][0]:.2f}, {c['ci95'][1]:.2f}] |")
    return "\n".join(lines)


def plot(entries: list[Entry], report: dict[str, Any], out_dir: str, max_lines: int = 10) -> list[str]:
    """curves.png (per-configuration IQM ± CI), final_returns.png, profiles.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = [r["label"] for r in report["rows"]]
    by_label = {e.label: e for e in entries}
    shown = [by_label[label] for label in order[:max_lines]]
    paths = []

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, e in enumerate(shown):
        steps, curves = thin(e.steps, e.curves)
        mid, lo, hi = iqm_band(curves)
        color = plt.cm.tab10(i % 10)
        ax.plot(steps, mid, color=color, linewidth=2, label=e.label)
        ax.fill_between(steps, lo, hi, color=color, alpha=0.2, linewidth=0)
    if report["target"] is not None:
        ax.axhline(report["target"], color="gray", linestyle="--", linewidth=1)
    ax.set_xlabel("env steps per run")
    ax.set_ylabel("deterministic eval return (IQM, 95% CI)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    paths.append(os.path.join(out_dir, "curves.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(order) + 2), 5))
    data = [by_label[label].scores for label in order]
    ax.boxplot([d if d.size else [np.nan] for d in data], showfliers=False)
    rng = np.random.default_rng(0)
    for i, d in enumerate(data, 1):
        ax.scatter(i + rng.uniform(-0.15, 0.15, d.size), d, s=8, alpha=0.6, color="tab:blue")
    ax.set_xticks(range(1, len(order) + 1), order, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("final deterministic eval return")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    paths.append(os.path.join(out_dir, "final_returns.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    pooled = np.concatenate([e.scores for e in entries if e.scores.size]) if entries else np.zeros(0)
    if profile_note(entries) is not None:
        return paths
    fig, ax = plt.subplots(figsize=(8, 5))
    taus = np.linspace(pooled.min(), pooled.max(), 200)
    for i, e in enumerate(shown):
        ax.plot(taus, performance_profile(e.scores, taus), color=plt.cm.tab10(i % 10), label=e.label)
    ax.set_xlabel("return threshold τ")
    ax.set_ylabel("fraction of runs with return > τ")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    paths.append(os.path.join(out_dir, "profiles.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


def profile_note(entries: list[Entry]) -> str | None:
    """Why there is no performance profile (every run scored the same), or ``None``."""
    scores = [e.scores for e in entries if e.scores.size]
    pooled = np.concatenate(scores) if scores else np.zeros(0)
    if pooled.size and np.ptp(pooled) > 0:
        return None
    if not pooled.size:
        return "No performance profile: no run has a final score."
    return (
        f"No performance profile: all {pooled.size} runs scored {pooled[0]:g} "
        "(a profile compares how scores spread; here they do not)."
    )


def write(entries: list[Entry], report: dict[str, Any], out_dir: str, plots: bool = True) -> str:
    """Write report.md/.csv/.json (and plots) to ``out_dir``; return the Markdown."""
    make_dir("out", out_dir, "pass out=DIR in a writable directory")
    text = markdown(report)
    note = profile_note(entries) if plots else None
    if note:
        text += "\n\n" + note
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("# jaxrl report\n\n" + text + "\n")
    columns = [
        "rank",
        "label",
        "env",
        "algo",
        "runs",
        "failed",
        "iqm",
        "iqm_lo",
        "iqm_hi",
        "mean",
        "mean_lo",
        "mean_hi",
        "median",
        "median_lo",
        "median_hi",
        "optimality_gap",
        "optimality_gap_lo",
        "optimality_gap_hi",
        "solved_fraction",
    ]
    with open(os.path.join(out_dir, "report.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        for i, r in enumerate(report["rows"], 1):
            values = {"rank": i, **{k: r.get(k) for k in ("label", "env", "algo", "runs", "failed", "solved_fraction")}}
            for name in ("iqm", "mean", "median", "optimality_gap"):
                values[name] = r.get(name)
                lo, hi = r.get(f"{name}_ci95", (None, None))
                values[f"{name}_lo"], values[f"{name}_hi"] = lo, hi
            writer.writerow([values.get(c) for c in columns])
    write_json(os.path.join(out_dir, "report.json"), report)
    if plots:
        plot(entries, report, out_dir)
    return text
