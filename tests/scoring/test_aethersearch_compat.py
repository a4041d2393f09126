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
from aethersearch.scoring.aethersearch_compat import (
    AETHERSEARCH_COMMIT,
    EpisodeScore,
    aethersearch_summary,
    check_action,
    episode_score,
    set_token_f1,
)
from hypothesis import given, strategies as st

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
