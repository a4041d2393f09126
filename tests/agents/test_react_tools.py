"""The react agent over the scripted server: malformed tool calls become charged tool errors."""

from __future__ import annotations

import asyncio

import orjson

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.react import ReactAgent, tool_schema
from aethersearch.records import Budget, Decoding, Outcome, RolloutQuestion
from aethersearch.rollout.runner import run_episode
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
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
    # no malformed call is ever replayed: only the one valid call, with its parsed arguments
    replayed = [tc for body in script.bodies for m in body["messages"] for tc in m.get("tool_calls") or []]
    assert replayed and all(tc["id"] == "c5" and tc["function"]["name"] == "search"
                            and orjson.loads(tc["function"]["arguments"]) == {"query": "capital of France"}
                            for tc in replayed)
    assert not any('"query": "Par' in orjson.dumps(body).decode().replace('\\"', '"') for body in script.bodies)
    # the model is told what was wrong in a user message; tool messages answer only real calls
    last = script.bodies[-1]["messages"]
    assert {m["tool_call_id"] for m in last if m["role"] == "tool"} == {"c5"}
    told = "\n".join(m["content"] for m in last if m["role"] == "user")
    assert "tool call 1 (search) was not run: the arguments are not valid JSON" in told
    assert "tool call 1 (browse) was not run: unknown tool 'browse'" in told
    tool_msgs = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
    assert tool_msgs["c5"].startswith('Doc 1(Title: "Paris")')


def test_a_malformed_call_next_to_a_valid_one_is_dropped_from_the_replayed_turn() -> None:
    mixed = [Reply("looking", tool_calls=[call("search", '{"query": "Seine"}', "ok1"),
                                         call("search", '{"query": ', "bad1"),
                                         call("visit", '{"page": "d1"}', "bad2")]),
             Reply("<answer> Paris </answer>")]
    script = Script(mixed)
    trace, env = _run(script, Budget(max_tool_calls=8, max_turns=8))
    assert (trace.outcome, trace.prediction) == (Outcome.ANSWERED, "Paris")  # the server accepted every turn
    assert env.calls == [("search", "Seine")]
    assert [tc.error is None for tc in trace.steps[0].tool_calls] == [True, False, False]
    assert trace.usage.tool_calls == 3
    second = script.bodies[1]["messages"]
    assistant = [m for m in second if m["role"] == "assistant"][0]
    assert [tc["id"] for tc in assistant["tool_calls"]] == ["ok1"] and assistant["content"] == "looking"
    roles = [m["role"] for m in second]
    assert roles == ["system", "user", "assistant", "tool", "user"]  # errors come after the tool results
    assert "tool call 2 (search) was not run" in second[-1]["content"]
    assert "tool call 3 (visit) was not run: unknown tool 'visit'" in second[-1]["content"]


def test_budget_spent_on_malformed_calls_tells_the_model_in_the_forced_final_request() -> None:
    script = Script([Reply(tool_calls=[call("search", "{bad", "x1"), call("search", "{bad", "x2")])])
    trace, env = _run(script, Budget(max_tool_calls=1, max_turns=8))
    assert env.calls == [] and trace.usage.tool_calls == 1 and trace.stop_reason == "budget"
    final = script.bodies[-1]
    assert final.get("tools") is None
    assert all(not m.get("tool_calls") for m in final["messages"])
    assert "tool call 1 (search) was not run" in final["messages"][-1]["content"]
    assert final["messages"][-1]["content"].endswith("if you cannot answer.")


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
