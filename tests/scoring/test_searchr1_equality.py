"""``em``/``subem`` equal Search-R1's ``qa_em`` on every input; golds may be one string, as there.

The reference is the independent re-implementation in ``test_fidelity.py``
(written from Search-R1's ``verl/utils/reward_score/qa_em.py``), plus Search-R1's
own handling of a bare string (``if isinstance(golden_answers, str): golden_answers
= [golden_answers]``).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.scoring.api import score_row
from aethersearch.scoring.join import JoinedRow
from aethersearch.scoring.metrics import (
    METRICS,
    cover_em,
    em,
    f1,
    popqa_acc,
    score_all,
    squad_em,
    subem,
)
from tests.scoring.test_fidelity import ref_em_check, ref_subem_check


def _searchr1(check, prediction: str, golds: str | list[str]) -> float:
    return float(check(prediction, [golds] if isinstance(golds, str) else golds))


# Text that exercises every normalisation step: case, ASCII punctuation, articles, whitespace, Unicode.
_PIECES = st.sampled_from(["the", "The", "a", "an", "A", "An", "theory", "anna", "1972", "Paris", "paris", "N/A",
                           "I", "don't", "know", "No", "no", "U.S.", "É", "İ", "ß", "straße", "—", "'", '"', "?",
                           " ", "  ", "\t", "\n", "-", "_", ".", ",", "(band)", "Unknown"])
TEXT = st.one_of(st.lists(_PIECES, max_size=8).map("".join), st.text(max_size=20))
GOLDS = st.one_of(TEXT, st.lists(TEXT, max_size=4))


@settings(max_examples=400, deadline=None)
@given(TEXT, GOLDS)
def test_em_and_subem_equal_searchr1_on_every_input(prediction: str, golds: str | list[str]) -> None:
    assert em(prediction, golds) == _searchr1(ref_em_check, prediction, golds)
    assert subem(prediction, golds) == _searchr1(ref_subem_check, prediction, golds)
    fused = score_all(prediction, golds)
    assert (fused["em"], fused["subem"]) == (em(prediction, golds), subem(prediction, golds))


@settings(max_examples=200, deadline=None)
@given(TEXT, st.lists(TEXT, min_size=1, max_size=4), st.sampled_from(["answered", "abstained"]))
def test_per_question_em_and_subem_equal_searchr1_whatever_the_outcome(prediction: str, golds: list[str],
                                                                       outcome: str) -> None:
    row = JoinedRow("q1", "nq", "q?", golds, prediction, outcome, True, None)
    values = score_row(row, compat=None)
    assert values["em"] == _searchr1(ref_em_check, prediction, golds)
    assert values["subem"] == _searchr1(ref_subem_check, prediction, golds)
    assert values["subem_answered"] == (values["subem"] if outcome == "answered" else 0.0)


@pytest.mark.parametrize("metric", [em, subem, squad_em, f1, cover_em, popqa_acc])
def test_a_single_gold_string_is_one_alias_not_its_characters(metric) -> None:
    assert metric("Paris", "Paris") == 1.0
    assert metric("Paris", "Paris") == metric("Paris", ["Paris"])
    assert metric("a", "Paris") == metric("a", ["Paris"])  # "a" is no longer a "character gold"
    assert metric("P", "Paris") == 0.0


def test_score_all_accepts_a_single_gold_string_and_iterables_of_str() -> None:
    assert score_all("Paris", "Paris") == score_all("Paris", ["Paris"]) == score_all("Paris", ("Paris",))
    assert score_all("Paris", np.array(["Paris", "City of Light"])) == score_all("Paris", ["Paris", "City of Light"])
    assert score_all("Paris", "Paris") == {name: fn("Paris", "Paris") for name, fn in METRICS.items()}


@pytest.mark.parametrize(("golds", "message"), [
    (b"Paris", "not bytes"),
    (None, "not NoneType"),
    (42, "not int"),
    ({"Paris": 1}, "not dict"),
    (["Paris", None], r"golds\[1\] must be a str, not NoneType"),
    ([["Paris"]], r"golds\[0\] must be a str, not list"),
])
@pytest.mark.parametrize("metric", [em, subem, f1, score_all])
def test_anything_but_str_or_a_sequence_of_str_is_a_clear_error(metric, golds, message) -> None:
    with pytest.raises(TypeError, match=message):
        metric("Paris", golds)


def test_a_non_string_prediction_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="prediction must be a str or None, not int"):
        em(1972, ["1972"])  # type: ignore[arg-type]
