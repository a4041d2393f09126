"""Forget, Lead-astray and distractor computations, and the probes' environments, on hand-built inputs."""

from __future__ import annotations

import asyncio

import pytest

from aethersearch.diagnostics.distractors import (
    NoisyEnvironment,
    distractor_count,
    distractor_summary,
)
from aethersearch.diagnostics.factorised import EpisodeEvidence
from aethersearch.diagnostics.forget import (
    agent_text,
    failure_hop,
    forget_over_failures,
    forget_summary,
    hop_questions,
    probe_questions,
    rollout_rows,
)
from aethersearch.environment import ToolResult
from aethersearch.errors import ConfigError, DataError
from aethersearch.records import DiagnosticsRow, Document, Outcome, ToolCall
from aethersearch.sandbox.episode import DictStore

ROW = DiagnosticsRow(
    id="q1", source_dataset="hintfree", path=["a", "b", "c"], hops=2, evidence=["b", "c"],
    hop_questions=[{"question": "Who is the brother of A?", "answer": "B"},
                   {"question": "Who is married to B?", "answers": ["C", "Cee"], "page": "b"}])


def test_hop_questions_carry_answers_and_evidence_pages() -> None:
    hops = hop_questions(ROW)
    assert [(h.probe_id, h.answers, h.evidence) for h in hops] == [
        ("q1#hop1", ("B",), ("a",)),  # no page key: the chain's i-th evidence item (the page stating hop i)
        ("q1#hop2", ("C", "Cee"), ("b",))]
    assert [r.model_dump() for r in rollout_rows(hops)] == [
        {"id": "q1#hop1", "question": "Who is the brother of A?"},
        {"id": "q1#hop2", "question": "Who is married to B?"}]
    assert rollout_rows(hops)[0].model_fields_set == {"id", "question"}  # nothing of gold leaks


def test_malformed_hop_question_names_the_row() -> None:
    bad = ROW.model_copy(update={"hop_questions": [{"text": "?"}]})
    with pytest.raises(DataError, match=r"q1.*hop_questions\[0\]"):
        probe_questions([bad])


def test_forget_counts_known_facts_lost_in_context_at_their_hop() -> None:
    other = ROW.model_copy(update={"id": "q2"})
    hops = probe_questions([ROW, other])
    isolated = {"q1#hop1": "B", "q1#hop2": "the Cee", "q2#hop1": "B", "q2#hop2": "wrong"}
    result = forget_summary(hops, isolated, {"q1": False, "q2": True}, failed_at={"q1": 2})
    s = result.summary
    assert s["n_hops"] == 4 and s["n_known_in_isolation"] == 3
    assert s["forgotten"] == ["q1#hop2"]  # q1 failed at hop 2: hop 1 was not what it lost
    assert s["known_hop_forget_rate"] == pytest.approx(1 / 3)
    assert s["question_forget_rate"] == pytest.approx(1 / 2)
    assert result.parametric == {"q1": frozenset({"a", "b"}), "q2": frozenset({"a"})}


def test_a_model_that_never_knew_a_hop_has_not_forgotten_the_others() -> None:
    # the model never knew hop 1; the full run got stuck there (never reached B), so its knowledge of hop 2
    # was never put to the test: nothing is forgotten (the old rule blamed hop 2 for the wrong answer)
    hops = probe_questions([ROW])
    failed = failure_hop(hops, frozenset(), "search: who is the brother of A\n<answer> Zed </answer>")
    assert failed == 1
    result = forget_summary(hops, {"q1#hop1": "Zed", "q1#hop2": "C"}, {"q1": False}, failed_at={"q1": failed})
    assert result.summary["n_known_in_isolation"] == 1 and result.summary["forgotten"] == []
    assert result.summary["known_hop_forget_rate"] == 0.0 and result.summary["failed_at"] == {"q1": 1}
    # knowing hop 1 too, and failing at it in context, is forgetting hop 1
    again = forget_summary(hops, {"q1#hop1": "B", "q1#hop2": "C"}, {"q1": False}, failed_at={"q1": 1})
    assert again.summary["forgotten"] == ["q1#hop1"]


def test_failure_hop_is_the_first_hop_never_reached() -> None:
    hops = probe_questions([ROW])
    assert failure_hop(hops, frozenset({"a"}), "") == 2  # hop 1 served, hop 2 neither served nor named
    assert failure_hop(hops, frozenset(), "I think B is involved") == 2  # hop 1 reached by naming B
    assert failure_hop(hops, frozenset({"a", "b"}), "<answer> wrong </answer>") == 2  # had all: last hop
    assert failure_hop([], frozenset(), "") is None


def test_isolated_judge_verdicts_override_exact_match() -> None:
    hops = probe_questions([ROW])
    result = forget_summary(hops, {"q1#hop1": "Bee?", "q1#hop2": "C"}, {"q1": False}, failed_at={"q1": 1},
                            isolated_correct={"q1#hop1": True, "q1#hop2": False})
    assert result.summary["forgotten"] == ["q1#hop1"] and result.summary["n_known_in_isolation"] == 1


def test_agent_text_reads_queries_reasoning_and_answer() -> None:
    from aethersearch.records import LLMCall, Step, Trace

    t = Trace(id="q1", question_seen="?", agent="a", response="<answer> Zed </answer>", prediction="Zed",
              outcome=Outcome.ANSWERED, stop_reason="answer",
              steps=[Step(index=0, llm=LLMCall(text="maybe Cee"),
                          tool_calls=[ToolCall(tool="search", arguments={"query": "B spouse", "_noise": {"x": 1}})])])
    text = agent_text(t)
    assert "maybe Cee" in text and "B spouse" in text and "Zed" in text and "_noise" not in text


def test_forget_with_nothing_known_is_undefined_not_zero() -> None:
    result = forget_summary(probe_questions([ROW]), {}, {"q1": False}, failed_at={"q1": 1})
    assert result.summary["known_hop_forget_rate"] is None and result.summary["n_known_in_isolation"] == 0
    assert forget_summary(probe_questions([ROW]), {}, {}, failed_at={}).summary["n_hops"] == 0  # q1 not run


def _ep(qid: str, correct: bool, gathered: set[str]) -> EpisodeEvidence:
    return EpisodeEvidence(qid, "s", 2, ("b", "c"), frozenset(gathered), frozenset(),
                           Outcome.ANSWERED, correct, gathered == {"b", "c"})


def test_distractor_rate_only_counts_still_accessible_evidence() -> None:
    clean = {"x": _ep("x", True, {"b", "c"}), "y": _ep("y", True, {"b", "c"}),
             "z": _ep("z", True, {"b", "c"}), "w": _ep("w", False, {"b", "c"})}
    noisy = {"x": _ep("x", False, {"b", "c"}),  # led astray
             "y": _ep("y", True, {"b", "c"}),   # robust
             "z": _ep("z", False, {"b"}),       # lost evidence: not lead-astray
             "w": _ep("w", False, {"b", "c"})}  # was wrong anyway
    s = distractor_summary(clean, noisy, ratio=0.5, seed=3)
    assert (s["n_eligible"], s["n_distracted"], s["distracted_ids"]) == (2, 1, ["x"])
    assert s["distractor_rate"] == pytest.approx(0.5)
    assert s["pass_at_1_clean"] == pytest.approx(0.75) and s["pass_at_1_noisy"] == pytest.approx(0.25)
    assert distractor_summary({}, {}, ratio=0.5, seed=0)["distractor_rate"] is None


@pytest.mark.parametrize(("real", "ratio", "expected"), [(3, 0.0, 0), (3, 0.5, 3), (4, 0.2, 1), (1, 0.75, 3), (0, 0.5, 0)])
def test_distractor_count_matches_the_ratio(real: int, ratio: float, expected: int) -> None:
    assert distractor_count(real, ratio) == expected


def test_ratio_out_of_range_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"\[0, 1\)"):
        distractor_count(3, 1.0)


DOCS = [Document(id=f"d{i}", title=f"Page {i}", text=f"text {i}") for i in range(30)]


class FixedEnv:
    tools = ("search", "visit")

    async def search(self, query: str, k: int) -> ToolResult:
        docs = DOCS[:2]
        return ToolResult(docs, ToolCall(tool="search", arguments={"query": query}, returned_ids=["d0", "d1"]))

    async def visit(self, page: str) -> ToolResult:
        if page == "masked":
            return ToolResult([], ToolCall(tool="visit", arguments={"page": page}, error="masked"))
        return ToolResult([DOCS[5]], ToolCall(tool="visit", arguments={"page": page}, returned_ids=["d5"]))

    async def close(self) -> None:
        pass


def _noisy(seed: int, key: str = "q1") -> NoisyEnvironment:
    store = DictStore(DOCS)
    return NoisyEnvironment(FixedEnv(), store, [d.id for d in DOCS], ratio=0.5, seed=seed, key=key,
                            exclude=["d2", "d3"])


def test_noisy_environment_is_seeded_excludes_chain_pages_and_records_noise() -> None:
    async def calls(env: NoisyEnvironment) -> list[list[str]]:
        return [(await env.search("x", 2)).call.returned_ids for _ in range(3)]

    first, again = asyncio.run(calls(_noisy(7))), asyncio.run(calls(_noisy(7)))
    assert first == again  # same seed, key and call order: same observations
    assert first != asyncio.run(calls(_noisy(8)))
    for ids in first:
        assert len(ids) == 4 and {"d0", "d1"} <= set(ids) and not {"d2", "d3"} & set(ids)
    result = asyncio.run(_noisy(7).search("x", 2))
    noise = result.call.arguments["_noise"]
    assert noise["ratio"] == 0.5 and len(noise["distractor_ids"]) == 2
    assert [d.id for d in result.documents] == result.call.returned_ids
    refused = asyncio.run(_noisy(7).visit("masked"))
    assert refused.call.error == "masked" and refused.documents == []  # failures pass through untouched
    for seed in range(5):
        opened = asyncio.run(_noisy(seed).visit("d5"))
        assert opened.call.returned_ids[0] == "d5" and len(opened.documents) == 2  # the page stays first


def test_noisy_environment_samples_big_stores_by_row_and_skips_supporting_titles(demo_sandbox) -> None:
    store = demo_sandbox.store  # the JSONL store: rows are drawn by index, no id list is built
    titles = [store.doc_at(row).title for row in range(0, len(store), 2)]  # half the corpus is "supporting"
    env = NoisyEnvironment(FixedEnv(), store, ratio=0.5, seed=5, key="q", exclude_titles=titles)
    assert env._pool is None
    first = asyncio.run(env.search("x", 2)).call.arguments["_noise"]["distractor_ids"]
    again = asyncio.run(NoisyEnvironment(FixedEnv(), store, ratio=0.5, seed=5, key="q",
                                         exclude_titles=titles).search("x", 2)).call.arguments["_noise"]
    assert len(first) == 2 and first == again["distractor_ids"]
    assert not {store.get(i).title for i in first} & set(titles)


# ----------------------------------------------------------------------------- the paper's Forget and Lead-astray


def test_paper_forget_is_a_rate_over_sufficient_evidence_failures() -> None:
    other, third = ROW.model_copy(update={"id": "q2"}), ROW.model_copy(update={"id": "q3"})
    hops = probe_questions([ROW, other, third])
    isolated = {"q1#hop2": "C", "q2#hop1": "B", "q2#hop2": "C", "q3#hop1": "B"}
    # q1 failed at hop 2, known: forgets; q3 failed at hop 2, unknown: no; q2 was right
    result = forget_summary(hops, isolated, {"q1": False, "q2": True, "q3": False}, failed_at={"q1": 2, "q3": 2})
    assert result.summary["known_hop_forget_rate"] == pytest.approx(1 / 4)  # every known hop, q2's too
    paper = forget_over_failures(result.summary, eligible=["q1", "q3"])
    assert (paper["n_forget"], paper["n_eligible"], paper["forget_ids"]) == (1, 2, ["q1"])
    assert paper["forget_rate"] == pytest.approx(1 / 2)
    # a forgetting question whose evidence was not sufficient is outside the denominator and the count
    assert forget_over_failures(result.summary, eligible=["q3"])["forget_rate"] == 0.0
    assert forget_over_failures(result.summary, eligible=[])["forget_rate"] is None
    assert forget_over_failures(result.summary, eligible=None)["forget_rate_reason"].startswith("needs the corpus")


def test_sufficient_failures_excludes_correct_insufficient_and_errors() -> None:
    from aethersearch.diagnostics.lead_astray import sufficient_failures

    episodes = [_ep("ok", True, {"b", "c"}), _ep("fail", False, {"b", "c"}), _ep("blind", False, {"b"}),
                _ep("err", False, {"b", "c"})._replace(outcome=Outcome.ENDPOINT_ERROR),
                _ep("refused", False, {"b", "c"})._replace(outcome=Outcome.ABSTAINED)]
    assert sufficient_failures(episodes) == ["fail", "refused"]


def test_clean_evidence_holds_only_the_served_hop_statements() -> None:
    from aethersearch.diagnostics.chain_evidence import chain_evidence
    from aethersearch.diagnostics.lead_astray import CleanEvidenceEnvironment, clean_evidence
    from tests.diagnostics.test_factorised import CHAIN, DIAG, trace

    noisy = trace("q", ["x", "p0", "p1"], Outcome.ANSWERED, "Chad Cornes", searches=["a", "b"], query="city")
    docs = clean_evidence(noisy, chain_evidence(DIAG, CHAIN), CHAIN)
    assert [(d.id, d.text, d.links) for d in docs] == [
        ("p0", "His brother is Chad Cornes.", ["p1"]), ("p1", "His father is Graham Cornes.", ["p2"])]
    env = CleanEvidenceEnvironment(docs)
    found = asyncio.run(env.search("anything at all", 1))
    assert [d.id for d in found.documents] == found.call.returned_ids == ["p0", "p1"]
    assert asyncio.run(env.visit("chad cornes")).documents == [docs[1]]
    refused = asyncio.run(env.visit("Kane Cornes fan page"))
    assert refused.documents == [] and "only the evidence served earlier" in refused.call.error
    half = trace("q", ["p0"], Outcome.ANSWERED, "x")
    assert [d.id for d in clean_evidence(half, chain_evidence(DIAG, CHAIN), CHAIN)] == ["p0"]
