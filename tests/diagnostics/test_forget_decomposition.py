"""Forget probe on the 7-source benchmark: MuSiQue decompositions become stand-alone hop questions."""

from __future__ import annotations

import re

import pytest

from aethersearch.diagnostics.factorised import ANSWER_REQUIREMENT
from aethersearch.diagnostics.forget import decomposition_hops, hop_questions
from aethersearch.errors import DataError
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget, Decoding, DiagnosticsRow, RolloutQuestion


def _row(steps, pages=()) -> DiagnosticsRow:
    return DiagnosticsRow(id="m1", source_dataset="musique", decomposition=steps, supporting_pages=list(pages))


def test_references_to_earlier_answers_are_substituted_and_relations_phrased() -> None:
    row = _row([{"question": "Green >> performer", "answer": "Steve Hillage", "paragraph_support_idx": 3},
                {"question": "Who is the spouse of #1?", "answer": "Miquette Giraudy"}],
               pages=["Green (album)", "Steve Hillage"])
    hops = hop_questions(row)
    assert [h.question for h in hops] == ["What is the performer of Green?",
                                          "Who is the spouse of Steve Hillage?"]
    assert [h.answers for h in hops] == [("Steve Hillage",), ("Miquette Giraudy",)]
    assert hops[0].evidence == ("page:Green (album)",)
    assert hops[1].evidence == ("page:Steve Hillage", ANSWER_REQUIREMENT)  # the last hop is the answer
    assert [h.probe_id for h in hops] == ["m1#hop1", "m1#hop2"]


def test_step_titles_are_used_when_pages_are_not_one_per_step() -> None:
    row = _row([{"question": "Q1?", "answer": "A", "title": "Page A"}, {"question": "#1 >> country", "answer": "B"}])
    assert [h["evidence"] for h in decomposition_hops(row)] == [["page:Page A"], [ANSWER_REQUIREMENT]]
    assert decomposition_hops(row)[1]["question"] == "What is the country of A?"


@pytest.mark.parametrize("steps, needle", [
    ([{"question": "Who is #2?", "answer": "x"}, {"question": "q", "answer": "y"}], "refers to #2"),
    ([{"question": "q", "answer": None}], "decomposition[0] needs string"),
])
def test_bad_decompositions_name_the_row_and_step(steps, needle) -> None:
    with pytest.raises(DataError, match=re.escape(needle)) as info:
        hop_questions(_row(steps))
    assert "m1" in str(info.value)


def test_forget_probe_runs_on_a_seven_source_release_and_credits_parametric_pages(tmp_path) -> None:
    from aethersearch.agents.base import make_agent
    from aethersearch.agents.llm import OpenAIClient
    from aethersearch.corpus.store import open_store
    from aethersearch.demo import build_demo_inputs
    from aethersearch.diagnostics.probes import factorise_run, forget_probe
    from aethersearch.rollout.fingerprint import build_fingerprint, release_info
    from aethersearch.rollout.runner import NoEnvironment, run_questions
    from aethersearch.testing.scripted_server import Reply, ScriptedServer, question_of

    release, _ = build_demo_inputs(tmp_path / "demo")
    from aethersearch.release_layout import release_layout

    layout = release_layout(release)
    diagnostics = {r["id"]: r for r in read_jsonl(layout.diagnostics)}
    rows = {r["id"]: r for r in read_jsonl(layout.eval)}
    ids = sorted(i for i, d in diagnostics.items() if d["source_dataset"] == "musique" and d["decomposition"])[:2]
    assert len(ids) == 2
    questions = {rows[i]["question"]: i for i in ids}
    replies = {rows[ids[0]]["question"]: rows[ids[0]]["answers"][0], rows[ids[1]]["question"]: "Nobody"}
    for i in ids:  # every hop known in isolation
        for hop in hop_questions(DiagnosticsRow.model_validate(diagnostics[i])):
            replies[hop.question] = hop.answers[0]

    def rule(request):
        return Reply(f"<answer> {replies.get(question_of(request) or '', 'unknown')} </answer>")

    agent, budget = make_agent("direct"), Budget(max_tool_calls=0, max_turns=1)
    run_dir = tmp_path / "run"
    with ScriptedServer(rule) as server:
        llm = OpenAIClient(server.url, "scripted")
        fingerprint = build_fingerprint(release_info(release), question_count=len(rows), agent=agent,
                                        budget=budget, decoding=Decoding(), endpoint=server.url,
                                        model="scripted", corpus_hash=None, index_hash=None, environment="none")
        run_questions([RolloutQuestion(id=questions[q], question=q) for q in questions], agent,
                      lambda _q: NoEnvironment(), budget, run_dir, fingerprint, llm=llm)
        summary = forget_probe(run_dir, release, llm=OpenAIClient(server.url, "scripted"))
    assert summary["applicable"] and summary["n_hops"] == summary["n_known_in_isolation"] >= 4
    assert summary["forgotten"] and all(p.startswith(ids[1] + "#hop") for p in summary["forgotten"])
    assert summary["known_hop_forget_rate"] == pytest.approx(len(summary["forgotten"]) / summary["n_hops"])
    # the paper's rate is over sufficient-evidence failures, which need the corpus to judge: said, not faked
    assert summary["forget_rate"] is None and "--corpus" in summary["forget_rate_reason"]
    # no search at all, yet every requirement (pages + answer) is confirmed parametric
    result = factorise_run(run_dir, release, store=open_store(tmp_path / "demo" / "corpus"))
    assert result["overall"]["knowledge_sufficiency"] == 1.0 and result["overall"]["search_only_sufficiency"] == 0.0
    assert result["overall"]["search_score"] == 0.0  # held from memory alone: sufficient, never searched
    assert result["overall"]["pass_at_1"] == 0.5 and result["overall"]["f1_knowledge_utilisation"] == pytest.approx(2 * 1 / (2 + 2))
