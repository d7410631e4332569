"""Across-seed statistics, the robustness table and learning-curve plots.

Interquartile mean and percentile-bootstrap confidence intervals follow
Agarwal et al. (2021), "Deep RL at the Edge of the Statistical Precipice",
arXiv:2108.13264.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "iqm",
    "bootstrap_ci",
    "stratified_bootstrap_ci",
    "paired_difference",
    "optimality_gap",
    "probability_of_improvement",
    "performance_profile",
    "summarize",
    "robustness_table",
    "plot_curves",
]


def iqm(x: Sequence[float] | np.ndarray) -> float:
    """Interquartile mean: the mean of the middle 50% (25% trimmed each side)."""
    from scipy import stats

    x = np.asarray(x, np.float64).ravel()
    return float(stats.trim_mean(x, 0.25))


def _along(statistic: Any) -> Any:
    """``statistic`` of every row at once (``[resamples, n] -> [resamples]``):
    the IQM and numpy's reductions take an axis, anything else runs per row."""
    from scipy import stats

    if statistic is iqm:
        return lambda s, axis=-1: stats.trim_mean(s, 0.25, axis=axis)
    if statistic in (np.mean, np.median):
        return lambda s, axis=-1: statistic(s, axis=axis)
    return lambda s, axis=-1: np.apply_along_axis(statistic, axis, s)


def bootstrap_ci(
    x: Sequence[float] | np.ndarray,
    statistic: Any = iqm,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap CI of ``statistic`` over seeds (deterministic: fixed ``seed``).

    A single value or identical values give a zero-width interval.
    """
    from scipy import stats

    x = np.asarray(x, np.float64).ravel()
    if x.size == 0:
        return (math.nan, math.nan)
    if x.size == 1 or np.all(x == x[0]):
        value = float(statistic(x))
        return (value, value)
    result = stats.bootstrap(
        (x,),
        _along(statistic),
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def stratified_bootstrap_ci(
    strata: Sequence[Sequence[float]],
    statistic: Any = iqm,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile CI of ``statistic`` over the pooled scores, resampling runs
    with replacement *within* each stratum (task) so every task keeps its
    number of runs (Agarwal et al., 2021). One stratum is the plain bootstrap."""
    strata = [np.asarray(s, np.float64).ravel() for s in strata if len(s)]
    if not strata:
        return (math.nan, math.nan)
    pooled = np.concatenate(strata)
    if pooled.size == 1 or np.all(pooled == pooled[0]):
        value = float(statistic(pooled))
        return (value, value)
    rng = np.random.default_rng(seed)
    resampled = np.concatenate([s[rng.integers(0, s.size, size=(n_resamples, s.size))] for s in strata], axis=1)
    values = _along(statistic)(resampled, axis=1)
    alpha = (1.0 - confidence) / 2.0
    return (float(np.quantile(values, alpha)), float(np.quantile(values, 1.0 - alpha)))


def paired_difference(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """``{"gap": IQM(x) − IQM(y), "ci95": [lo, hi]}`` for paired samples (the
    same seeds measured twice, e.g. a held-out set and the training
    distribution): a percentile bootstrap that resamples seeds, keeping each
    seed's two values together (deterministic: fixed ``seed``)."""
    from scipy import stats

    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    if x.shape != y.shape:
        raise ValueError(f"paired samples need equal sizes (got {x.size} and {y.size})")
    gap = iqm(x) - iqm(y)
    if x.size < 2 or (np.all(x == x[0]) and np.all(y == y[0])):
        return {"gap": gap, "ci95": [gap, gap]}

    def statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return stats.trim_mean(a, 0.25, axis=axis) - stats.trim_mean(b, 0.25, axis=axis)

    result = stats.bootstrap(
        (x, y),
        statistic,
        paired=True,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return {"gap": gap, "ci95": [float(result.confidence_interval.low), float(result.confidence_interval.high)]}


def optimality_gap(x: Sequence[float] | np.ndarray, target: float) -> float:
    """Mean shortfall below ``target``: ``E[max(target − x, 0)]`` (lower is better)."""
    x = np.asarray(x, np.float64).ravel()
    return float(np.mean(np.maximum(target - x, 0.0)))


def probability_of_improvement(x: Sequence[float], y: Sequence[float]) -> float:
    """``P(X > Y)`` for a random run of each (ties count ½): the Mann-Whitney
    U statistic normalized to [0, 1]."""
    x = np.asarray(x, np.float64).ravel()[:, None]
    y = np.asarray(y, np.float64).ravel()[None, :]
    return float(np.mean((x > y) + 0.5 * (x == y)))


def probability_of_improvement_ci(
    x: Sequence[float], y: Sequence[float], confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap CI of :func:`probability_of_improvement`, resampling
    the runs of ``x`` and ``y`` independently."""
    x = np.asarray(x, np.float64).ravel()
    y = np.asarray(y, np.float64).ravel()
    rng = np.random.default_rng(seed)
    xs = x[rng.integers(0, x.size, size=(n_resamples, x.size))][:, :, None]
    ys = y[rng.integers(0, y.size, size=(n_resamples, y.size))][:, None, :]
    values = np.mean((xs > ys) + 0.5 * (xs == ys), axis=(1, 2))
    alpha = (1.0 - confidence) / 2.0
    return (float(np.quantile(values, alpha)), float(np.quantile(values, 1.0 - alpha)))


def performance_profile(x: Sequence[float], taus: np.ndarray) -> np.ndarray:
    """Fraction of runs scoring above each threshold ``τ``."""
    x = np.asarray(x, np.float64).ravel()
    return np.mean(x[None, :] > np.asarray(taus)[:, None], axis=1)


def summarize(returns: Sequence[float] | np.ndarray, solved_return: float | None = None) -> dict[str, Any]:
    """Mean, median, IQM with its 95% bootstrap CI, min/max and the solved fraction."""
    x = np.asarray(returns, np.float64).ravel()
    out: dict[str, Any] = {
        "mean": float(np.mean(x)),
        "median": float(np.median(x)),
        "iqm": iqm(x),
        "ci95": list(bootstrap_ci(x)),
        "std": float(np.std(x)),
        "min": float(np.min(x)),
        "max": float(np.max(x)),
    }
    out["solved_fraction"] = None if solved_return is None else float(np.mean(x >= solved_return))
    return out


def robustness_table(
    seed_ids: Sequence[int],
    returns: Sequence[float],
    summary: dict[str, Any],
    solved_return: float | None = None,
    title: str = "",
) -> str:
    """A plain-text table: every seed's final return, then the aggregates."""
    width = max(8, max(len(str(s)) for s in seed_ids))
    lines = []
    if title:
        lines.append(title)
    header = f"{'seed':>{width}}  {'final eval return':>17}" + ("  solved" if solved_return is not None else "")
    lines.append(header)
    lines.append("-" * len(header))
    for s, r in zip(seed_ids, returns, strict=True):
        if not np.isfinite(r):
            lines.append(f"{s:>{width}}  {'failed':>17}" + ("      no" if solved_return is not None else ""))
            continue
        mark = ("     yes" if r >= solved_return else "      no") if solved_return is not None else ""
        lines.append(f"{s:>{width}}  {r:>17.2f}{mark}")
    lines.append("-" * len(header))
    if summary.get("mean") is None:
        lines.append(f"{'':>{width}}  every seed failed")
        return "\n".join(lines)
    lo, hi = summary["ci95"]
    lines.append(f"{'mean':>{width}}  {summary['mean']:>17.2f}")
    lines.append(f"{'median':>{width}}  {summary['median']:>17.2f}")
    lines.append(f"{'IQM':>{width}}  {summary['iqm']:>17.2f}   95% CI [{lo:.2f}, {hi:.2f}] (bootstrap)")
    if solved_return is not None:
        n = len(returns)
        k = int(round(summary["solved_fraction"] * n))
        lines.append(f"{'solved':>{width}}  {k:>10d} / {n:<4d}   (return ≥ {solved_return:g})")
    return "\n".join(lines)


def iqm_band(curves: np.ndarray, n_resamples: int = 500) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-point IQM and 95% percentile-bootstrap CI over seeds of ``curves`` ``[S, P]``
    (one vectorized scipy bootstrap for all points)."""
    from scipy import stats as st

    curves = np.asarray(curves, np.float64)
    mid = st.trim_mean(curves, 0.25, axis=0)
    if curves.shape[0] < 2:
        return mid, mid, mid
    import warnings

    with warnings.catch_warnings():  # constant columns are handled below
        warnings.simplefilter("ignore")
        result = st.bootstrap(
            (curves,),
            lambda s, axis=-1: st.trim_mean(s, 0.25, axis=axis),
            axis=0,
            confidence_level=0.95,
            n_resamples=n_resamples,
            method="percentile",
            vectorized=True,
            rng=np.random.default_rng(0),
        )
    lo, hi = result.confidence_interval
    constant = np.all(curves == curves[:1], axis=0)  # zero-width where every seed agrees
    return mid, np.where(constant, mid, lo), np.where(constant, mid, hi)


def thin(steps: np.ndarray, values: np.ndarray, max_points: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Keep at most ``max_points`` evenly spaced columns (always the last)."""
    if steps.shape[0] <= max_points:
        return steps, values
    idx = np.unique(np.linspace(0, steps.shape[0] - 1, max_points).round().astype(int))
    return steps[idx], values[:, idx]


def plot_curves(
    path: str,
    panels: Sequence[tuple[str, np.ndarray, np.ndarray]],
    title: str = "",
    solved_return: float | None = None,
) -> None:
    """Save a learning-curve PNG: per panel, IQM across seeds with its 95% CI
    band and every seed as a thin line.

    ``panels``: ``(label, env_steps [P], values [S, P])`` triples; ``values``
    may instead be ``{name: [S, P]}``, one IQM curve with its band per name.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, (label, steps, values) in zip(axes[0], panels, strict=True):
        if isinstance(values, dict):  # one IQM curve per named series (evaluation sets)
            colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
            for i, (name, series) in enumerate(values.items()):
                xs, series = thin(np.asarray(steps), np.asarray(series, np.float64))
                mid, lo, hi = iqm_band(series)
                color = colors[i % len(colors)]
                ax.fill_between(xs, lo, hi, color=color, alpha=0.2, linewidth=0)
                ax.plot(xs, mid, color=color, linewidth=2, label=f"{name} (IQM, 95% CI)")
            if solved_return is not None:
                ax.axhline(
                    solved_return, color="gray", linestyle="--", linewidth=1, label=f"solved ({solved_return:g})"
                )
            ax.set_xlabel("env steps per seed")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            ax.legend(loc="lower right", fontsize=8)
            continue
        steps, values = thin(np.asarray(steps), np.asarray(values, np.float64))
        for row in values:
            ax.plot(steps, row, color="tab:blue", alpha=0.25, linewidth=0.7)
        mid, lo, hi = iqm_band(values)
        ax.fill_between(steps, lo, hi, color="tab:orange", alpha=0.3, linewidth=0, label="95% CI (bootstrap)")
        ax.plot(steps, mid, color="tab:orange", linewidth=2, label=f"IQM over {values.shape[0]} seeds")
        if solved_return is not None:
            ax.axhline(solved_return, color="gray", linestyle="--", linewidth=1, label=f"solved ({solved_return:g})")
        ax.set_xlabel("env steps per seed")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
