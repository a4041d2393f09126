"""Scoring a run of K samples per question: mean@K, pass@1..K, maj@K and c of K in scores.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aethersearch.errors import DataError
from aethersearch.jsonl import read_jsonl, write_jsonl
from aethersearch.scoring.api import read_scores, score_run
from aethersearch.scoring.reducers import pass_at_k
from tests.scoring.factory import eval_rows, write_release, write_sampled_run

K = 3


def _answer(row, k: int) -> str | None:
    """Question number i: i % 4 of the 3 samples right, except i % 4 == 3: none right, a 2-1 wrong majority."""
    number = int(row.id.split("_")[1])
    right = number % 4
    if right == 3:
        return ["wrong a", "wrong a", "wrong b"][k]
    return row.answers[0] if k < right else ("wrong" if k % 2 else None)


def test_a_three_sample_run_scores_mean_pass_and_maj_at_k(tmp_path: Path) -> None:
    rows = eval_rows(4)
    release = write_release(tmp_path / "release", rows)
    run = write_sampled_run(tmp_path / "run", rows, K, _answer)
    scores = score_run(run, release)
    assert scores.samples == K and scores.question_count == len(rows)
    micro = scores.overall.micro
    assert set(micro.reducers["em"]) == {"mean@3", "pass@1", "pass@2", "pass@3", "maj@3"}
    assert set(micro.reducers["f1"]) == {"mean@3", "maj@3"}  # no pass@k for a continuous metric
    correct = [right if (right := int(r.id.split("_")[1]) % 4) < 3 else 0 for r in rows]
    assert [q.correct["em"] for q in scores.per_question] == correct
    assert micro.metrics["em"].mean == pytest.approx(sum(correct) / (K * len(rows)))  # the metric is mean@K
    assert micro.reducers["em"]["mean@3"] == micro.metrics["em"]
    for k in (1, 2, 3):
        expected = sum(pass_at_k(K, c, k) for c in correct) / len(rows)
        assert micro.reducers["em"][f"pass@{k}"].mean == pytest.approx(expected)
    # maj@3: 2 right -> right wins; 1 right -> right/"wrong"/None tie 1-1-1, the first vote (right) wins;
    # 0 right -> None/"wrong"/None: "no answer" wins and scores 0
    majority = [1.0 if c >= 1 else 0.0 for c in correct]
    assert micro.reducers["em"]["maj@3"].mean == pytest.approx(sum(majority) / len(rows))
    first = scores.per_question[2]  # eval_0003: 0 right, majority "wrong a" (2 of 3 votes)
    assert (first.prediction, first.majority_sample, first.k) == ("wrong a", 0, 3)
    assert [s.sample for s in first.samples] == [0, 1, 2]
    assert 0.0 <= micro.variance["em"].share <= 1.0
    assert scores.outcomes["answered"] + scores.outcomes["no_answer_tag"] == K * len(rows)  # rollouts counted
    raw = json.loads((run / "scores.json").read_text())
    assert {"pass@1", "pass@2", "pass@3", "mean@3", "maj@3"} <= set(raw["by_source"]["nq"]["reducers"]["em"])
    assert read_scores(run).per_question == scores.per_question  # the per-question file reads back
    pass2 = read_scores(run).per_question_values("em", "pass@2")
    assert pass2["eval_0002"][1] == pytest.approx(pass_at_k(3, 2, 2))


def test_a_missing_sample_is_named_and_counted_and_scores_zero(tmp_path: Path) -> None:
    rows = eval_rows(2)
    release = write_release(tmp_path / "release", rows)
    run = write_sampled_run(tmp_path / "run", rows, K, lambda row, k: row.answers[0])
    traces = [t for t in read_jsonl(run / "traces.jsonl") if (t["id"], t["sample"]) != ("eval_0002", 1)]
    write_jsonl(run / "traces.jsonl", traces)
    scores = score_run(run, release)
    assert scores.join.missing == ["eval_0002#1"] and scores.errors.missing == 1
    row = next(q for q in scores.per_question if q.id == "eval_0002")
    assert row.correct["em"] == 2 and not row.present
    assert row.values["em"] == pytest.approx(2 / 3)


def test_a_sample_beyond_the_runs_k_is_refused_with_its_line(tmp_path: Path) -> None:
    rows = eval_rows(1)
    release = write_release(tmp_path / "release", rows)
    run = write_sampled_run(tmp_path / "run", rows, K, lambda row, k: row.answers[0])
    traces = read_jsonl(run / "traces.jsonl")
    write_jsonl(run / "traces.jsonl", [*traces, {**traces[0], "sample": 3}])
    with pytest.raises(DataError, match="sample 3 but run.json says 3") as caught:
        score_run(run, release)
    assert caught.value.line == len(traces) + 1
