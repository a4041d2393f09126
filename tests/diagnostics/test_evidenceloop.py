"""EvidenceLoop over real loopback HTTP (scripted server) with the runner's budget wrappers."""

from __future__ import annotations

import asyncio

import pytest

from aethersearch.agents.base import Episode, make_agent
from aethersearch.agents.evidence_memory import EvidenceMemory
from aethersearch.agents.llm import LLM, OpenAIClient
from aethersearch.environment import ToolResult
from aethersearch.errors import BudgetExhausted, ConfigError, ToolError
from aethersearch.records import (
    Budget,
    Decoding,
    Document,
    Outcome,
    RolloutQuestion,
    ToolCall,
)
from aethersearch.rollout.budget import BudgetedEnvironment, BudgetedLLM, BudgetTracker
from aethersearch.testing.scripted_server import ScriptedServer
from tests.diagnostics.evidenceloop_rules import evidenceloop_rule

PAGES = [
    Document(id="kane", title="Kane Cornes", text="Kane Cornes is a footballer. His brother is Chad Cornes."),
    Document(id="chad", title="Chad Cornes", text="Chad Cornes played for Port Adelaide. "
             "Chad's stepmother is Nicole Cornes."),
    Document(id="nicole", title="Nicole Cornes", text="Nicole Cornes is a media personality. "
             "She is married to Graham Cornes."),
]
QUESTION = "Who is married to the stepmother of Kane Cornes's brother?"


class PageEnv:
    """Three linked pages: search ranks by shared words, visit opens by title or id."""

    tools = ("search", "visit")

    def __init__(self) -> None:
        self.calls = 0

    async def search(self, query: str, k: int) -> ToolResult:
        self.calls += 1
        words = set(query.lower().split())
        ranked = sorted(PAGES, key=lambda d: -len(words & set(d.contents.lower().split())))[:k]
        return ToolResult(ranked, ToolCall(tool="search", arguments={"query": query, "k": k},
                                           returned_ids=[d.id for d in ranked]))

    async def visit(self, page: str) -> ToolResult:
        self.calls += 1
        await asyncio.sleep(0)
        for doc in PAGES:
            if page in (doc.id, doc.title):
                return ToolResult([doc], ToolCall(tool="visit", arguments={"page": page},
                                                  returned_ids=[doc.id]))
        return ToolResult([], ToolCall(tool="visit", arguments={"page": page}, error="unknown page"))

    async def close(self) -> None:
        pass


async def _run(agent, server: ScriptedServer, budget: Budget):
    tracker = BudgetTracker(budget)
    env = PageEnv()
    async with OpenAIClient(server.url, "scripted") as client:
        episode = Episode(question=RolloutQuestion(id="q1", question=QUESTION), question_seen=QUESTION,
                          env=BudgetedEnvironment(env, tracker), llm=BudgetedLLM(client, tracker),
                          decoding=Decoding())
        try:
            output = await agent.solve(episode)
        except BudgetExhausted:
            tracker.grant_final()
            output = await agent.final_answer(episode)
    return output, episode, tracker, env


def test_answers_with_verified_claims_and_records_eids() -> None:
    agent = make_agent("evidenceloop", n_solvers=2, max_rounds=3, actions_per_round=2)
    with ScriptedServer(evidenceloop_rule({QUESTION: "Graham Cornes"}, query=lambda q: "Nicole Cornes married")) as server:
        output, episode, tracker, _ = asyncio.run(_run(agent, server, Budget(max_tool_calls=20, max_turns=40)))
    assert output.outcome is Outcome.ANSWERED and output.prediction == "Graham Cornes"
    assert output.stop_reason == "verified"
    agents = {step.agent for step in episode.steps}
    assert {"solver-0", "solver-1", "extractor", "aggregator", "verifier"} <= agents
    solver_eids = [e for s in episode.steps if s.agent.startswith("solver") for e in s.notes.get("eids", [])]
    assert solver_eids and all(e.startswith("E") for e in solver_eids)
    aggregator = [s for s in episode.steps if s.agent == "aggregator" and s.notes["claims"]][-1]
    claim = aggregator.notes["claims"][0]
    assert aggregator.notes["eid_docs"][claim["eid"]] == "nicole"
    verifier = [s for s in episode.steps if s.agent == "verifier"][-1]
    assert verifier.notes["accepted"] is True
    assert verifier.notes["verdicts"] == [{"claim": "1", "eid": claim["eid"], "text": claim["text"],
                                           "verdict": "entailed"}]
    assert tracker.tool_calls == sum(len(s.tool_calls) for s in episode.steps)


def test_rejected_claims_loop_then_the_synthesiser_decides() -> None:
    agent = make_agent("evidenceloop", n_solvers=1, max_rounds=2, actions_per_round=2)
    rule = evidenceloop_rule({QUESTION: "Graham Cornes"}, wrong={QUESTION: "Port Adelaide Power"})
    with ScriptedServer(rule) as server:
        output, episode, _, _ = asyncio.run(_run(agent, server, Budget(max_tool_calls=20, max_turns=40)))
    # the rule's synthesiser finds the memory insufficient ("I don't know"): only then does the loop refuse
    assert output.outcome is Outcome.ABSTAINED and output.stop_reason == "synthesis"
    verdicts = [s.notes for s in episode.steps if s.agent == "verifier"]
    assert len(verdicts) == 2 and not any(v["accepted"] for v in verdicts)
    assert verdicts[0]["verdicts"][0]["verdict"] == "not_entailed"
    rounds = {s.notes.get("round") for s in episode.steps if s.agent == "aggregator"}
    assert rounds == {1, 2, None}  # two rounds, then the synthesis step
    assert episode.steps[-1].notes["synthesis"] == "rounds" and not episode.steps[-1].notes["forced_final"]


def _synthesising(rule, verdicts: str | None = None):
    """``rule``, except that the synthesiser answers from memory and (optionally) the verifier replies ``verdicts``."""
    def respond(request):
        from aethersearch.testing.scripted_server import Reply

        messages = request.body.get("messages") or []
        first = messages[0]["content"] if messages else request.text
        if "You have used all of your search budget" in first:
            return Reply("<answer> Graham Cornes </answer>")
        if verdicts is not None and first.startswith("You are the verification agent"):
            return Reply(verdicts)
        return rule(request)
    return respond


def test_after_the_last_round_the_synthesiser_answers_from_the_evidence() -> None:
    from aethersearch.agents.evidenceloop import trace_summary

    agent = make_agent("evidenceloop", n_solvers=1, max_rounds=2, actions_per_round=2)
    rule = _synthesising(evidenceloop_rule({QUESTION: "Graham Cornes"}, wrong={QUESTION: "Port Adelaide Power"}))
    with ScriptedServer(rule) as server:
        output, episode, _, _ = asyncio.run(_run(agent, server, Budget(max_tool_calls=20, max_turns=40)))
    assert output.outcome is Outcome.ANSWERED and output.prediction == "Graham Cornes"
    assert output.stop_reason == "synthesis"  # never an out-of-rounds refusal
    summary = trace_summary(episode.steps)
    assert summary["synthesis"] == "rounds" and summary["accepted"] is False and len(summary["rounds"]) == 2


@pytest.mark.parametrize("reply", [
    '<verdict claim="1"> entailed </verdict>\n<support> not_supported </support>',  # true but not enough
    '<verdict claim="1"> irrelevant </verdict>\n<support> supported </support>',   # beside the question
    '<verdict claim="1"> entailed </verdict>',                                       # joint verdict missing
])
def test_the_verifier_needs_entailment_relevance_and_joint_support(reply: str) -> None:
    agent = make_agent("evidenceloop", n_solvers=1, max_rounds=1, actions_per_round=2)
    rule = _synthesising(evidenceloop_rule({QUESTION: "Graham Cornes"}, query=lambda q: "Nicole Cornes married"),
                         verdicts=reply)
    with ScriptedServer(rule) as server:
        output, episode, _, _ = asyncio.run(_run(agent, server, Budget(max_tool_calls=20, max_turns=40)))
    verifier = [s for s in episode.steps if s.agent == "verifier"]
    assert verifier and verifier[-1].notes["accepted"] is False
    assert output.stop_reason == "synthesis"  # the unverified proposal is not taken as the answer


def test_shared_budget_holds_across_parallel_solvers() -> None:
    agent = make_agent("evidenceloop", n_solvers=4, max_rounds=3, actions_per_round=3)
    with ScriptedServer(evidenceloop_rule({}, visits=2), latency_s=0.005) as server:
        output, episode, tracker, env = asyncio.run(_run(agent, server, Budget(max_tool_calls=5, max_turns=60)))
    recorded = sum(len(s.tool_calls) for s in episode.steps)
    assert env.calls == recorded == tracker.tool_calls == 5  # 4 solvers wanted up to 12 calls
    assert tracker.exhausted == "tool_calls"
    assert any(s.notes.get("budget") == "tool_calls" for s in episode.steps)
    # after the budget ran out no further round started
    assert max(s.notes.get("round", 0) for s in episode.steps) == 1
    assert output.outcome is Outcome.ABSTAINED


def test_turn_budget_ends_in_one_forced_final_answer() -> None:
    agent = make_agent("evidenceloop", n_solvers=2, max_rounds=3, actions_per_round=3)
    with ScriptedServer(evidenceloop_rule({})) as server:
        output, episode, tracker, _ = asyncio.run(_run(agent, server, Budget(max_tool_calls=50, max_turns=3)))
    assert tracker.turns == 3 and tracker.final_used
    assert episode.steps[-1].notes.get("forced_final") is True
    assert output.outcome is Outcome.ABSTAINED and output.stop_reason == "budget"


def test_config_is_fingerprinted_and_validated() -> None:
    agent = make_agent("evidenceloop", n_solvers=3, max_rounds=2, actions_per_round=4)
    assert agent.config()["n_solvers"] == 3 and agent.config()["max_rounds"] == 2
    assert agent.config()["actions_per_round"] == 4
    assert set(agent.config()) >= {"n_solvers", "max_rounds", "actions_per_round", "topk"}
    assert len(agent.prompt_template_hash()) == 64
    with pytest.raises(ConfigError, match="n_solvers"):
        make_agent("evidenceloop", n_solvers=0)


def test_memory_keeps_one_eid_per_document_and_fetches_full_text() -> None:
    memory = EvidenceMemory(snippet_chars=20)
    snippet = Document(id="chad", title="Chad Cornes", text="Chad Cornes played")
    assert memory.add(snippet, source="solver-0", round=1) == ("E1", True)
    assert memory.add(PAGES[1], source="solver-1", round=1) == ("E1", False)
    assert "Nicole Cornes" in memory.full_text("E1")  # the fuller visit replaced the snippet
    assert memory.summary_line("E1").startswith("[E1] Chad Cornes: Chad Cornes played")
    memory.record_finding("E1", "stepmother is Nicole Cornes")
    assert memory.summary_line("E1") == "[E1] Chad Cornes: stepmother is Nicole Cornes"
    with pytest.raises(ToolError, match="unknown evidence id 'E9'"):
        memory.get("E9")


def test_fetch_reads_full_documents_by_eid_without_a_tool_call() -> None:
    def rule(request):
        from aethersearch.testing.scripted_server import Reply

        messages = request.body["messages"]
        first = messages[0]["content"]
        if first.startswith("You are solver"):
            turns = sum(m["role"] == "assistant" for m in messages)
            return Reply(["<search> Nicole Cornes </search>", "<fetch> E1 </fetch>", "<fetch> E42 </fetch>",
                          "<done>"][turns])
        return evidenceloop_rule({})(request)

    agent = make_agent("evidenceloop", n_solvers=1, max_rounds=1, actions_per_round=4, snippet_chars=12)
    with ScriptedServer(rule) as server:
        _output, episode, tracker, env = asyncio.run(_run(agent, server, Budget(max_tool_calls=10, max_turns=20)))
    solver = [s for s in episode.steps if s.agent == "solver-0"]
    search, fetch, bad, done = solver
    assert "…" in search.observation  # summaries only: snippets cut at snippet_chars
    assert fetch.notes["action"] == "fetch" and fetch.tool_calls == []
    first = next(d for d in PAGES if d.id == search.tool_calls[0].returned_ids[0])
    assert fetch.observation == f"[E1] {first.title}\n{first.text}"  # the whole document, not its snippet
    assert "unknown evidence id 'E42'" in bad.observation
    assert done.notes["action"] == "done"
    assert env.calls == tracker.tool_calls == 1  # only the search reached the environment


def test_an_endpoint_failure_in_one_solver_cancels_the_others() -> None:
    from aethersearch.errors import EndpointError

    class SlowOrFailing(LLM):
        """Solver 0's call fails at once; the other solvers' calls hang (a stalled endpoint)."""

        endpoint, model = "test", "test"

        async def chat(self, messages, decoding, tools=None):
            if "You are solver 0" in messages[0]["content"]:
                raise EndpointError("HTTP 400: context too long")
            await asyncio.sleep(30)

    agent = make_agent("evidenceloop", n_solvers=3, max_rounds=1, actions_per_round=3)

    async def main():
        episode = Episode(question=RolloutQuestion(id="q1", question=QUESTION), question_seen=QUESTION,
                          env=PageEnv(), llm=SlowOrFailing(), decoding=Decoding())
        with pytest.raises(EndpointError, match="context too long"):
            await asyncio.wait_for(agent.solve(episode), 5)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]

    assert asyncio.run(main()) == []  # the hanging solvers were cancelled, not left running
