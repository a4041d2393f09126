"""One abstention rule for agents and scorer, and "gold wins": a correct answer is never a refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch import abstention
from aethersearch.agents import base, evidenceloop
from aethersearch.agents.base import finish
from aethersearch.jsonl import write_jsonl
from aethersearch.records import Outcome
from aethersearch.scoring import extract
from aethersearch.scoring.api import score_run
from aethersearch.scoring.extract import Extraction, extract_answer, settle
from aethersearch.scoring.metrics import subem
from tests.scoring.factory import eval_rows, write_release, write_run

# Real gold answers that read like refusals (NQ and 2WikiMultihopQA golds).
REFUSAL_SHAPED_GOLDS = ["Unknown", "Don't Know Why", "I Can't Tell You Why", 'I Cannot Say "Farewell"']


def test_agents_and_scorer_use_the_one_definition() -> None:
    assert base.is_abstention is abstention.is_abstention
    assert evidenceloop.is_abstention is abstention.is_abstention
    assert extract.is_abstention is abstention.is_abstention


@pytest.mark.parametrize(("answer", "refusal"), [
    ("I don't know", True), ("I don’t know.", True), ("i do not know the answer to this question", True),
    ("Unknown", True), ("unknown.", True), ("N/A", True), ("n/a", True), ("No answer", True),
    ("insufficient information", True), ("Not enough information to answer.", True),
    ("It cannot be determined", True), ("I cannot answer this", True), ("I'm not sure", True),
    ("I am unable to determine the answer from the documents", True),
    ("I don't have enough information to answer", True), ("I'm sorry, but I cannot determine that.", True),
    ("The provided documents do not mention his birthplace", True),
    ("I Have a Dream", False), ("I Don't Want to Miss a Thing", False), ("Sorry Seems to Be the Hardest Word", False),
    # answers, by shape, although each starts like a refusal (they disagreed between agent and scorer)
    ("Na", False), ("Unknown Pleasures", False), ("Unknown Pleasures album", False), ("None of the Above (band)", False),
    ("Don't Know Why", False), ("No", False), ("Nobody Knows", False), ("", False),
])
def test_shape_of_a_refusal_is_the_same_for_agent_and_scorer(answer: str, refusal: bool) -> None:
    agent = finish(f"<answer>{answer}</answer>", answer, "answer").outcome
    scorer = extract_answer(f"<answer>{answer}</answer>").outcome
    want = Outcome.ABSTAINED if refusal else Outcome.ANSWERED
    if answer == "":  # an empty tag is an (empty) answer for both
        want = Outcome.ANSWERED
    assert (agent, scorer) == (want, want)


@pytest.mark.parametrize("gold", REFUSAL_SHAPED_GOLDS)
def test_an_answer_with_em_1_against_a_gold_is_an_answer_always(gold: str) -> None:
    raw = extract_answer(f"<answer> {gold} </answer>")
    settled = settle(raw, [gold])
    assert settled.outcome is Outcome.ANSWERED and settled.prediction == gold
    # against other gold the refusal-shaped ones stay refusals (the shape rule still applies)
    assert settle(raw, ["Paris"]).outcome is raw.outcome


@pytest.mark.parametrize(("prediction", "golds", "outcome"), [
    ("Unknown", ["Unknown"], "answered"),
    ("unknown.", ["Unknown", "U.N.K."], "answered"),
    ("I can't tell you why", ["I Can't Tell You Why"], "answered"),
    ('I cannot say "Farewell"', ['I Cannot Say "Farewell"'], "answered"),
    ("Don't Know Why", ["Don't Know Why"], "answered"),
    ("Unknown", ["Paris"], "abstained"),
    ("I don't know", ["No"], "abstained"),
])
def test_refusal_rule_through_score_run(tmp_path: Path, prediction: str, golds: list[str], outcome: str) -> None:
    rows = [r.model_copy(update={"answers": golds}) for r in eval_rows(1)[:1]]
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, set())
    # the agent labelled the refusal-shaped answer itself; the scorer re-decides with the gold
    agent_outcome = "abstained" if abstention.is_abstention(prediction) else "answered"
    write_jsonl(run / "traces.jsonl", [{
        "id": rows[0].id, "question_seen": rows[0].question, "agent": "searchr1",
        "response": f"<answer> {prediction} </answer>", "prediction": prediction,
        "outcome": agent_outcome, "stop_reason": "answer"}])
    scores = score_run(run, release, resamples=50)
    row = scores.per_question[0]
    assert row.outcome == outcome
    assert row.values["em"] == (1.0 if outcome == "answered" else 0.0)


def test_searchr1_subem_credits_a_refusal_and_the_abstention_aware_figure_does_not(tmp_path: Path) -> None:
    # Search-R1's qa_em: normalised "i dont know" contains gold "no" -> sub-EM 1
    assert subem("I don't know", ["No"]) == 1.0
    rows = [r.model_copy(update={"answers": ["No"]}) for r in eval_rows(1)[:1]]
    release = write_release(tmp_path / "release", rows)
    run = tmp_path / "preds"
    run.mkdir()
    write_jsonl(run / "predictions.jsonl", [{"id": rows[0].id, "prediction": "I don't know", "outcome": "abstained"}])
    scores = score_run(run, release, resamples=50)
    values = scores.per_question[0].values
    assert scores.per_question[0].outcome == "abstained"
    assert values["subem"] == 1.0  # equal to Search-R1's number ...
    assert values["subem_answered"] == 0.0  # ... and the refusal-aware figure beside it
    assert values["em"] == 0.0
    assert "subem_answered" in scores.metrics and scores.abstention_rule == abstention.ABSTENTION_RULE


def test_settle_never_touches_other_outcomes() -> None:
    for outcome in (Outcome.NO_ANSWER_TAG, Outcome.BUDGET, Outcome.ENDPOINT_ERROR):
        got = settle(Extraction(None, outcome, 0), ["Unknown"])
        assert got.outcome is outcome


@pytest.mark.parametrize("gold", REFUSAL_SHAPED_GOLDS)
def test_the_verl_reward_settles_refusal_shaped_golds_like_the_scorer(gold: str) -> None:
    from aethersearch.interop.verl_reward import compute_score

    got = compute_score("nq", f"<think>x</think><answer> {gold} </answer>", {"target": [gold]})
    assert (got["score"], got["answered"], got["aether_outcome"]) == (1.0, 1.0, "answered")
