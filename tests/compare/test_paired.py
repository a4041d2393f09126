"""Paired statistics: McNemar (exact / chi-square), paired bootstrap, Holm, MDE and flips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from aethersearch.compare.paired import (
    EXACT_LIMIT,
    flips,
    holm,
    mcnemar,
    mde_binary,
    mde_continuous,
    paired_bootstrap,
)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=300))
def test_mcnemar_on_identical_runs_gives_p_one(values: list[float]) -> None:
    result = mcnemar(values, values)
    assert result.p_value == 1.0
    assert result.wrong_to_right == result.right_to_wrong == 0


def test_mcnemar_is_exact_binomial_for_few_discordant_pairs() -> None:
    a = [0] * 9 + [1] + [1] * 40
    b = [1] * 9 + [0] + [1] * 40  # 9 wrong->right, 1 right->wrong
    result = mcnemar(a, b)
    assert result.method == "exact"
    assert (result.wrong_to_right, result.right_to_wrong) == (9, 1)
    assert result.p_value == pytest.approx(stats.binomtest(9, 10, 0.5).pvalue)
    assert result.p_value == pytest.approx(2 * (1 + 10) / 2**10)


def test_mcnemar_uses_continuity_corrected_chi_square_for_many_discordant_pairs() -> None:
    a = np.array([0] * 40 + [1] * 20 + [1] * 100)
    b = np.array([1] * 40 + [0] * 20 + [1] * 100)
    result = mcnemar(a, b)
    assert 40 + 20 >= EXACT_LIMIT and result.method == "chi2-cc"
    assert result.statistic == pytest.approx((abs(40 - 20) - 1) ** 2 / 60)
    assert result.p_value == pytest.approx(stats.chi2.sf((19**2) / 60, 1))


def test_paired_bootstrap_detects_a_consistent_gain_and_not_noise() -> None:
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, 400)
    gain = paired_bootstrap(a, np.clip(a + 0.1, 0, 1), resamples=1000)
    assert gain.delta > 0 and gain.ci_low > 0 and gain.p_value < 0.01
    same = paired_bootstrap(a, a, resamples=1000)
    assert same.delta == 0.0 and same.p_value == 1.0
    noise = paired_bootstrap(a, rng.permutation(a), resamples=1000)
    assert noise.ci_low <= noise.delta <= noise.ci_high


def test_holm_matches_the_step_down_definition() -> None:
    adjusted = holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.5})
    # sorted: a .01*4=.04, c .03*3=.09, b .04*2=.08 -> monotone .09, d .5*1=.5
    assert adjusted == pytest.approx({"a": 0.04, "c": 0.09, "b": 0.09, "d": 0.5})
    assert holm({"x": 0.9, "y": 0.8}) == {"x": 1.0, "y": 1.0}


def test_minimum_detectable_effect_shrinks_with_sample_size() -> None:
    assert mde_binary(1400, 0.2) < mde_binary(200, 0.2)
    assert mde_binary(1400, 0.2) == pytest.approx((1.959964 + 0.841621) * (0.2 / 1400) ** 0.5, rel=1e-5)
    assert mde_binary(100, 0.0) > 0  # floor of one discordant question, never a misleading 0
    diffs = np.random.default_rng(0).normal(0, 0.3, 500)
    assert mde_continuous(diffs) == pytest.approx(2.801585 * diffs.std(ddof=1) / 500**0.5, rel=1e-5)


def test_flip_tables_list_question_ids() -> None:
    got = flips(["q1", "q2", "q3", "q4"], [0, 1, 1, 0], [1, 0, 1, 0])
    assert got == {"wrong_to_right": ["q1"], "right_to_wrong": ["q2"]}
