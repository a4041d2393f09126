"""The CI of a K-sample run resamples questions (clusters), checked against a brute-force bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from aethersearch.scoring.aggregate import aggregate, estimate


def _rows(values: np.ndarray) -> list[dict[str, object]]:
    """One row per (question, sample) of a questions x K matrix of 0/1 values, in shuffled order."""
    rows = [{"id": f"q{q:04d}", "sample": k, "source": "nq", "outcome": "answered", "em": float(values[q, k])}
            for q in range(values.shape[0]) for k in range(values.shape[1])]
    order = np.random.default_rng(5).permutation(len(rows))
    return [rows[i] for i in order]


def _brute_force(values: np.ndarray, resamples: int, seed: int, clustered: bool) -> tuple[float, float]:
    """Percentile CI by the textbook loop: draw questions (or, wrongly, traces) with replacement."""
    rng = np.random.default_rng(seed)
    n, k = values.shape
    flat = values.reshape(-1)
    means = np.empty(resamples)
    for b in range(resamples):
        if clustered:
            means[b] = values[rng.integers(0, n, size=n)].mean()  # all K samples of a drawn question
        else:
            means[b] = flat[rng.integers(0, n * k, size=n * k)].mean()
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def test_the_clustered_ci_matches_a_brute_force_bootstrap_over_questions() -> None:
    rng = np.random.default_rng(2026)
    n, k = 150, 4
    difficulty = rng.beta(0.6, 0.6, size=n)  # strongly question-dependent: samples of a question correlate
    values = (rng.random((n, k)) < difficulty[:, None]).astype(float)
    result = aggregate(_rows(values), ["em"], resamples=20_000, seed=3, samples=k)
    got = result["overall"]["micro"]["metrics"]["em"]
    low, high = _brute_force(values, 20_000, 11, clustered=True)
    assert got["mean"] == pytest.approx(values.mean())
    assert got["n"] == n  # the CI's n is questions, not traces
    assert got["ci_low"] == pytest.approx(low, abs=0.008)
    assert got["ci_high"] == pytest.approx(high, abs=0.008)
    # a bootstrap over traces treats 4 correlated samples as 4 questions: visibly too narrow here
    naive_low, naive_high = _brute_force(values, 20_000, 11, clustered=False)
    assert (naive_high - naive_low) < 0.75 * (got["ci_high"] - got["ci_low"])
    share = result["overall"]["micro"]["variance"]["em"]["share"]
    assert 0.0 < share < 0.5  # most of this CI's width is between questions: more questions would help


def test_one_sample_runs_keep_their_figures() -> None:
    """K = 1: each question's value is its one sample, bootstrapped exactly as before (same seed name, same draws)."""
    rng = np.random.default_rng(4)
    values = (rng.random((80, 1)) < 0.4).astype(float)
    one = aggregate(_rows(values), ["em"], resamples=2000, seed=0)
    by_id = values[:, 0]  # _rows names questions q0000.. in order, so id order is row order
    assert one["by_source"]["nq"]["metrics"]["em"] == estimate(by_id, resamples=2000, seed=0, name="em/nq").as_dict()
    assert one["overall"]["micro"]["n"] == 80
    assert "variance" not in one["overall"]["micro"]
