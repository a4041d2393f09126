"""The no-LLM lexical baseline really searches and extracts; direct / naive-rag make one call."""

from __future__ import annotations

import asyncio

from aethersearch.agents.base import make_agent
from aethersearch.agents.lexical import LexicalAgent, answer_type
from aethersearch.agents.llm import OpenAIClient
from aethersearch.errors import ConfigError
from aethersearch.records import Budget, Decoding, Document, Outcome, RolloutQuestion
from aethersearch.rollout.runner import NoEnvironment, run_episode
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
from tests.agents.fakes import DOCS, FakeSearchEnv

BOOK = Document(id="d7", title="The Glass Kite", text="The Glass Kite is a novel written by Amelia Vorn in 1921.")


def _lexical(question: str, docs=None, budget: Budget | None = None):
    env = FakeSearchEnv(docs or [*DOCS, BOOK])
    trace = asyncio.run(run_episode(RolloutQuestion(id="q", question=question), LexicalAgent(), env, None,
                                    budget or Budget(), Decoding()))
    return trace, env


def test_lexical_extracts_the_span_near_the_question_terms() -> None:
    trace, env = _lexical("Where was Amelia Vorn born?")
    assert (trace.prediction, trace.outcome) == ("Kestrel Bay", Outcome.ANSWERED)
    assert env.calls and env.calls[0][0] == "search"
    trace, _ = _lexical("In what year was Amelia Vorn born?")
    assert trace.prediction == "1888"


def test_lexical_follows_a_bridge_entity_with_a_reformulated_query() -> None:
    trace, env = _lexical("Where was the author of The Glass Kite born?")
    assert trace.prediction == "Kestrel Bay"
    assert len(env.calls) == 2 and env.calls[1][1].startswith("Amelia Vorn")


def test_lexical_abstains_when_nothing_matches() -> None:
    trace, _ = _lexical("Which zeppelin crossed the Zorblax Sea?")
    assert (trace.prediction, trace.outcome) == ("I don't know", Outcome.ABSTAINED)


def test_lexical_answers_from_what_it_has_when_the_budget_runs_out() -> None:
    trace, env = _lexical("Where was the author of The Glass Kite born?", budget=Budget(max_tool_calls=1))
    assert len(env.calls) == 1 and trace.stop_reason == "budget"
    assert trace.outcome in (Outcome.ANSWERED, Outcome.ABSTAINED)


def test_answer_types_from_the_wh_phrase() -> None:
    assert [answer_type(q) for q in ("When was X founded?", "How many moons?", "Who wrote Y?",
                                     "What did Z do for a living?", "Describe it")] == \
        ["year", "number", "name", "word", "any"]


def test_direct_and_naive_rag_make_exactly_one_call() -> None:
    seen: list[ScriptedRequest] = []

    def model(request: ScriptedRequest) -> Reply:
        seen.append(request)
        return Reply("<answer> Paris </answer>")

    async def go(agent_name: str, env):
        async with OpenAIClient(server.url, "m") as llm:
            return await run_episode(RolloutQuestion(id="q", question="capital of France"),
                                     make_agent(agent_name), env, llm, Budget(), Decoding())

    with ScriptedServer(model) as server:
        direct = asyncio.run(go("direct", NoEnvironment()))
        env = FakeSearchEnv()
        rag = asyncio.run(go("naive-rag", env))
    assert direct.prediction == rag.prediction == "Paris"
    assert len(seen) == 2 and env.calls == [("search", "capital of France")]
    assert "<information>Doc 1(Title: \"Paris\")" in seen[1].text
    assert "Question: capital of France" in seen[0].text


def test_unknown_agent_names_suggest_the_closest() -> None:
    try:
        make_agent("serch-r1")
    except ConfigError as exc:
        assert "Did you mean 'search-r1'" in str(exc)
    else:
        raise AssertionError("expected a ConfigError")
