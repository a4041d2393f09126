"""Accuracy against budget from one run: exhausted is never wrong, the run's own budget gives its score."""

from __future__ import annotations

from pathlib import Path

import pytest

from aethersearch.errors import ConfigError
from aethersearch.jsonl import atomic_write_json, write_jsonl
from aethersearch.records import Budget
from aethersearch.scoring.api import score_run
from tests.scoring.factory import eval_rows, eval_sha256, fingerprint, trace, write_release, write_run


def _run(path: Path, rows, spend: dict[str, int], correct: set[str], *, agent: str = "search-r1") -> Path:
    path.mkdir(parents=True)
    traces = [trace(r.id, r.question, r.answers[0] if r.id in correct else "wrong guess", tool_calls=spend[r.id])
              for r in rows]
    write_jsonl(path / "traces.jsonl", traces)
    atomic_write_json(path / "run.json", fingerprint(len(rows), agent=agent, budget=Budget(max_tool_calls=3),
                                                     release_data_sha256=eval_sha256(rows)))
    return path


def test_questions_that_spent_more_than_b_are_exhausted_never_wrong(tmp_path: Path) -> None:
    rows = eval_rows(2)  # 6 questions
    release = write_release(tmp_path / "release", rows)
    spend = {r.id: i % 4 for i, r in enumerate(rows)}  # 0,1,2,3,0,1
    correct = {rows[0].id, rows[2].id, rows[3].id}
    scores = score_run(_run(tmp_path / "run", rows, spend, correct), release, resamples=50, budget_curve=True)
    curve = scores.budget_curve
    assert curve is not None
    points = {p["budget"]: p for p in curve["axes"]["tool_calls"]["points"]}
    assert sorted(points) == [0, 1, 2, 3]
    assert (points[0]["correct"], points[0]["wrong"], points[0]["exhausted"]) == (1, 1, 4)
    assert (points[2]["correct"], points[2]["wrong"], points[2]["exhausted"]) == (2, 3, 1)
    assert points[3]["exhausted"] == 0
    assert all(p["not_answered"] == 0 for p in points.values())
    # at the run's own budget the curve is the run's score
    assert points[3]["em"]["mean"] == pytest.approx(scores.overall.micro.metrics["em"].mean)
    assert points[0]["em"]["mean"] == pytest.approx(1 / 6)


def test_an_agent_whose_prompt_states_its_budget_is_refused(tmp_path: Path) -> None:
    rows = eval_rows(1)
    release = write_release(tmp_path / "release", rows)
    run = _run(tmp_path / "run", rows, {r.id: 1 for r in rows}, set(), agent="evidenceloop")
    with pytest.raises(ConfigError, match="states its budget in its prompt"):
        score_run(run, release, resamples=10, budget_curve=True)
    assert score_run(run, release, resamples=10).budget_curve is None  # plain scoring is unaffected


def test_predictions_without_run_json_have_no_budget_to_truncate(tmp_path: Path) -> None:
    rows = eval_rows(1)
    release = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, set())
    (run / "run.json").unlink()
    with pytest.raises(ConfigError, match="needs the run's run.json"):
        score_run(run, release, resamples=10, budget_curve=True)


def test_a_question_that_ended_without_an_answer_within_the_budget_is_not_answered_never_wrong(tmp_path: Path) -> None:
    rows = eval_rows(1)  # 3 questions: right, wrong, ran out of turns having spent one tool call
    release = write_release(tmp_path / "release", rows)
    path = tmp_path / "run"
    path.mkdir()
    write_jsonl(path / "traces.jsonl", [trace(rows[0].id, rows[0].question, rows[0].answers[0]),
                                        trace(rows[1].id, rows[1].question, "wrong guess"),
                                        trace(rows[2].id, rows[2].question, None, outcome="budget")])
    atomic_write_json(path / "run.json", fingerprint(len(rows), agent="search-r1", budget=Budget(max_tool_calls=2),
                                                     release_data_sha256=eval_sha256(rows)))
    scores = score_run(path, release, resamples=20, budget_curve=True)
    assert scores.budget_curve is not None
    point = {p["budget"]: p for p in scores.budget_curve["axes"]["tool_calls"]["points"]}[1]
    assert (point["correct"], point["wrong"], point["not_answered"], point["exhausted"]) == (1, 1, 1, 0)
