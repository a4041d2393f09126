"""``--compat aethersearch`` agrees with AetherSearch's own scorer on every recorded case.

The fixture was recorded by running their ``score_trajectory_outcome`` and
``_aggregate`` (commit in the file) on 112 real Search-R1 test golds (7 sources)
× the answer and protocol kinds of :mod:`tests.scoring.aethersearch_kinds`.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aethersearch.agents.aethersearch_protocol import check_action
from aethersearch.scoring.aethersearch_compat import (
    AETHERSEARCH_COMMIT,
    EpisodeScore,
    aethersearch_summary,
    episode_score,
    set_token_f1,
)
from tests.scoring.aethersearch_kinds import ANSWER_KINDS, PROTOCOL_KINDS

FIXTURE = Path(__file__).parent / "fixtures" / "aethersearch_parity.json.gz"


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    return data


def test_fixture_is_theirs_at_the_documented_commit(recorded: dict[str, Any]) -> None:
    assert recorded["their_commit"] == AETHERSEARCH_COMMIT
    kinds = {case["kind"] for case in recorded["cases"]}
    assert kinds == set(ANSWER_KINDS) | set(PROTOCOL_KINDS)
    assert len(ANSWER_KINDS) >= 30 and len(PROTOCOL_KINDS) >= 25
    assert len({case["source"] for case in recorded["cases"]}) == 7


def _ours(case: dict[str, Any]) -> EpisodeScore:
    return episode_score(case["actions"], case["golds"], source=case["source"])


def test_every_case_matches_their_scorer(recorded: dict[str, Any]) -> None:
    """R_task, F_ans, terminal validity, answer, first error and searches, for every gold x kind."""
    disagreements: dict[str, int] = {}
    for case in recorded["cases"]:
        ours = _ours(case)
        mine = (ours.r_task, ours.format_indicator, ours.terminal_answer_valid, ours.answer, ours.first_error,
                list(ours.queries))
        theirs = (case["r_task"], case["format"], case["terminal"], case["answer"], case["error"], case["searches"])
        if mine != theirs:
            disagreements[case["kind"]] = disagreements.get(case["kind"], 0) + 1
    assert disagreements == {}


def test_parity_table_is_not_trivial(recorded: dict[str, Any]) -> None:
    """The table exercises zeros, partial credit, full credit and their -2.0 format penalty."""
    values = {case["r_task"] for case in recorded["cases"]}
    assert {0.0, 1.0, -2.0} <= values
    assert any(0.0 < value < 1.0 for value in values)
    errors = {case["error"] for case in recorded["cases"]}
    assert len(errors) >= 10


def test_aggregate_matches_theirs(recorded: dict[str, Any]) -> None:
    rows = [(case["source"], _ours(case)) for case in recorded["cases"]]
    summary = aethersearch_summary(rows)
    for theirs in recorded["aggregate"]:
        mine = summary[theirs["domain"]]
        for key, value in theirs.items():
            if key != "domain":
                assert mine[key] == pytest.approx(value, abs=1e-12), (theirs["domain"], key)
    sources = [s for s in summary if not s.startswith("overall")]
    assert summary["overall_macro"]["f1"] == pytest.approx(sum(summary[s]["f1"] for s in sources) / len(sources))


def test_articles_are_kept_and_tokens_are_a_set() -> None:
    assert set_token_f1("the Paris", ["Paris"]) == pytest.approx(2 / 3)
    assert set_token_f1("paris paris", ["Paris"]) == 1.0


def test_invalid_tool_text_is_named() -> None:
    assert check_action("<answer>x</answer><answer>y</answer>").error == "duplicate_action_tags"
    assert check_action("<search>q</search>").kind == "search"


@given(st.text(max_size=40))
def test_a_valid_answer_scores_within_their_range(text: str) -> None:
    score = episode_score([f"<answer>{text}</answer>"], ["Paris"])
    assert score.r_task in (-2.0,) or 0.0 <= score.r_task <= 1.0
    assert score.exact == (score.r_task == 1.0)


def _step(index: int, text: str, *, query: str | None = None, **notes: Any) -> dict[str, Any]:
    step: dict[str, Any] = {"index": index, "llm": {"text": text}, "notes": notes}
    if query is not None:
        step["tool_calls"] = [{"tool": "search", "arguments": {"query": query}}]
    return step


def test_score_run_compat_aethersearch_scores_each_step_text(tmp_path: Path) -> None:
    """Stop strings the server removed count as written; tool errors void R_task; their keys land in scores.json."""
    from aethersearch.jsonl import write_jsonl
    from aethersearch.scoring.api import read_scores, score_run
    from tests.scoring.factory import eval_rows, write_release, write_run

    rows = eval_rows(2)
    release_dir = write_release(tmp_path / "release", rows)
    run = write_run(tmp_path / "run", rows, set())
    gold = {row.id: row.answers[0] for row in rows}
    ids = [row.id for row in rows]
    traces = [
        # server stopped at </search> and removed it: restored, so the search is valid
        {"steps": [_step(0, "<think>a</think><search>who", query="who", stop_restored="</search>"),
                   _step(1, f"<answer>{gold[ids[0]]}</answer>")]},
        # text after </answer>: invalid under their parser
        {"steps": [_step(0, f"<answer>{gold[ids[1]]}</answer> done")]},
        # right answer but the retrieval failed: their system_valid is False
        {"steps": [_step(0, f"<answer>{gold[ids[2]]}</answer>")], "outcome": "tool_error"},
        # an invalid action before a valid final answer does not void the answer in their scorer
        {"steps": [_step(0, "hmm"), _step(1, f"<answer>{gold[ids[3]]}</answer>")]},
    ]
    lines = []
    for qid, extra in zip(ids, traces, strict=False):
        lines.append({"id": qid, "question_seen": "q?", "agent": "aethersearch", "response": "",
                      "outcome": extra.get("outcome", "answered"), "stop_reason": "answer", "steps": extra["steps"]})
    for qid in ids[len(traces):]:
        lines.append({"id": qid, "question_seen": "q?", "agent": "aethersearch", "response": "",
                      "outcome": "no_answer_tag", "stop_reason": "invalid", "steps": []})
    write_jsonl(run / "traces.jsonl", lines)
    scores = score_run(run, release_dir, compat="aethersearch", resamples=10)
    values = {q.id: q.values for q in scores.per_question}
    assert [values[qid]["aethersearch_f1"] for qid in ids[:4]] == [1.0, 0.0, 0.0, 1.0]
    assert scores.aethersearch is not None
    overall = scores.aethersearch["overall"]
    assert overall["count"] == len(rows)
    assert overall["f1"] == pytest.approx(2 / len(rows))
    assert overall["avg_search"] == pytest.approx(1 / len(rows))
    assert read_scores(run).aethersearch == scores.aethersearch
    assert "aethersearch_exact" in scores.metrics
