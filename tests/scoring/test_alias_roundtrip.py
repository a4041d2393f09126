"""Property: any gold alias, used verbatim as the prediction, scores EM 1 through the whole run -> score path.

A scripted OpenAI-compatible server (real loopback HTTP) plays a Search-R1
policy that searches once and answers ``<answer> {alias} </answer>``; the real
runner writes the run directory (``run.json`` pins the release's eval sha256)
and the real scorer scores it against the release. Refusal-shaped golds
("Unknown", "I Can't Tell You Why", ...) are drawn on purpose: the agent labels
them ``abstained``, and the scorer must still count them as correct answers.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aethersearch.agents.scripted_server import ScriptedServer, search_r1_rule
from aethersearch.api import evaluate_run
from aethersearch.jsonl import read_jsonl
from aethersearch.records import EvalRow
from aethersearch.scoring.api import read_scores
from tests.compare.test_evaluate_watch import OnePageEnvironment
from tests.scoring.factory import write_release

REFUSAL_SHAPED = ["Unknown", "Don't Know Why", "I Can't Tell You Why", 'I Cannot Say "Farewell"', "I don't know",
                  "N/A", "Na", "Unknown Pleasures", "No", "none"]
# Any printable text a gold alias could hold, except the tag brackets a verbatim answer cannot contain.
ALIAS = st.one_of(
    st.sampled_from(REFUSAL_SHAPED),
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="<>"),
            min_size=1, max_size=40).filter(lambda s: s.strip()),
)

ANSWERS: dict[str, str] = {}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(search_r1_rule(lambda question: ANSWERS.get(question, "no idea"), searches=1)) as running:
        yield running


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(ALIAS, min_size=1, max_size=3), min_size=1, max_size=4), st.data())
def test_any_gold_alias_answered_verbatim_scores_em_1_from_run_to_score(server: ScriptedServer,
                                                                        alias_lists: list[list[str]],
                                                                        data: st.DataObject) -> None:
    rows, chosen = [], {}
    for number, aliases in enumerate(alias_lists, start=1):
        question = f"roundtrip question {number}?"
        rows.append(EvalRow(id=f"rt_{number:04d}", question=question, answers=aliases, source_dataset="nq",
                            source_split="dev", source_id=None, source_row_number=number, source_file="nq.jsonl"))
        chosen[question] = data.draw(st.sampled_from(aliases), label=f"alias for {question}")
    ANSWERS.clear()
    ANSWERS.update(chosen)
    with tempfile.TemporaryDirectory() as tmp:
        release = write_release(Path(tmp) / "release", rows)
        result = evaluate_run(server.url, release, model="scripted", run_dir=Path(tmp) / "run",
                              environment_factory=lambda q: OnePageEnvironment(), concurrency=2)
        traces = {t["id"]: t for t in read_jsonl(Path(tmp) / "run" / "traces.jsonl")}
        scores = read_scores(Path(tmp) / "run")
    assert scores == result.scores
    for row in scores.per_question:
        trace = traces[row.id]
        assert trace["prediction"] == chosen[trace["question_seen"]].strip()  # verbatim through the agent
        assert row.values["em"] == 1.0, (row, trace["outcome"])
        assert row.outcome == "answered"
    assert scores.overall.micro.metrics["em"].mean == 1.0
