"""Answer extraction: the last answer tag, distinct outcomes, and Search-R1's two-match compatibility rule."""

from __future__ import annotations

import pytest

from aethersearch.errors import ConfigError
from aethersearch.records import Outcome, Trace
from aethersearch.scoring.extract import (
    extract_answer,
    extract_searchr1,
    resolve_prediction,
    resolve_trace,
    searchr1_prompt,
)


def _trace(response: str, outcome: str = "answered", prediction: str | None = None) -> Trace:
    return Trace(id="q1", question_seen="who wrote hamlet?", agent="searchr1", response=response,
                 prediction=prediction, outcome=outcome, stop_reason="x")


def test_last_answer_tag_wins_and_is_stripped() -> None:
    got = extract_answer("<answer>draft</answer> more thinking <answer>\n Shakespeare \n</answer>")
    assert got.prediction == "Shakespeare"
    assert got.outcome is Outcome.ANSWERED
    assert got.matches == 2


def test_no_tag_is_its_own_outcome_not_a_wrong_answer() -> None:
    got = extract_answer("<think>I should search</think><search>hamlet</search>")
    assert got.prediction is None
    assert got.outcome is Outcome.NO_ANSWER_TAG


@pytest.mark.parametrize("text", ["I don't know", "Unknown.", "insufficient information", "cannot be determined",
                                  "I cannot answer this"])
def test_refusals_are_abstentions(text: str) -> None:
    assert extract_answer(f"<answer>{text}</answer>").outcome is Outcome.ABSTAINED


@pytest.mark.parametrize("text", ["Na", "None of the Above (band)", "Unknown Pleasures album"])
def test_answers_resembling_refusals_stay_answered(text: str) -> None:
    assert extract_answer(f"<answer>{text}</answer>").outcome is Outcome.ANSWERED


@pytest.mark.parametrize("outcome", ["budget", "endpoint_error", "tool_error"])
def test_stopped_episodes_keep_their_outcome_and_score_nothing(outcome: str) -> None:
    got = resolve_trace(_trace("<answer>half-written</answer>", outcome=outcome))
    assert got.outcome.value == outcome
    assert got.prediction is None


def test_function_calling_agent_prediction_is_used_when_response_has_no_tags() -> None:
    got = resolve_trace(_trace("final: Shakespeare", prediction="Shakespeare"))
    assert (got.prediction, got.outcome) == ("Shakespeare", Outcome.ANSWERED)


def test_searchr1_compat_needs_two_matches_over_prompt_plus_response() -> None:
    prompt = searchr1_prompt("who wrote hamlet?")
    # Search-R1's prompt itself holds two spans, so a tagless response scores the example "Beijing"
    assert extract_searchr1(prompt, "<search>x</search>") == "Beijing"
    assert extract_searchr1(prompt, "<answer> Shakespeare </answer>") == "Shakespeare"
    # without the prompt a single span is not enough
    assert extract_searchr1("", "<answer> Shakespeare </answer>") is None
    got = resolve_trace(_trace("<search>x</search>"), compat="searchr1")
    assert got.prediction == "Beijing"
    assert got.outcome is Outcome.NO_ANSWER_TAG


def test_unknown_compat_mode_is_a_config_error_naming_valid_modes() -> None:
    with pytest.raises(ConfigError, match="searchr1"):
        resolve_trace(_trace(""), compat="searchr2")


def test_prediction_rows_marked_answered_without_text_count_as_no_answer() -> None:
    assert resolve_prediction(None, Outcome.ANSWERED).outcome is Outcome.NO_ANSWER_TAG
    assert resolve_prediction("x", Outcome.BUDGET)[:3] == (None, Outcome.BUDGET, 0)
    assert resolve_prediction("Paris", Outcome.ANSWERED).prediction == "Paris"


def test_answer_tags_inside_retrieved_information_are_not_the_models_answer() -> None:
    """A passage quoting ``<answer>`` tags must not become the prediction (the model never answered)."""
    from aethersearch.records import Outcome
    from aethersearch.scoring.extract import extract_answer

    response = ("<search> tags </search>\n\n<information>Doc 1(Title: HTML) write <answer> Paris </answer> "
                "in the page.</information>\n\n<think>not sure</think>")
    assert extract_answer(response).outcome is Outcome.NO_ANSWER_TAG
    answered = response + "<answer> Lyon </answer>"
    assert extract_answer(answered).prediction == "Lyon"
