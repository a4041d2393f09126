"""K-sample reducers: pass@k (Chen et al.'s unbiased estimator), maj@K's vote and tie-break, variance share."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.errors import ConfigError
from aethersearch.scoring.reducers import (
    majority_index,
    pass_at_k,
    reducer_names,
    reducer_value,
    within_variance_share,
)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=12).flatmap(
    lambda n: st.tuples(st.just(n), st.integers(min_value=0, max_value=n), st.integers(min_value=1, max_value=n))))
def test_unbiased_pass_at_k_equals_the_exhaustive_average_over_all_k_subsets(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    exhaustive = sum(max(subset) for subset in subsets) / len(subsets)
    assert pass_at_k(n, c, k) == pytest.approx(exhaustive, abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


def test_pass_at_k_edges() -> None:
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_at_k(5, 1, 5) == 1.0
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)  # pass@1 = c / n = mean@K
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


@pytest.mark.parametrize(("predictions", "expected"), [
    (["Paris", "paris.", "Lyon"], 0),               # normalised answers vote together
    (["Lyon", "Paris", "The Paris", "Lyon"], 0),    # 2-2 tie: the answer voted first wins
    (["Paris", "Lyon", "Lyon", "Paris"], 0),
    ([None, "Lyon", None], 0),                      # "no answer" can win the vote (it then scores 0)
    (["Lyon", None, None, "Paris", "Paris"], 1),    # None and Paris tie 2-2: None voted first
    (["only"], 0),
])
def test_majority_vote_and_its_documented_tie_break(predictions: list[str | None], expected: int) -> None:
    assert majority_index(predictions) == expected


def test_reducer_names_follow_verl_spelling() -> None:
    assert reducer_names(3, binary=True) == ["mean@3", "pass@1", "pass@2", "pass@3", "maj@3"]
    assert reducer_names(3, binary=False) == ["mean@3", "maj@3"]


def test_reducer_values_refuse_what_the_run_cannot_answer() -> None:
    assert reducer_value("pass@2", samples=3, mean=1 / 3, correct=1, majority=0.0) == pytest.approx(2 / 3)
    assert reducer_value("maj@3", samples=3, mean=1 / 3, correct=1, majority=0.0) == 0.0
    with pytest.raises(ConfigError, match="pass@1..pass@3"):
        reducer_value("pass@4", samples=3, mean=0.0, correct=0, majority=0.0)
    with pytest.raises(ConfigError, match="0/1 metric"):
        reducer_value("pass@1", samples=3, mean=0.5, correct=None, majority=0.5)
    with pytest.raises(ConfigError, match="mean@3"):
        reducer_value("mean@5", samples=3, mean=0.5, correct=1, majority=0.5)
    with pytest.raises(ConfigError, match="unknown reducer"):
        reducer_value("best@3", samples=3, mean=0.5, correct=1, majority=0.5)


def test_variance_share_says_whether_samples_or_questions_are_the_noise() -> None:
    rng = np.random.default_rng(1)
    coin_flips = rng.integers(0, 2, size=(400, 5)).astype(float)  # every question alike: all noise is sampling
    assert within_variance_share(coin_flips)["share"] == pytest.approx(1.0, abs=0.15)
    fixed = np.repeat(rng.integers(0, 2, size=(400, 1)), 5, axis=1).astype(float)  # samples always agree
    assert within_variance_share(fixed)["share"] == 0.0
    assert within_variance_share(fixed[:, :1])["share"] is None  # K = 1: no within-question variance
