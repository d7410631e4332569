"""Statistics against hand-computed values."""

import numpy as np
import pytest

from jaxrl.run import stats


def test_iqm_hand_computed():
    # 8 values: trim 2 each side → mean of the middle four
    assert stats.iqm([1, 2, 3, 4, 5, 6, 7, 100]) == pytest.approx((3 + 4 + 5 + 6) / 4)
    assert stats.iqm([5.0] * 4) == 5.0


def test_bootstrap_ci_degenerate_and_ordered():
    assert stats.bootstrap_ci([500.0] * 16) == (500.0, 500.0)
    lo, hi = stats.bootstrap_ci(np.arange(16.0))
    assert lo < stats.iqm(np.arange(16.0)) < hi
    assert stats.bootstrap_ci(np.arange(16.0)) == (lo, hi)  # deterministic


def test_bootstrap_ci_coverage_of_a_known_distribution():
    """The 95% CI of the IQM of 16 normal samples covers the true IQM (= mean
    of a symmetric distribution) in roughly 95% of repetitions."""
    rng = np.random.default_rng(1)
    hits = sum(
        lo <= 0.0 <= hi
        for lo, hi in (stats.bootstrap_ci(rng.normal(size=16), n_resamples=300, seed=i) for i in range(120))
    )
    assert 0.85 <= hits / 120 <= 0.99


def test_summarize_and_table():
    returns = [500.0, 500.0, 200.0, 480.0]
    s = stats.summarize(returns, solved_return=475)
    assert s["mean"] == pytest.approx(420.0)
    assert s["median"] == pytest.approx(490.0)
    assert s["solved_fraction"] == pytest.approx(0.75)
    assert s["ci95"][0] <= s["iqm"] <= s["ci95"][1]
    table = stats.robustness_table([0, 1, 2, 3], returns, s, solved_return=475)
    assert "3 / 4" in table and "IQM" in table and "200.00" in table
    assert stats.summarize(returns)["solved_fraction"] is None


def test_plot_curves_writes_png(tmp_path):
    steps = np.arange(1, 301) * 100
    values = np.random.default_rng(0).normal(size=(5, 300)).cumsum(1)
    path = tmp_path / "curves.png"
    stats.plot_curves(str(path), [("return", steps, values), ("other", steps[:3], values[:, :3])], solved_return=5)
    assert path.stat().st_size > 10_000


def test_a_performance_profile_is_drawn_only_when_scores_differ(tmp_path):
    from types import SimpleNamespace

    from jaxrl.run import report

    same = [SimpleNamespace(scores=np.full(8, 500.0)), SimpleNamespace(scores=np.full(8, 500.0))]
    assert report.profile_note(same) == (
        "No performance profile: all 16 runs scored 500 (a profile compares how scores spread; here they do not)."
    )
    assert report.profile_note([SimpleNamespace(scores=np.array([1.0, 2.0]))]) is None
    assert (
        report.profile_note([SimpleNamespace(scores=np.zeros(0))])
        == "No performance profile: no run has a final score."
    )
