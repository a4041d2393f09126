"""Property: over random tool-call sequences from the scripted server, the budget is never exceeded."""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.react import ReactAgent
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.records import Budget, Decoding, RolloutQuestion
from aethersearch.rollout.runner import run_episode
from aethersearch.testing.scripted_server import Reply, ScriptedRequest, ScriptedServer
from tests.agents.fakes import FakeSearchEnv

TOOL_CALL = st.one_of(
    st.tuples(st.just("search"), st.sampled_from(['{"query": "Paris"}', '{"query": "Seine river"}'])),
    st.tuples(st.just("visit"), st.sampled_from(['{"page": "d1"}', '{"page": "nowhere"}'])),
    st.tuples(st.sampled_from(["search", "open_url"]), st.sampled_from(['{"query": 3}', '{"q', "[]", ""])),
)
TURN = st.one_of(
    st.lists(TOOL_CALL, min_size=1, max_size=3),
    st.integers(min_value=0, max_value=40).map(lambda n: "<answer> " + "word " * n + "</answer>"),
)
BUDGETS = st.builds(Budget, max_tool_calls=st.one_of(st.none(), st.integers(0, 6)),
                    max_turns=st.integers(1, 5),  # None + None would be unbounded by design
                    max_tokens=st.one_of(st.none(), st.integers(1, 80)))


class RandomModel:
    """Replays the current example's script; padding words make replies consume tokens."""

    def __init__(self) -> None:
        self.script: list = []
        self.requests = 0

    def __call__(self, request: ScriptedRequest) -> Reply:
        self.requests += 1
        if request.kind == "completions":
            turn = request.text.count("<information>") - 1
            item = self.script[min(turn, len(self.script) - 1)]
            if isinstance(item, str):
                return Reply(item)
            return Reply("pad " * 7 + "<search> Paris </search>")
        if not request.body.get("tools"):
            return Reply("<answer> final </answer>")
        turn = sum(1 for m in request.body["messages"] if m["role"] == "assistant")
        item = self.script[min(turn, len(self.script) - 1)]
        if isinstance(item, str):
            return Reply(item)
        calls = [{"id": f"c{turn}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                 for i, (n, a) in enumerate(item)]
        return Reply("thinking " * 5, tool_calls=calls)


def _check(trace, env: FakeSearchEnv, budget: Budget, requests: int) -> None:
    regular = [s for s in trace.steps if s.llm is not None and not s.notes.get("forced_final")]
    forced = [s for s in trace.steps if s.notes.get("forced_final")]
    assert len(forced) <= 1
    if budget.max_tool_calls is not None:
        assert trace.usage.tool_calls <= budget.max_tool_calls
        assert len(env.calls) <= budget.max_tool_calls
    if budget.max_turns is not None:
        assert len(regular) <= budget.max_turns
        assert requests <= budget.max_turns + 1
    if budget.max_tokens is not None:
        assert sum(s.llm.completion_tokens for s in regular) <= budget.max_tokens
    if forced:
        assert trace.stop_reason == "budget"


def test_budget_is_never_exceeded_over_random_tool_call_sequences() -> None:
    model = RandomModel()
    with ScriptedServer(model) as server:

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(script=st.lists(TURN, min_size=1, max_size=6), budget=BUDGETS,
               agent_name=st.sampled_from(["react", "search-r1"]))
        def check(script: list, budget: Budget, agent_name: str) -> None:
            model.script, model.requests = script, 0
            env = FakeSearchEnv(tools=("search", "visit"))
            agent = ReactAgent() if agent_name == "react" else SearchR1Agent()

            async def go():
                async with OpenAIClient(server.url, "m") as llm:
                    return await run_episode(RolloutQuestion(id="q", question="Where is Paris?"), agent,
                                             env, llm, budget, Decoding(max_tokens=30))
            trace = asyncio.run(go())
            _check(trace, env, budget, model.requests)

        check()
