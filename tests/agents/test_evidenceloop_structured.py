"""EvidenceLoop's structured protocol (``structured`` on) over real loopback HTTP with the scripted server.

The responder plays every sub-agent in JSON and checks what a constrained server
would enforce: each request carries ``response_format`` in the chosen form, and
every EID a reply cites is in that call's schema enum (the memory's EIDs then).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest

from aethersearch.agents.base import Episode, make_agent
from aethersearch.agents.evidenceloop import trace_summary
from aethersearch.agents.llm import ConstrainedDecoding, OpenAIClient, decoding_body, response_format
from aethersearch.errors import ConfigError
from aethersearch.records import Budget, Decoding, Outcome, RolloutQuestion
from aethersearch.rollout.budget import BudgetedEnvironment, BudgetedLLM, BudgetTracker
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer, question_of
from tests.diagnostics.test_evidenceloop import QUESTION, PageEnv

ANSWER = "Graham Cornes"


def _schema(request: ScriptedRequest, form: str) -> dict[str, Any]:
    """The JSON schema of the request, asserting it came in ``form``."""
    sent = request.body["response_format"]
    if form == "json_object":
        assert set(sent) == {"type", "schema"} and sent["type"] == "json_object"
        return dict(sent["schema"])
    assert sent["type"] == "json_schema" and sent["json_schema"]["strict"] is True
    return dict(sent["json_schema"]["schema"])


def json_rule(form: str, seen: list[dict[str, Any]], *, garbage_first: bool = False) -> Any:
    """Solvers: search, then visit Nicole Cornes (solver 1 first sends a cut-off reply when ``garbage_first``)."""

    def respond(request: ScriptedRequest) -> Reply:
        schema = _schema(request, form)
        seen.append(schema)
        first = request.body["messages"][0]["content"]
        assert question_of(request) == QUESTION
        if first.startswith("You are solver"):
            index = int(re.search(r"solver (\d+) of", first).group(1))
            turns = sum(m["role"] == "assistant" for m in request.body["messages"])
            if garbage_first and index == 1 and turns == 0:
                return Reply('{"action": "search", "query": "Nicole', finish_reason="length")
            kinds = [option["properties"]["action"]["const"] for option in schema["anyOf"]]
            if turns == 0:
                return Reply(json.dumps({"action": "search", "query": "Nicole Cornes married"}))
            if turns == 1 and "visit" in kinds:
                return Reply(json.dumps({"action": "visit", "page": "Nicole Cornes"}))
            return Reply(json.dumps({"action": "done"}))
        if first.startswith("You are the extraction agent"):
            eids = schema["properties"]["facts"]["items"]["properties"]["eid"]["enum"]
            docs = dict(re.findall(r"^\[(E\d+)\] ([^\n]+)$", first, re.MULTILINE))
            facts = [{"eid": eid, "fact": f"{docs[eid]} is a page."} for eid in eids]
            facts += [{"eid": eid, "fact": "Nicole Cornes is married to Graham Cornes."}
                      for eid in eids if docs[eid] == "Nicole Cornes"]
            return Reply(json.dumps({"facts": facts}))
        if "You have used all of your search budget" in first:
            assert schema["properties"]["decision"]["enum"] == ["answer", "refuse"]
            return Reply(json.dumps({"decision": "answer", "answer": ANSWER}))
        if first.startswith("You are the aggregation agent"):
            decision = schema["properties"]["decision"]["enum"]
            if "answer" not in decision:
                return Reply(json.dumps({"established": "nothing", "missing": "all", "decision": "continue"}))
            citable = schema["properties"]["claims"]["items"]["properties"]["eid"]["enum"]
            fact = re.search(r"\[(E\d+\.\d+)\] Nicole Cornes is married", first)
            assert fact is None or fact.group(1) in citable  # the schema lists the fact EIDs that exist
            claims = [{"eid": fact.group(1), "claim": "Nicole Cornes is married to Graham Cornes."}] if fact else []
            return Reply(json.dumps({"established": "see claims", "missing": "none" if fact else "the spouse",
                                     "decision": "answer" if fact else "continue",
                                     "answer": ANSWER if fact else "", "claims": claims}))
        if first.startswith("You are the verification agent"):
            assert list(schema["properties"]) == ["claim_1", "support"]
            return Reply(json.dumps({"claim_1": {"reason": "stated", "verdict": "entailed"}, "support": "supported"}))
        raise AssertionError(f"unexpected prompt: {first[:80]}")

    return respond


async def _episode(agent: Any, url: str, budget: Budget) -> tuple[Any, Episode]:
    tracker = BudgetTracker(budget)
    async with OpenAIClient(url, "scripted") as client:
        episode = Episode(question=RolloutQuestion(id="q1", question=QUESTION), question_seen=QUESTION,
                          env=BudgetedEnvironment(PageEnv(), tracker), llm=BudgetedLLM(client, tracker),
                          decoding=Decoding(max_tokens=64))
        return await agent.solve(episode), episode


@pytest.mark.parametrize("form", ["json_object", "json_schema"])
def test_structured_loop_answers_with_verified_claims_citing_known_eids(form: str) -> None:
    seen: list[dict[str, Any]] = []
    agent = make_agent("evidenceloop", n_solvers=2, max_rounds=2, actions_per_round=2, structured=form)
    with ScriptedServer(json_rule(form, seen)) as server:
        output, episode = asyncio.run(_episode(agent, server.url, Budget(max_tool_calls=20, max_turns=40)))
    assert output.outcome is Outcome.ANSWERED and output.prediction == ANSWER
    assert output.stop_reason == "verified" and output.response.endswith(f"<answer> {ANSWER} </answer>")
    summary = trace_summary(episode.steps)
    assert summary["solvers_with_valid_action"] == ["solver-0", "solver-1"]
    assert summary["valid_actions"] == 4 and summary["invalid_actions"] == 0 and summary["tool_actions"] == 4
    assert summary["eids"] == ["E1", "E2", "E3"] and len(summary["fact_eids"]) == 4
    assert summary["claims"] == 1 and summary["verified_claims"] == 1 and summary["accepted"] is True
    round1 = summary["rounds"][0]
    assert round1["verdicts"][0]["verdict"] == "entailed" and round1["claims"][0]["eid"].count(".") == 1
    # the first solver call of the episode had no EID to fetch; later ones list exactly the memory's
    solver_schemas = [s for s in seen if "anyOf" in s]
    assert [o["properties"]["action"]["const"] for o in solver_schemas[0]["anyOf"]] == ["search", "visit", "done"]
    fetchable = [o for s in solver_schemas for o in s["anyOf"] if o["properties"]["action"]["const"] == "fetch"]
    assert fetchable and set(fetchable[-1]["properties"]["eid"]["enum"]) <= {"E1", "E2", "E3"}


def test_a_cut_off_reply_is_an_invalid_action_and_the_loop_goes_on() -> None:
    agent = make_agent("evidenceloop", n_solvers=2, max_rounds=1, actions_per_round=2, structured="json_object")
    with ScriptedServer(json_rule("json_object", [], garbage_first=True)) as server:
        output, episode = asyncio.run(_episode(agent, server.url, Budget(max_tool_calls=20, max_turns=40)))
    summary = trace_summary(episode.steps)
    solver1 = summary["rounds"][0]["solvers"]["solver-1"]
    assert [m["action"] for m in solver1] == ["invalid", "visit"]
    invalid = [s for s in episode.steps if s.agent == "solver-1"][0]
    assert invalid.observation.startswith("Invalid action. Reply with one JSON action")
    assert summary["invalid_actions"] == 1 and output.outcome is Outcome.ANSWERED


def test_structured_is_a_recorded_option_and_changes_the_prompt_hash() -> None:
    off = make_agent("evidenceloop")
    on = make_agent("evidenceloop", structured="json_object")
    assert off.config()["structured"] == "off" and on.config()["structured"] == "json_object"
    assert off.prompt_template_hash() != on.prompt_template_hash()
    assert on.prompt_template_hash() == make_agent("evidenceloop", structured="json_schema").prompt_template_hash()
    with pytest.raises(ConfigError, match="structured must be one of off, json_schema, json_object"):
        make_agent("evidenceloop", structured="grammar")


def test_response_format_forms_and_the_request_body() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    assert response_format("json_object", "x", schema) == {"type": "json_object", "schema": schema}
    assert response_format("json_schema", "x", schema) == {
        "type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}
    with pytest.raises(ConfigError, match="unknown structured-output form"):
        response_format("grammar", "x", schema)
    plain = Decoding(max_tokens=50)
    assert "response_format" not in decoding_body(plain)
    constrained = ConstrainedDecoding(**plain.model_dump(), response_format=response_format("json_object", "x", schema))
    clamped = constrained.model_copy(update={"max_tokens": 10})  # what the budget's clamp does
    body = decoding_body(clamped, "llama.cpp")
    assert body["response_format"] == {"type": "json_object", "schema": schema} and body["max_tokens"] == 10


def test_the_tag_protocol_is_unchanged_and_summarised_the_same_way() -> None:
    """``structured`` off sends no response_format; trace_summary reads the tag run too."""
    from tests.diagnostics.evidenceloop_rules import evidenceloop_rule

    bodies: list[dict[str, Any]] = []
    rule = evidenceloop_rule({QUESTION: ANSWER}, query=lambda q: "Nicole Cornes married")

    def spy(request: ScriptedRequest) -> Reply | str:
        bodies.append(request.body)
        return rule(request)

    agent = make_agent("evidenceloop", n_solvers=2, max_rounds=2, actions_per_round=2)
    with ScriptedServer(spy) as server:
        output, episode = asyncio.run(_episode(agent, server.url, Budget(max_tool_calls=20, max_turns=40)))
    assert output.prediction == ANSWER and not any("response_format" in b for b in bodies)
    solver_seeds = {int(re.search(r"solver (\d+) of", b["messages"][0]["content"]).group(1)): b["seed"]
                    for b in bodies if b["messages"][0]["content"].startswith("You are solver")}
    assert solver_seeds == {0: 0, 1: 1}  # solver i samples with seed + i; the other sub-agents keep the seed
    assert all(b["seed"] == 0 for b in bodies if not b["messages"][0]["content"].startswith("You are solver"))
    summary = trace_summary([s.model_dump(mode="json") for s in episode.steps])
    assert summary["verified_claims"] == 1 and summary["valid_actions"] >= 2
    claim = summary["rounds"][0]["claims"][0]
    aggregator = next(s for s in episode.steps if s.agent == "aggregator" and s.notes["claims"])
    assert aggregator.notes["eid_docs"][claim["eid"]] == "nicole" and summary["claims"] == 1


def test_the_forced_final_answer_is_structured_too() -> None:
    """After the turn budget runs out mid-round, the one forced final answer is a constrained JSON reply."""
    from aethersearch.errors import BudgetExhausted

    agent = make_agent("evidenceloop", n_solvers=2, max_rounds=2, actions_per_round=2, structured="json_object")

    async def main(url: str) -> tuple[Any, Episode, BudgetTracker]:
        tracker = BudgetTracker(Budget(max_tool_calls=20, max_turns=3))
        async with OpenAIClient(url, "scripted") as client:
            episode = Episode(question=RolloutQuestion(id="q1", question=QUESTION), question_seen=QUESTION,
                              env=BudgetedEnvironment(PageEnv(), tracker), llm=BudgetedLLM(client, tracker),
                              decoding=Decoding(max_tokens=64))
            with pytest.raises(BudgetExhausted):
                await agent.solve(episode)
            tracker.grant_final()
            return await agent.final_answer(episode), episode, tracker

    with ScriptedServer(json_rule("json_object", [])) as server:
        output, episode, tracker = asyncio.run(main(server.url))
    assert tracker.final_used and episode.steps[-1].notes.get("forced_final") is True
    assert output.outcome is Outcome.ANSWERED and output.prediction == ANSWER and output.stop_reason == "budget"
    assert output.response.endswith(f"<answer> {ANSWER} </answer>")
    assert trace_summary(episode.steps)["forced_final"] is True


@pytest.mark.parametrize(("text", "expected"), [
    ('{"action": "search", "query": "  Nicole   Cornes "}', ("search", "Nicole Cornes")),
    ('{"action": "visit", "page": "Chad Cornes"}', ("visit", "Chad Cornes")),
    ('{"action": "fetch", "eid": "E1.1"}', ("fetch", "E1.1")),
    ('{"action": "fetch", "eid": "E9"}', ("invalid", None)),  # not in the memory
    ('{"action": "done"}', ("done", None)),
    ('{"action": "search", "query": ""}', ("invalid", None)),
    ('{"action": "search", "query": "Nic', ("invalid", None)),  # cut at max_tokens
    ('["search"]', ("invalid", None)),
    ('{"action": "answer", "query": "x"}', ("invalid", None)),
])
def test_parse_action_table(text: str, expected: tuple[str, str | None]) -> None:
    from aethersearch.agents.evidence_actions import parse_action

    assert parse_action(text, ["E1", "E1.1"]) == expected


def test_parse_final_and_proposal() -> None:
    from aethersearch.agents.evidence_actions import parse_final, parse_proposal

    assert parse_final('{"decision": "refuse", "answer": "x"}') == ""  # the caller turns "" into the refusal
    assert parse_final('{"decision": "answer", "answer": " Paris "}') == "Paris"
    assert parse_final('{"decision": "answer"') is None
    analysis, answer, claims = parse_proposal(json.dumps({
        "established": "E1 says so", "missing": "none", "decision": "continue", "answer": "Paris",
        "claims": [{"eid": "E1", "claim": "Paris"}]}))
    assert analysis == "Established: E1 says so\nMissing: none" and answer is None and claims == []
