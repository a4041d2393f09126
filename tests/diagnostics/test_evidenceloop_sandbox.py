"""EvidenceLoop end to end: runner + masked demo sandbox + scripted LLM server over loopback HTTP."""

from __future__ import annotations

from pathlib import Path

from aethersearch.agents.base import make_agent
from aethersearch.agents.llm import OpenAIClient
from aethersearch.diagnostics.probes import factorise_run, load_traces
from aethersearch.jsonl import write_jsonl
from aethersearch.records import Budget, Decoding, Outcome, RolloutQuestion
from aethersearch.rollout.fingerprint import build_fingerprint, release_info
from aethersearch.rollout.runner import run_questions
from aethersearch.testing.scripted_server import ScriptedServer
from tests.diagnostics.evidenceloop_rules import sandbox_path_rule


def _run(demo, tmp_path: Path, ids: list[str], budget: Budget, n_solvers: int = 2):
    titles = {qid: [demo.store.get(p).title for p in demo.diagnostics[qid]["path"]] for qid in ids}
    paths = {demo.questions[qid]: titles[qid] for qid in ids}
    answers = {demo.questions[qid]: demo.gold[qid][0] for qid in ids}
    agent = make_agent("evidenceloop", n_solvers=n_solvers, max_rounds=3, actions_per_round=3)
    questions = [RolloutQuestion(id=qid, question=demo.questions[qid]) for qid in ids]
    with ScriptedServer(sandbox_path_rule(paths, answers)) as server:
        llm = OpenAIClient(server.url, "scripted")
        fingerprint = build_fingerprint(release_info(demo.release), question_count=len(demo.questions),
                                        agent=agent, budget=budget, decoding=Decoding(), endpoint=server.url,
                                        model="scripted", corpus_hash=demo.store.content_hash,
                                        index_hash=demo.index.index_hash, environment="sandbox")
        summary = run_questions(questions, agent, lambda q: demo.sandbox.episode(q.id), budget,
                                tmp_path / "run", fingerprint, llm=llm, concurrency=4)
    return summary, load_traces(tmp_path / "run")


def test_evidenceloop_solves_masked_chains_with_eids_claims_and_verdicts(demo_sandbox, tmp_path: Path) -> None:
    ids = sorted(demo_sandbox.questions)[:3]
    summary, traces = _run(demo_sandbox, tmp_path, ids, Budget(max_tool_calls=24, max_turns=60))
    assert summary.outcomes == {"answered": 3}
    for qid in ids:
        trace = traces[qid]
        assert trace.agent == "evidenceloop" and trace.prediction == demo_sandbox.gold[qid][0]
        visited = [c.returned_ids[0] for s in trace.steps for c in s.tool_calls if c.tool == "visit" and not c.error]
        assert list(dict.fromkeys(visited)) == demo_sandbox.diagnostics[qid]["path"]  # first visits follow the chain
        assert any(c.tool == "search" for s in trace.steps for c in s.tool_calls)
        verifier = [s for s in trace.steps if s.agent == "verifier"][-1]
        assert verifier.notes["accepted"] and verifier.notes["verdicts"][0]["verdict"] == "entailed"
        eid = verifier.notes["verdicts"][0]["eid"]
        aggregator = [s for s in trace.steps if s.agent == "aggregator"][-1]
        assert aggregator.notes["eid_docs"][eid] in demo_sandbox.diagnostics[qid]["path"]
        assert trace.usage.tool_calls <= 24
    # the traces feed the factorised metrics: every chain page visited and answered correctly
    result = factorise_run(tmp_path / "run", demo_sandbox.release, store=demo_sandbox.store)
    assert result["n"] == 3 and result["overall"]["knowledge_sufficiency"] == 1.0
    assert len(result["missing"]) == len(demo_sandbox.questions) - 3  # a partial run: listed, not hidden
    assert result["overall"]["pass_at_1"] == 1.0 and result["overall"]["gen_score"] == 1.0
    assert (tmp_path / "run" / "factorised.json").is_file()


def test_shared_budget_holds_across_parallel_solvers_in_the_sandbox(demo_sandbox, tmp_path: Path) -> None:
    qid = min(demo_sandbox.questions)
    _summary, traces = _run(demo_sandbox, tmp_path, [qid], Budget(max_tool_calls=3, max_turns=60), n_solvers=3)
    trace = traces[qid]
    calls = [c for s in trace.steps for c in s.tool_calls]
    assert len(calls) == trace.usage.tool_calls == 3  # three solvers, one budget of three calls
    assert any(s.notes.get("budget") == "tool_calls" for s in trace.steps)
    assert trace.outcome is Outcome.ABSTAINED  # the chain was not finished within the budget
    write_jsonl(tmp_path / "copy.jsonl", [trace])  # the trace stays a valid record on disk
