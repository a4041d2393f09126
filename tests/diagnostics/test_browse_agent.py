"""LexicalBrowseAgent: follows relation-consistent links in the masked sandbox, reads the answer, or abstains."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aethersearch.agents.browse import (
    LexicalBrowseAgent,
    question_intent,
    read_statements,
)
from aethersearch.demo import SANDBOX_DEMO_BUDGET
from aethersearch.environment import ToolResult
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Decoding, Document, RolloutQuestion, ToolCall
from aethersearch.release_layout import release_layout
from aethersearch.text import normalize_answer


def test_reading_grammar_types_statements_about_the_page_only() -> None:
    page = Document(id="chad", title="Chad Corn", links=["kane_corn", "nia_corn", "gil_corn", "vel"],
                    text="Chad Corn was a sibling of Kane Corn. The stepmother of Chad Corn was Nia Corn. "
                         "Gil Corn married Nia Corn. Chad Corn lies in Vel. Chad Corn admired Gil Corn.")
    found = [(s.relation, s.link, s.span) for s in read_statements(page)]
    assert found == [("sibling", "kane_corn", "Kane Corn"), ("stepmother", "nia_corn", "Nia Corn"),
                     ("located_in", "vel", "Vel")]  # "Gil married Nia" is not about Chad; "admired" is no relation
    unlinked = page.model_copy(update={"links": []})
    assert read_statements(unlinked) == []  # an object must be a link of the page


def test_question_intents() -> None:
    assert question_intent("In which country is Velmor Bridge?") == "country"
    assert question_intent("Which country is Lumka Works based in?") == "country"
    assert question_intent("Who was Otny Ottinha's father?") == "father"
    assert question_intent("Who is the mother of Otny Ottinha?") == "mother"
    assert question_intent("Where did Amamar Thuhagal work?") is None


@pytest.fixture(scope="module")
def entailing_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A demo release constructed with the relation-chain validator, run with the browse agent in the sandbox."""
    from aethersearch.construct.chain_semantics import demo_chain_validator
    from aethersearch.construct.hintfree import ConstructionConfig, construct_hintfree
    from aethersearch.construct.release_writer import write_hintfree_release
    from aethersearch.construct.triples import demo_triples
    from aethersearch.construct.typed_facts import TypedGraph
    from aethersearch.construct.validate import RuleBasedValidator
    from aethersearch.corpus.demo_world import generate_world
    from aethersearch.corpus.graph import LinkGraph
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.diagnostics.probes import factorise_run, load_traces
    from aethersearch.rollout.fingerprint import build_fingerprint, release_info
    from aethersearch.rollout.runner import run_questions
    from aethersearch.sandbox.episode import open_sandbox
    from aethersearch.search.index_dir import build_index

    root = tmp_path_factory.mktemp("browse")
    world = generate_world(seed=0)
    triples = demo_triples(world)
    graph = LinkGraph.from_documents(world.documents)
    pages = {d.id: d for d in world.documents}
    config = ConstructionConfig(max_questions=60)
    result = construct_hintfree(triples.triples, graph, pages, config=config, page_aliases=triples.page_aliases,
                                validators=[RuleBasedValidator(pages), demo_chain_validator(world)],
                                typed=TypedGraph.from_edges(world.relations))
    release = write_hintfree_release(result, root / "release", name="webdetective_demo",
                                     source_dataset="webdetective-demo", config=config,
                                     corpus={"kind": "demo-world", "seed": 0}, graph=graph)
    store = import_corpus("demo", "demo", root / "corpus", seed=0).store
    index = build_index(store, "bm25", root / "index", config={"numba": False}).index
    sandbox = open_sandbox(release, index, store)
    questions = [RolloutQuestion(id=r["id"], question=r["question"])
                 for r in read_jsonl(release_layout(release).rollout)]
    agent = LexicalBrowseAgent()
    fingerprint = build_fingerprint(release_info(release), question_count=len(questions), agent=agent,
                                    budget=SANDBOX_DEMO_BUDGET, decoding=Decoding(), endpoint=None, model=None,
                                    corpus_hash=store.content_hash, index_hash=index.index_hash,
                                    environment="sandbox", retrieval_topk=agent.topk)
    run_questions(questions, agent, lambda q: sandbox.episode(q.id, run_id="t"), SANDBOX_DEMO_BUDGET, root / "run",
                  fingerprint, concurrency=4)
    return {"traces": load_traces(root / "run"), "factorised": factorise_run(root / "run", release, store=store),
            "gold": {r["id"]: r["answers"] for r in read_jsonl(release_layout(release).eval)},
            "diagnostics": {r["id"]: r for r in read_jsonl(release_layout(release).diagnostics)}}


def _correct(prediction: str | None, answers: list[str]) -> bool:
    return prediction is not None and normalize_answer(prediction) in {normalize_answer(a) for a in answers}


def test_browse_agent_solves_a_fair_share_of_entailing_sandbox_questions(entailing_run: dict[str, Any]) -> None:
    traces, gold, diagnostics = entailing_run["traces"], entailing_run["gold"], entailing_run["diagnostics"]
    correct = {qid for qid, t in traces.items() if t.outcome == "answered" and _correct(t.prediction, gold[qid])}
    failed = set(traces) - correct
    assert len(traces) == 60 and len(correct) >= 30 and failed  # a fair share, not everything
    for qid, trace in traces.items():
        calls = [c for s in trace.steps for c in s.tool_calls]
        assert {c.tool for c in calls} <= {"search", "visit"}  # only the sandbox tools
        visited = [c.returned_ids[0] for c in calls if c.tool == "visit" and not c.error and c.returned_ids]
        path = diagnostics[qid]["path"]
        if qid in correct:  # it read the answer on the last hop's page: the chain up to v(n-1) was walked
            assert set(path[:-1]) <= set(visited), (trace.question, path, visited)
        if question_intent(trace.question_seen) in ("father", "mother") and path[-1] in visited:
            # honest: the answer's page is opened only while exploring, never as a final formality
            assert visited[-1] != path[-1] or trace.outcome != "answered", (trace.question, visited)
    solved_by_hops = {h: g["pass_at_1"] for h, g in entailing_run["factorised"]["by_hops"].items()}
    assert set(solved_by_hops) == {"2", "3", "4"} and solved_by_hops["2"] > solved_by_hops["4"]


def test_factorised_metrics_show_distinct_failure_modes(entailing_run: dict[str, Any]) -> None:
    factorised = entailing_run["factorised"]
    overall = factorised["overall"]
    print({k: overall[k] for k in ("pass_at_1", "knowledge_sufficiency", "f1_good_refusal",
                                   "f1_knowledge_utilisation", "gen_score", "refusal_rate")})
    assert 0 < overall["knowledge_sufficiency"] < 1 and 0 < overall["refusal_rate"] < 1
    # guesses without the evidence (answering when it should refuse) pull F1_GR well below 1 ...
    assert 0 < overall["f1_good_refusal"] < 0.9
    # ... and refusals or misreadings with the whole chain served pull F1_KU below 1
    assert 0.5 < overall["f1_knowledge_utilisation"] < 1
    assert overall["gen_score"] < overall["knowledge_score"]


class _TwoPages:
    """A minimal environment with the sandbox's tool interface over two pages (records every call)."""

    def __init__(self, docs: list[Document]) -> None:
        self.docs = {d.id: d for d in docs}
        self.calls: list[str] = []

    async def search(self, query: str, k: int) -> ToolResult:
        self.calls.append("search")
        first = next(iter(self.docs.values()))
        return ToolResult([first], ToolCall(tool="search", arguments={"query": query}, returned_ids=[first.id]))

    async def visit(self, page: str) -> ToolResult:
        self.calls.append(f"visit:{page}")
        return ToolResult([self.docs[page]], ToolCall(tool="visit", arguments={"page": page}, returned_ids=[page]))

    async def close(self) -> None:
        return None


def _solve(env: _TwoPages, question: str) -> Any:
    from aethersearch.agents.base import Episode

    episode = Episode(question=RolloutQuestion(id="q", question=question), question_seen=question, env=env,
                      llm=None, decoding=Decoding())
    return asyncio.run(LexicalBrowseAgent().solve(episode))


def test_browse_agent_abstains_when_no_statement_answers_and_never_opens_the_answer_page() -> None:
    kane = Document(id="kane_corn", title="Kane Corn", links=["chad_corn"],
                    text="Kane Corn was a painter. Kane Corn and Chad Corn were raised together.")
    chad = Document(id="chad_corn", title="Chad Corn", links=["gil_corn"],
                    text="Chad Corn was a poet. The father of Chad Corn was Gil Corn.")
    gil = Document(id="gil_corn", title="Gil Corn", links=[], text="Gil Corn was a mason.")
    env = _TwoPages([kane, chad, gil])
    output = _solve(env, "Who is the father of Kane Corn?")
    assert output.outcome == "abstained" and output.prediction == "I don't know"
    assert env.calls == ["search", "visit:kane_corn"]  # "raised together" is not a sibling statement it reads
    readable = kane.model_copy(update={"text": "Kane Corn grew up with a sibling, Chad Corn."})
    env = _TwoPages([readable, chad, gil])
    output = _solve(env, "Who is the father of Kane Corn?")
    assert output.outcome == "answered" and output.prediction == "Gil Corn"
    # answered from Chad Corn's page, which states it; Gil Corn's page is not opened as a formality
    assert env.calls == ["search", "visit:kane_corn", "visit:chad_corn"]
