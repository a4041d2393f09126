"""score_run: the join rules, the release-sized denominator, labelled aggregates and scores.json."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.errors import DataError, IntegrityError
from aethersearch.jsonl import read_jsonl, write_jsonl
from aethersearch.scoring.aggregate import estimate
from aethersearch.scoring.api import read_scores, score_run
from tests.scoring.factory import eval_rows, write_release, write_run

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def release(tmp_path: Path) -> tuple[Path, list]:
    rows = eval_rows(8)
    return write_release(tmp_path / "release", rows), rows


def test_denominator_is_release_size_and_missing_questions_score_zero(tmp_path: Path, release) -> None:
    release_dir, rows = release
    correct = {r.id for r in rows}  # every answered question is right ...
    skip = {rows[0].id, rows[1].id, rows[2].id}  # ... but three never ran
    run = write_run(tmp_path / "run", rows, correct, skip=skip)
    scores = score_run(run, release_dir)
    assert scores.denominator == len(rows) == 24
    assert scores.join.missing == sorted(skip)
    assert scores.outcomes["missing"] == 3
    assert scores.overall.micro.metrics["em"].mean == pytest.approx(21 / 24)
    assert scores.by_source["nq"].metrics["em"].mean == pytest.approx(5 / 8)
    assert read_scores(run) == scores
    assert "per_question" not in json.loads((run / "scores.json").read_text())
    (run / "scores_questions.jsonl").write_text("")
    with pytest.raises(IntegrityError, match="sha256"):
        read_scores(run)


def test_micro_and_macro_are_both_reported_and_labelled(tmp_path: Path) -> None:
    rows = eval_rows(8)[:8] + eval_rows(8)[8:10]  # nq: 8 questions, hotpotqa: 2
    release_dir = write_release(tmp_path / "release", rows)
    correct = {r.id for r in rows if r.source_dataset == "hotpotqa"}
    scores = score_run(write_run(tmp_path / "run", rows, correct), release_dir)
    overall = scores.overall
    assert overall.micro.metrics["em"].mean == pytest.approx(2 / 10)
    assert overall.macro.metrics["em"].mean == pytest.approx((0.0 + 1.0) / 2)
    assert "micro" in overall.micro.label and "macro" in overall.macro.label


def test_outcomes_and_usage_are_broken_down(tmp_path: Path, release) -> None:
    release_dir, rows = release
    outcomes = {rows[0].id: "budget", rows[1].id: "endpoint_error", rows[2].id: "no_answer_tag"}
    scores = score_run(write_run(tmp_path / "run", rows, {r.id for r in rows}, outcomes=outcomes), release_dir)
    assert scores.outcomes["budget"] == 1
    assert scores.outcomes["endpoint_error"] == 1
    assert scores.outcomes["no_answer_tag"] == 1
    assert scores.outcomes["answered"] == 21
    # a budget/endpoint/no-tag question is not counted as a wrong *answer*, but scores 0 against the release
    assert scores.overall.micro.metrics["em"].mean == pytest.approx(21 / 24)
    assert scores.usage.tool_calls.total == 24
    assert scores.by_source["nq"].usage.prompt_tokens.mean == 100


def test_duplicates_and_unknown_ids_are_reported(tmp_path: Path, release) -> None:
    release_dir, rows = release
    run = write_run(tmp_path / "run", rows, set())
    traces = read_jsonl(run / "traces.jsonl")
    extra = dict(traces[0], id="not_in_release")
    write_jsonl(run / "traces.jsonl", [*traces, traces[3], extra])
    scores = score_run(run, release_dir)
    assert scores.join.duplicates == [rows[3].id]
    assert scores.join.unknown == ["not_in_release"]
    assert scores.denominator == 24


def test_conflicting_duplicate_is_an_error_naming_file_line_and_id(tmp_path: Path, release) -> None:
    release_dir, rows = release
    run = write_run(tmp_path / "run", rows, set())
    traces = read_jsonl(run / "traces.jsonl")
    conflicting = dict(traces[3], response="<answer>something else</answer>")
    write_jsonl(run / "traces.jsonl", [*traces, conflicting])
    with pytest.raises(DataError, match=rf"traces.jsonl:25.*{rows[3].id}.*conflicting") as info:
        score_run(run, release_dir)
    assert info.value.fix


def test_retried_attempts_are_resolved_to_the_latest_not_flagged_as_conflicts(tmp_path: Path, release) -> None:
    release_dir, rows = release
    run = write_run(tmp_path / "run", rows, {r.id for r in rows})
    traces = read_jsonl(run / "traces.jsonl")
    failed = dict(traces[4], response="", prediction=None, outcome="endpoint_error", stop_reason="endpoint_error")
    retry = dict(traces[4], attempt=2)
    # the runner logs the failed attempt, then the successful retry, in that order
    write_jsonl(run / "traces.jsonl", [*traces[:4], failed, *traces[5:], retry])
    scores = score_run(run, release_dir)
    assert scores.join.retried == [rows[4].id]
    assert scores.join.duplicates == []
    assert scores.per_question[4].outcome == "answered" and scores.per_question[4].values["em"] == 1.0


def test_predictions_file_is_scored_when_there_are_no_traces(tmp_path: Path, release) -> None:
    release_dir, rows = release
    run = tmp_path / "preds"
    run.mkdir()
    write_jsonl(run / "predictions.jsonl", [
        {"id": rows[0].id, "prediction": rows[0].answers[1].upper(), "outcome": "answered"},
        {"id": rows[1].id, "prediction": None, "outcome": "budget"},
    ])
    scores = score_run(run, release_dir)
    assert scores.per_question[0].values["em"] == 1.0
    assert scores.per_question[1].outcome == "budget"
    assert scores.join.missing == [r.id for r in rows[2:]]
    assert scores.fingerprint is None


def test_bad_prediction_row_names_file_and_line(tmp_path: Path, release) -> None:
    release_dir, _ = release
    run = tmp_path / "bad"
    run.mkdir()
    (run / "predictions.jsonl").write_text('{"id": "eval_0001", "prediction": "x", "outcome": "answered"}\n'
                                           '{"id": "eval_0002", "prediction": "x", "outcome": "guessed"}\n')
    with pytest.raises(DataError, match=r"predictions.jsonl:2 \(field 'outcome'\)"):
        score_run(run, release_dir)


def test_run_for_another_release_is_refused(tmp_path: Path, release) -> None:
    release_dir, rows = release
    run = write_run(tmp_path / "run", rows, set(), fp_changes={"release_id": "other-release"})
    with pytest.raises(IntegrityError, match="other-release"):
        score_run(run, release_dir)


def test_compat_searchr1_reproduces_the_prompt_example_quirk(tmp_path: Path) -> None:
    rows = [r.model_copy(update={"answers": ["Beijing"]}) for r in eval_rows(2)]
    release_dir = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, set(), outcomes={r.id: "no_answer_tag" for r in rows})
    assert score_run(run, release_dir).overall.micro.metrics["em"].mean == 0.0
    compat = score_run(run, release_dir, compat="searchr1")
    assert compat.overall.micro.metrics["em"].mean == 1.0
    assert compat.outcomes["no_answer_tag"] == len(rows)
    assert compat.compat == "searchr1"


def test_scores_are_invariant_to_prediction_order(tmp_path: Path, release) -> None:
    release_dir, rows = release
    correct = {r.id for i, r in enumerate(rows) if i % 3}
    run = write_run(tmp_path / "run", rows, correct)
    first = score_run(run, release_dir)
    traces = read_jsonl(run / "traces.jsonl")
    random.Random(7).shuffle(traces)
    write_jsonl(run / "traces.jsonl", traces)
    second = score_run(run, release_dir)
    # only the traces file's own hash (recorded in the gold binding) may differ
    assert first.gold.run_file_sha256 != second.gold.run_file_sha256
    assert first.model_dump(exclude={"gold"}) == second.model_dump(exclude={"gold"})
    assert first.per_question == second.per_question


def test_scores_are_invariant_to_pythonhashseed(tmp_path: Path, release) -> None:
    release_dir, rows = release
    run = write_run(tmp_path / "run", rows, {r.id for i, r in enumerate(rows) if i % 2})
    script = ("import sys; from pathlib import Path; from aethersearch.scoring.api import read_scores, score_run; "
              "score_run(Path(sys.argv[1]), Path(sys.argv[2])); "
              "import json; sys.stdout.write(json.dumps([(Path(sys.argv[1]) / name).read_text() "
              "for name in ('scores.json', 'scores_questions.jsonl')]))")
    outputs = []
    for seed in ("1", "4242"):
        done = subprocess.run([sys.executable, "-c", script, str(run), str(release_dir)], capture_output=True,
                              text=True, check=True, env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin",
                                   "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
                              cwd=REPO)
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]
    summary, questions = json.loads(outputs[0])
    assert json.loads(summary)["overall"]["micro"]["metrics"]["em"]["mean"] == pytest.approx(0.5)
    assert len(questions.splitlines()) == len(rows)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0, allow_nan=False), min_size=1, max_size=60),
       st.integers(min_value=0, max_value=2**31))
def test_bootstrap_ci_contains_the_point_estimate(values: list[float], seed: int) -> None:
    got = estimate(values, resamples=300, seed=seed)
    assert got.ci_low <= got.mean <= got.ci_high


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=200), st.integers(0, 1000))
def test_bootstrap_ci_contains_the_point_estimate_for_binary_metrics(values: list[float], seed: int) -> None:
    got = estimate(values, resamples=300, seed=seed)
    assert got.ci_low <= got.mean <= got.ci_high


def test_rescoring_reads_the_run_without_changing_it(tmp_path: Path, release) -> None:
    release_dir, rows = release
    run = write_run(tmp_path / "run", rows, {rows[0].id})
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    score_run(run, release_dir)
    score_run(run, release_dir, compat="searchr1")
    after = {p.name: p.read_bytes() for p in run.iterdir()
             if p.name not in ("scores.json", "scores_questions.jsonl")}
    assert after == before


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["nq", "hotpotqa", "popqa"]), st.sampled_from([0.0, 1.0]),
                          st.sampled_from([0.0, 0.25, 0.5, 1.0])), min_size=1, max_size=40),
       st.randoms(use_true_random=False))
def test_aggregate_is_invariant_to_row_order(items, shuffler) -> None:
    from aethersearch.scoring.aggregate import aggregate

    rows = [{"id": f"q{i:03d}", "source": s, "outcome": "answered", "em": e, "f1": f, "usage": None}
            for i, (s, e, f) in enumerate(items)]
    shuffled = list(rows)
    shuffler.shuffle(shuffled)
    assert aggregate(rows, ["em", "f1"], resamples=200) == aggregate(shuffled, ["em", "f1"], resamples=200)


def _with_budget_stops(run: Path, forced_right: str, forced_wrong: str, unanswered: str) -> None:
    """Rewrite three traces as the runner writes budget stops: two forced final answers and one without."""
    traces = read_jsonl(run / "traces.jsonl")
    for trace in traces:
        if trace["id"] in (forced_right, forced_wrong, unanswered):
            trace["stop_reason"] = "budget"
        if trace["id"] == unanswered:
            trace.update(outcome="no_answer_tag", prediction=None,
                         response=trace["response"].split("<think>done")[0])
    write_jsonl(run / "traces.jsonl", traces)


def test_answers_forced_by_budget_exhaustion_score_and_are_counted_separately(tmp_path: Path, release) -> None:
    release_dir, rows = release
    nq = [r for r in rows if r.source_dataset == "nq"]
    right = {r.id for r in rows} - {nq[1].id}
    run = write_run(tmp_path / "run", rows, right)
    _with_budget_stops(run, nq[0].id, nq[1].id, nq[2].id)
    scores = score_run(run, release_dir)
    # the forced final answer is an answer: outcome answered, scored like any other
    assert scores.outcomes["answered"] == 23 and scores.outcomes["no_answer_tag"] == 1
    assert scores.overall.micro.metrics["em"].mean == pytest.approx(22 / 24)
    # ... but the budget block says how many answers were forced and how good they were
    budget = scores.budget
    assert budget.exhausted == 3
    assert budget.by_outcome == {"answered": 2, "no_answer_tag": 1}
    assert budget.answered_after_budget == 2
    assert budget.answered_after_budget_em == pytest.approx(0.5)
    assert budget.stop_reasons == {"answer": 21, "budget": 3}
    assert scores.by_source["nq"].budget.exhausted == 3
    assert scores.by_source["hotpotqa"].budget.exhausted == 0
    per_q = {row.id: row for row in read_scores(run).per_question}
    assert per_q[nq[0].id].stop_reason == "budget" and per_q[nq[0].id].values["em"] == 1.0


def test_budget_outcome_counts_as_hitting_the_budget_and_predictions_runs_have_no_stop_reason(
        tmp_path: Path, release) -> None:
    release_dir, rows = release
    run = write_run(tmp_path / "run", rows, {r.id for r in rows}, outcomes={rows[0].id: "budget"},
                    skip={rows[1].id})
    budget = score_run(run, release_dir).budget
    assert budget.exhausted == 1 and budget.by_outcome == {"budget": 1}
    assert budget.answered_after_budget == 0 and budget.answered_after_budget_em is None
    assert sum(budget.stop_reasons.values()) == 23  # the missing question has no stop reason
    preds = tmp_path / "preds"
    preds.mkdir()
    write_jsonl(preds / "predictions.jsonl", [{"id": r.id, "prediction": r.answers[0], "outcome": "answered"}
                                              for r in rows])
    assert score_run(preds, release_dir).budget.stop_reasons == {"unrecorded": 24}
