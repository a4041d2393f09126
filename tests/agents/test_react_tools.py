"""The react agent over the scripted server: malformed tool calls become charged tool errors."""

from __future__ import annotations

import asyncio

import orjson

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.react import ReactAgent, tool_schema
from aethersearch.agents.scripted_server import Reply, ScriptedRequest, ScriptedServer
from aethersearch.records import Budget, Decoding, Outcome, RolloutQuestion
from aethersearch.rollout.runner import run_episode
from tests.agents.fakes import FakeSearchEnv


def call(name: str, arguments: str, cid: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


MALFORMED = [
    Reply(tool_calls=[call("search", '{"query": "Paris', "c1")]),                    # bad JSON
    Reply(tool_calls=[call("browse", '{"query": "Paris"}', "c2")]),                  # unknown tool
    Reply(tool_calls=[call("search", '{"query": 5}', "c3")]),                        # wrong type
    Reply(tool_calls=[call("search", '{"query": "Par', "c4")], finish_reason="length"),  # truncated
    Reply(tool_calls=[call("search", '{"query": "capital of France"}', "c5")]),      # valid
    Reply("<answer> Paris </answer>"),
]


class Script:
    def __init__(self, replies: list[Reply]) -> None:
        self.replies = replies
        self.bodies: list[dict] = []

    def __call__(self, request: ScriptedRequest) -> Reply:
        self.bodies.append(request.body)
        turn = sum(1 for m in request.body["messages"] if m["role"] == "assistant")
        if not request.body.get("tools"):
            return Reply("<answer> forced </answer>")
        return self.replies[min(turn, len(self.replies) - 1)]


def _run(script: Script, budget: Budget, env: FakeSearchEnv | None = None):
    env = env or FakeSearchEnv()

    async def go():
        with ScriptedServer(script) as server:
            async with OpenAIClient(server.url, "m") as llm:
                return await run_episode(RolloutQuestion(id="q", question="What is the capital of France?"),
                                         ReactAgent(), env, llm, budget, Decoding())
    return asyncio.run(go()), env


def test_malformed_tool_calls_are_tool_errors_charged_and_never_replayed() -> None:
    script = Script(MALFORMED)
    trace, env = _run(script, Budget(max_tool_calls=8, max_turns=8))
    assert (trace.outcome, trace.prediction, trace.stop_reason) == (Outcome.ANSWERED, "Paris", "answer")
    assert env.calls == [("search", "capital of France")]  # only the valid call reached the tools
    errors = [tc.error for step in trace.steps for tc in step.tool_calls]
    assert "not valid JSON" in errors[0]
    assert "unknown tool 'browse'" in errors[1]
    assert "must be a non-empty string, got 5" in errors[2]
    assert "cut off at the max_tokens limit" in errors[3]
    assert errors[4] is None
    assert trace.usage.tool_calls == 5  # malformed calls count against the budget
    # every conversation replayed to the server carries only valid JSON arguments
    for body in script.bodies:
        for message in body["messages"]:
            for tc in message.get("tool_calls") or []:
                assert isinstance(orjson.loads(tc["function"]["arguments"]), dict)
    # the model is told what was wrong, in the tool message of that call
    last = script.bodies[-1]["messages"]
    tool_msgs = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert tool_msgs["c1"].startswith("error: the arguments are not valid JSON")
    assert tool_msgs["c5"].startswith('Doc 1(Title: "Paris")')


def test_malformed_calls_exhaust_the_budget_then_one_forced_final_answer() -> None:
    script = Script(MALFORMED)
    trace, env = _run(script, Budget(max_tool_calls=2, max_turns=8))
    assert env.calls == []
    assert trace.usage.tool_calls == 2
    assert (trace.outcome, trace.prediction, trace.stop_reason) == (Outcome.ANSWERED, "forced", "budget")
    assert script.bodies[-1].get("tools") is None  # the forced final request offers no tools
    assert sum(1 for s in trace.steps if s.notes.get("forced_final")) == 1


def test_tool_descriptions_are_the_docstrings_written_for_the_model() -> None:
    schema = tool_schema("search")["function"]
    assert schema["description"].startswith("Search the document collection")
    assert schema["parameters"]["required"] == ["query"]
    env = FakeSearchEnv(tools=("search", "visit"))
    script = Script([Reply("<answer> x </answer>")])
    _run(script, Budget(), env=env)
    assert [t["function"]["name"] for t in script.bodies[0]["tools"]] == ["search", "visit", "access"]


def test_validate_tool_call_table() -> None:
    from aethersearch.agents.react import validate_tool_call

    tools = ("search", "visit", "access")
    cases = [
        (call("search", '{"query": "x"}', "a"), False, ("search", "x", None)),
        (call("search", '{"query": "x"}', "a"), True, ("search", "x", None)),  # complete despite length
        (call("visit", '{"page": "P"}', "a"), False, ("visit", "P", None)),
        (call("search", '{"query": "x", "k": 9}', "a"), False, "unexpected argument"),
        (call("search", '["x"]', "a"), False, "must be a JSON object"),
        (call("search", '{"query": "  "}', "a"), False, "non-empty string"),
        ({"id": "a"}, False, "unknown tool None"),
    ]
    for raw, truncated, expected in cases:
        got = validate_tool_call(raw, tools, truncated)
        if isinstance(expected, tuple):
            assert got == expected
        else:
            assert got[2] is not None and expected in got[2], (raw, got)
