"""The stated-confidence prompt variant, end to end: prompt, agent, contract, scorer, risk–coverage, compare."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.prompts import SEARCH_R1_CONFIDENCE_PROMPT, SEARCH_R1_PROMPT
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.compare.checkpoints import compare_runs
from aethersearch.compare.fingerprints import check_contract
from aethersearch.errors import ConfigError, IntegrityError
from aethersearch.records import Budget, Decoding, Outcome, RolloutQuestion
from aethersearch.rollout.runner import run_episode
from aethersearch.scoring.api import score_run
from aethersearch.scoring.risk_coverage import expected_calibration_error, risk_coverage
from aethersearch.stated_confidence import split_confidence
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
from tests.agents.fakes import FakeSearchEnv
from tests.rollout.helpers import fingerprint as run_fingerprint
from tests.scoring.factory import eval_rows, trace, write_release, write_run
from tests.scoring.test_risk_coverage import brute_force_aurc

VARIANT = {"agent_config": {"prompt_variant": "stated-confidence"}, "prompt_template_hash": "p-stated"}


@pytest.mark.parametrize(("text", "answer", "confidence", "status"), [
    ("Beijing Confidence: 90%", "Beijing", 0.9, "stated"),
    ("Beijing\nConfidence: 90 %", "Beijing", 0.9, "stated"),
    ("Paris (confidence 0.4)", "Paris", 0.4, "stated"),
    ("Paris, confidence score = 1.0", "Paris", 1.0, "stated"),
    ("Paris Confidence: 7", "Paris", 0.07, "stated"),
    ("I don't know; Confidence: 0%", "I don't know", 0.0, "stated"),
    ("Paris", "Paris", None, "missing"),
    ("Confidence trick", "Confidence trick", None, "missing"),  # a label needs ':' / '=' or a number
    ("Paris Confidence: high", "Paris", None, "unparseable"),
    ("Paris Confidence: 150%", "Paris", None, "out_of_range"),  # never clamped to 100%
    ("Confidence: 20% Lyon Confidence: 60%", "Confidence: 20% Lyon", 0.6, "stated"),  # the last label counts
])
def test_split_confidence_reads_the_last_label_and_never_guesses(text: str, answer: str, confidence: float | None,
                                                                 status: str) -> None:
    got = split_confidence(text)
    assert (got.answer, got.status) == (answer, status)
    assert got.confidence == (pytest.approx(confidence) if confidence is not None else None)


def test_the_variant_changes_only_the_answer_sentence_and_quotes_browsecomp_plus() -> None:
    plain_head, plain_tail = SEARCH_R1_PROMPT.split("without detailed illustrations")
    head, tail = SEARCH_R1_CONFIDENCE_PROMPT.split("without detailed illustrations")
    assert head == plain_head and tail.endswith("Question: {question}\n")
    rendered = SEARCH_R1_CONFIDENCE_PROMPT.format(question="Who?")
    assert "Confidence: {your confidence score between 0% and 100% for your answer}" in rendered
    assert "<answer> Beijing Confidence: 90% </answer>" in rendered


def test_the_variant_is_recorded_in_the_contract_and_compare_refuses_to_mix(tmp_path: Path) -> None:
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_text('{"id": "q1", "question": "Who?"}\n')
    plain, stated = SearchR1Agent(), SearchR1Agent(prompt_variant="stated-confidence")
    assert "prompt_variant" not in plain.config()  # Search-R1's own prompt: older run.json files stay comparable
    assert stated.config()["prompt_variant"] == "stated-confidence"
    a = run_fingerprint(rollout, plain, "http://x/v1", count=1)
    b = run_fingerprint(rollout, stated, "http://x/v1", count=1)
    with pytest.raises(IntegrityError) as refused:
        check_contract([("plain", a), ("stated", b)])
    assert "agent_config" in str(refused.value) and "prompt_template_hash" in str(refused.value)
    with pytest.raises(ConfigError, match="stated-confidence"):
        SearchR1Agent(prompt_variant="confident")


def test_the_agent_records_the_answer_without_its_confidence() -> None:
    bodies: list[str] = []

    def reply(request: ScriptedRequest) -> Reply:
        bodies.append(request.body["prompt"])
        return Reply("<think>known</think>\n<answer> Paris Confidence: 85% </answer>")

    async def go():  # type: ignore[no-untyped-def]
        with ScriptedServer(reply) as server:
            async with OpenAIClient(server.url, "m") as llm:
                return await run_episode(RolloutQuestion(id="q1", question="Capital of France"),
                                         SearchR1Agent(prompt_variant="stated-confidence"), FakeSearchEnv(), llm,
                                         Budget(max_turns=2, max_tool_calls=2), Decoding())

    result = asyncio.run(go())
    assert "your confidence score between 0% and 100%" in bodies[0]
    assert (result.prediction, result.outcome) == ("Paris", Outcome.ANSWERED)
    assert result.steps[-1].notes["stated_confidence"] == {"value": 0.85, "status": "stated"}


def _stated_run(path: Path, rows, answers: dict[str, str]) -> Path:  # type: ignore[no-untyped-def]
    """A stated-confidence run: ``answers[id]`` is the whole content of the answer tags."""
    run = write_run(path, rows, set(), fp_changes=VARIANT)
    lines = [trace(row.id, row.question, answers[row.id]) for row in rows]
    (run / "traces.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def test_the_scorer_scores_the_answer_alone_and_reports_stated_confidence(tmp_path: Path) -> None:
    rows = eval_rows(2)  # 6 questions
    release = write_release(tmp_path / "release", rows)
    answers = {rows[0].id: f"{rows[0].answers[0]} Confidence: 90%",
               rows[1].id: "wrong guess Confidence: 80%",
               rows[2].id: f"{rows[2].answers[0]} Confidence: 70%",
               rows[3].id: f"{rows[3].answers[0]}",  # missing: ranked last, left out of ECE
               rows[4].id: "wrong guess Confidence: sure",  # unparseable
               rows[5].id: "I don't know Confidence: 5%"}  # a refusal once the confidence is taken off
    scores = score_run(_stated_run(tmp_path / "run", rows, answers), release, resamples=20)
    by_id = {q.id: q for q in scores.per_question}
    assert by_id[rows[0].id].prediction == rows[0].answers[0] and by_id[rows[0].id].values["em"] == 1.0
    assert (by_id[rows[0].id].stated_confidence, by_id[rows[0].id].confidence_status) == (0.9, "stated")
    assert (by_id[rows[3].id].stated_confidence, by_id[rows[3].id].confidence_status) == (None, "missing")
    assert by_id[rows[5].id].outcome == "abstained" and by_id[rows[5].id].prediction == "I don't know"
    risk = scores.risk_coverage
    assert risk is not None and risk["signal"] == "stated"
    assert risk["stated"] == {"answered": 5, "stated": 3, "missing": 1, "unparseable": 1, "out_of_range": 0}
    # ECE by hand over the 3 stated answers, 10 equal-width bins: 0.9 -> bin 9 (1 right), 0.8 -> bin 8
    # (wrong), 0.7 -> bin 7 (right): (|1-0.9| + |0-0.8| + |1-0.7|) / 3
    assert risk["ece"] == pytest.approx((0.1 + 0.8 + 0.3) / 3) and risk["ece_answers"] == 3
    assert risk["ece_bins"] == 10
    # AURC: the 3 stated first by confidence, then the 2 without one as a tie group (brute force agrees)
    order = [rows[i].id for i in range(5)]
    keys = [0.9, 0.8, 0.7, -1.0, -1.0]
    correct = [by_id[q].values["em"] for q in order]
    assert risk["aurc"] == pytest.approx(brute_force_aurc(keys, correct))
    assert risk["n"] == 6 and risk["covered"] == 5


def test_a_plain_run_never_reads_a_confidence_even_if_an_answer_carries_one(tmp_path: Path) -> None:
    rows = eval_rows(1)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, set())
    lines = [trace(row.id, row.question, f"{row.answers[0]} Confidence: 90%") for row in rows]
    (run / "traces.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    scores = score_run(run, release, resamples=20)
    assert scores.risk_coverage is not None and scores.risk_coverage["signal"] == "effort"
    assert scores.risk_coverage["ece"] is None and scores.risk_coverage["stated"] is None
    assert all(q.confidence_status is None and q.values["em"] == 0.0 for q in scores.per_question)


def test_expected_calibration_error_bins_are_equal_width_with_one_closed_at_one() -> None:
    # bins: 0.05 -> 0; 0.1 -> 1 (left edge belongs to its bin); 0.55, 0.59 -> 5; 1.0 -> 9 (closed)
    confidence = [0.05, 0.1, 0.55, 0.59, 1.0]
    correct = [0, 1, 1, 0, 1]
    by_hand = (abs(0 - 0.05) + abs(1 - 0.1) + 2 * abs(0.5 - 0.57) + abs(1 - 1.0)) / 5
    assert expected_calibration_error(confidence, correct) == pytest.approx(by_hand)


def test_missing_confidences_rank_after_every_stated_one() -> None:
    outcomes = ["answered"] * 4
    curve = risk_coverage(outcomes, [0.0, 1.0, 1.0, 0.0], [None, 0.0, 0.3, None], signal="stated")
    # order: 0.3 (right), 0.0 (right), then the two missing (both wrong) as a tie group
    assert curve.risk == pytest.approx([0.0, 0.0, 1 / 3, 2 / 4])
    assert curve.ece_answers == 2 and curve.ece == pytest.approx((abs(1 - 0.0) + abs(1 - 0.3)) / 2)


def test_compare_gives_the_paired_aurc_and_ece_differences_of_two_stated_runs(tmp_path: Path) -> None:
    rows = eval_rows(2)
    release = write_release(tmp_path / "release", rows)
    good = {r.id: f"{r.answers[0]} Confidence: 90%" if i % 2 else "wrong guess Confidence: 10%"
            for i, r in enumerate(rows)}
    bad = {r.id: f"{r.answers[0]} Confidence: 10%" if i % 2 else "wrong guess Confidence: 90%"
           for i, r in enumerate(rows)}
    runs = [_stated_run(tmp_path / name, rows, answers) for name, answers in (("good", good), ("bad", bad))]
    for run in runs:
        score_run(run, release, resamples=20)
    pair = compare_runs(runs, resamples=200)["pairs"][0]["risk_coverage"]
    assert pair["signal"] == ["stated", "stated"]
    assert pair["delta"] is not None and pair["delta"] > 0  # the badly calibrated run has the higher AURC
    assert pair["ece"]["a"] == pytest.approx(0.1) and pair["ece"]["b"] == pytest.approx(0.9)
    assert pair["ece"]["delta"] == pytest.approx(0.8)



def test_the_report_legend_carries_ece_and_the_stated_count() -> None:
    from aethersearch.report.charts import risk_label

    risk = {"aurc": 0.25, "signal": "stated", "ece": 0.4, "stated": {"stated": 3, "answered": 5}}
    assert risk_label("rl", risk) == "rl (AURC 0.250, stated, ECE 0.400, 3/5 stated)"
    assert risk_label("base", {"aurc": 0.5, "signal": "effort", "ece": None, "stated": None}) == \
        "base (AURC 0.500, effort)"
