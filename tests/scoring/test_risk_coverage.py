"""Risk–coverage: AURC equals a brute-force average over every tie-consistent order; signals; ECE; who is counted."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.scoring.api import score_run
from aethersearch.scoring.risk_coverage import (
    RiskInputs,
    aurc_bootstrap_difference,
    expected_calibration_error,
    risk_coverage,
)
from tests.scoring.factory import eval_rows, write_release, write_run


def brute_force_aurc(confidence: list[float], correct: list[float]) -> float:
    """Mean over every order that sorts by confidence (ties in any order) of mean_k errors(k)/k."""
    orders = [p for p in itertools.permutations(range(len(confidence)))
              if all(confidence[p[i]] >= confidence[p[i + 1]] for i in range(len(p) - 1))]
    total = 0.0
    for order in orders:
        errors = 0.0
        risks = []
        for k, index in enumerate(order, start=1):
            errors += 1.0 - correct[index]
            risks.append(errors / k)
        total += sum(risks) / len(risks)
    return total / len(orders)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["answered", "answered", "abstained", "endpoint_error"]),
                          st.integers(0, 1), st.integers(0, 3)), min_size=1, max_size=7))
def test_aurc_equals_the_brute_force_average_over_tie_orders(rows: list[tuple[str, int, int]]) -> None:
    outcomes = [o for o, _, _ in rows]
    correct = [float(c) for _, c, _ in rows]
    confidence: list[float | None] = [float(k) if o == "answered" else None for o, _, k in rows]
    curve = risk_coverage(outcomes, correct, confidence, signal="effort")
    covered = [i for i, o in enumerate(outcomes) if o == "answered"]
    counted = [o for o in outcomes if o != "endpoint_error"]
    assert curve.n == len(counted) and curve.covered == len(covered)
    assert curve.excluded_errors == len(outcomes) - len(counted)
    if not covered:
        assert curve.aurc is None
        return
    expected = brute_force_aurc([confidence[i] or 0.0 for i in covered], [correct[i] for i in covered])
    assert curve.aurc == pytest.approx(expected, abs=1e-12)
    assert curve.coverage_max == pytest.approx(len(covered) / len(counted))
    assert curve.coverage[-1] == pytest.approx(curve.coverage_max)


def test_a_model_whose_errors_are_its_least_confident_answers_has_the_lower_aurc() -> None:
    outcomes = ["answered"] * 4
    correct = [1.0, 1.0, 0.0, 0.0]
    good = risk_coverage(outcomes, correct, [0.9, 0.8, 0.2, 0.1], signal="stated")
    bad = risk_coverage(outcomes, correct, [0.1, 0.2, 0.8, 0.9], signal="stated")
    assert good.aurc is not None and bad.aurc is not None and good.aurc < bad.aurc
    assert good.aurc == pytest.approx((0 + 0 + 1 / 3 + 2 / 4) / 4)


def test_expected_calibration_error_on_a_hand_computed_case() -> None:
    # bin 9 holds (0.95, 1), (0.95, 0): accuracy 0.5 vs 0.95; bin 1 holds (0.15, 0): 0 vs 0.15
    assert expected_calibration_error([0.95, 0.95, 0.15], [1, 0, 0]) == pytest.approx(2 / 3 * 0.45 + 1 / 3 * 0.15)


def test_paired_aurc_difference_of_a_run_with_itself_is_zero() -> None:
    inputs = RiskInputs(["answered"] * 6 + ["abstained"], [1, 0, 1, 1, 0, 1, 0], [5, 1, 4, 3, 2, 6, None])
    result = aurc_bootstrap_difference(inputs, inputs, resamples=50)
    assert result["delta"] == 0.0 and result["ci_low"] == 0.0 and result["ci_high"] == 0.0


def test_scores_json_carries_the_risk_coverage_section(tmp_path: Path) -> None:
    rows = eval_rows(4)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, {r.id for r in rows[::2]},
                    outcomes={rows[1].id: "abstained", rows[3].id: "endpoint_error"})
    scores = score_run(run, release, resamples=50)
    risk = scores.risk_coverage
    assert risk is not None and risk["signal"] == "effort"
    assert (risk["n"], risk["covered"], risk["excluded_errors"]) == (len(rows) - 1, len(rows) - 2, 1)
    assert len(risk["curve"]["coverage"]) == risk["covered"]
