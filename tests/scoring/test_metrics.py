"""Metric tables: each published rule on cases a user would check by hand."""

from __future__ import annotations

import pytest

from aethersearch.scoring.metrics import METRICS, cover_em, em, f1, popqa_acc, score_all, squad_em, subem

GOLDS = ["December 1972", "14 December 1972 UTC"]


@pytest.mark.parametrize(("prediction", "golds", "want"), [
    ("december 1972", GOLDS, 1.0),
    ("The December, 1972.", GOLDS, 1.0),
    ("in December 1972", GOLDS, 0.0),
    ("1972", GOLDS, 0.0),
    (None, GOLDS, 0.0),
])
def test_em_is_normalised_equality_with_any_gold(prediction, golds, want) -> None:
    assert em(prediction, golds) == want
    assert squad_em(prediction, golds) == want


@pytest.mark.parametrize(("prediction", "want"), [
    ("it was in December 1972 I think", 1.0),
    ("december 19721", 1.0),  # character substring, exactly as Search-R1's subem_check
    ("1972 December", 0.0),
    (None, 0.0),
])
def test_subem_is_gold_substring_of_prediction(prediction, want) -> None:
    assert subem(prediction, GOLDS) == want


def test_f1_is_squad_token_overlap_max_over_golds() -> None:
    assert f1("December", GOLDS) == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert f1("14 December 1972 UTC", GOLDS) == 1.0
    assert f1("nothing shared", GOLDS) == 0.0
    # multiset overlap: a repeated token only counts as often as the gold has it
    assert f1("york york york", ["new york"]) == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))


def test_cover_em_needs_every_gold_token_in_any_order() -> None:
    assert cover_em("1972, in december", ["December 1972"]) == 1.0
    assert cover_em("december", ["December 1972"]) == 0.0
    assert cover_em("new york", ["New York New York"]) == 0.0
    assert cover_em("new york, new york", ["New York New York"]) == 1.0


def test_popqa_acc_is_raw_containment_with_lower_and_capitalised_forms() -> None:
    assert popqa_acc("She was born in paris.", ["Paris"]) == 1.0
    assert popqa_acc("PARIS", ["paris"]) == 0.0  # no normalisation: PopQA's own rule
    assert popqa_acc("the answer is Bobby scott", ["bobby scott"]) == 1.0  # capitalize()
    assert popqa_acc(None, ["Paris"]) == 0.0


def test_score_all_agrees_with_each_named_metric() -> None:
    for prediction in ["The Beatles", "beatles!", "the rolling stones and beatles", "", "x"]:
        golds = ["Beatles", "The Fab Four"]
        fused = score_all(prediction, golds)
        assert fused == {name: fn(prediction, golds) for name, fn in METRICS.items()}
