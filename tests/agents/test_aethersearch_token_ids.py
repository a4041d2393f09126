"""``--agent aethersearch`` continues by token ids where the server allows it, and says why when it cannot.

Driven by the scripted server: with ``token_completion=True`` it has llama-server's
``POST /completion`` (token-id prompt, generated ids back) and names its EOS in
``/props``; without, it has neither, so the loop must fall back to text and record
which probe failed. The real served model is checked in
``tests/realmodel/test_aethersearch_token_ids.py``.
"""

from __future__ import annotations

import asyncio
import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from aethersearch.agents.aethersearch_loop import AetherSearchAgent
from aethersearch.agents.llm import OpenAIClient
from aethersearch.environment import ToolResult
from aethersearch.errors import ConfigError
from aethersearch.records import Budget, Decoding, Document, RolloutQuestion, ToolCall, Trace
from aethersearch.rollout.runner import run_episode
from aethersearch.rollout.session import served_model
from aethersearch.testing import scripted_server
from aethersearch.testing.scripted_server import SCRIPTED_EOS, Reply, ScriptedRequest, ScriptedServer

SCRIPT = ["<think>a</think><search> Paris </search>", "<answer> Paris </answer>"]
DOCS = [Document(id="d1", title="Paris", text="Paris is the capital of France."),
        Document(id="d2", title="Lyon", text="Lyon is a city in France.")]


class TwoDocs:
    """Returns both documents for every query."""

    tools = ("search",)

    async def search(self, query: str, k: int) -> ToolResult:
        hits = DOCS[:k]
        return ToolResult(hits, ToolCall(tool="search", arguments={"query": query, "k": k},
                                         returned_ids=[d.id for d in hits]))

    async def close(self) -> None:
        return None


def _episode(token_completion: bool, agent: AetherSearchAgent | None = None, engine: str | None = None
             ) -> tuple[Trace, list[ScriptedRequest], dict[str, Any] | None]:
    requests: list[ScriptedRequest] = []

    def respond(request: ScriptedRequest) -> Reply:
        if request.text == "Hello":  # the token route's one-token probe
            return Reply("hi")
        requests.append(request)
        return Reply(SCRIPT[len(requests) - 1])

    chosen = agent or AetherSearchAgent()

    async def go() -> tuple[Trace, dict[str, Any] | None]:
        with ScriptedServer(respond, chat_template="chatml", token_completion=token_completion,
                            engine=engine) as server:
            recorded = await asyncio.to_thread(served_model, OpenAIClient(server.url, "m"), 1, chosen)
            async with OpenAIClient(server.url, "m") as llm:
                trace = await run_episode(RolloutQuestion(id="q", question="Where is Paris"), chosen, TwoDocs(),
                                          llm, Budget(max_tool_calls=None, max_turns=None), Decoding())
        return trace, recorded

    trace, recorded = asyncio.run(go())
    return trace, requests, recorded


def test_token_ids_keep_the_eos_id_in_the_context() -> None:
    trace, requests, recorded = _episode(token_completion=True)
    assert [r.kind for r in requests] == ["completion", "completion"]
    first, second = (r.body["prompt"] for r in requests)
    assert all(isinstance(t, int) for t in first + second)
    # the second context is the first, the action's generated ids, the EOS id, then the observation's ids
    assert second[:len(first)] == first
    observation = "<information>" + "\n".join(d.contents for d in DOCS) + "</information>"
    assert requests[1].text == requests[0].text + SCRIPT[0] + SCRIPTED_EOS + observation
    assert trace.prediction == "Paris"
    assert [s.notes["continuation"] for s in trace.steps] == ["token_ids", "token_ids"]
    assert trace.steps[0].notes["eos_appended"] == SCRIPTED_EOS
    # the response token count is the id context's length, EOS ids included
    assert trace.steps[1].notes["response_tokens"] == len(second) - len(first) + len(SCRIPT[1].split()) + 1
    assert recorded is not None and recorded["continuation"]["mode"] == "token_ids"
    assert recorded["continuation"]["route"] == "/completion"


def test_without_a_token_route_it_continues_by_text_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    # every reply is created a second after the last: the run's probe and the episode's probe see two
    # different `created` fields, and the reason they record must still be one (it quoted the field)
    ticks = itertools.count(1_800_000_000)
    monkeypatch.setattr(scripted_server, "time", SimpleNamespace(time=lambda: next(ticks)))
    trace, requests, recorded = _episode(token_completion=False)
    assert [r.kind for r in requests] == ["completions", "completions"]
    assert isinstance(requests[1].body["prompt"], str)
    assert [s.notes["continuation"] for s in trace.steps] == ["text", "text"]
    reason = trace.steps[0].notes["continuation_reason"]
    # the EOS is the agent's (no /props names one); each route that failed is named, and why
    assert "POST /completion: HTTP 404" in reason and "POST /generate: HTTP 404" in reason
    assert "POST /v1/completions: HTTP 200" in reason  # text back, no generated ids
    assert recorded is not None and recorded["continuation"]["mode"] == "text"
    assert recorded["continuation"]["reason"] == reason and recorded["continuation"]["eos_text"] == SCRIPTED_EOS


@pytest.mark.parametrize(("engine", "route", "kind"), [("sglang", "/generate", "generate"),
                                                       ("vllm", "/v1/completions", "completions")])
def test_sglang_and_vllm_continue_by_token_ids(engine: str, route: str, kind: str) -> None:
    trace, requests, recorded = _episode(token_completion=False, engine=engine)
    assert [r.kind for r in requests] == [kind, kind]
    field = "input_ids" if engine == "sglang" else "prompt"
    first, second = (r.body[field] for r in requests)
    assert all(isinstance(t, int) for t in first + second)
    if engine == "vllm":
        assert all(r.body["return_token_ids"] is True for r in requests)
    # the second context is the first, the action's ids, the EOS id the server returned, the observation's ids
    assert second[:len(first)] == first
    observation = "<information>" + "\n".join(d.contents for d in DOCS) + "</information>"
    assert requests[1].text == requests[0].text + SCRIPT[0] + SCRIPTED_EOS + observation
    assert requests[1].text.count(SCRIPTED_EOS) == requests[0].text.count(SCRIPTED_EOS) + 1  # put back once
    assert trace.prediction == "Paris"
    assert [s.notes["continuation"] for s in trace.steps] == ["token_ids", "token_ids"]
    assert [s.notes["continuation_route"] for s in trace.steps] == [route, route]
    assert recorded is not None and recorded["continuation"]["route"] == route
    assert trace.steps[0].notes["eos_appended"] == SCRIPTED_EOS


def test_continuation_text_is_honoured_on_a_server_that_allows_ids() -> None:
    trace, requests, recorded = _episode(token_completion=True, agent=AetherSearchAgent(continuation="text"))
    assert [r.kind for r in requests] == ["completions", "completions"]
    assert trace.steps[0].notes["continuation_reason"] == "continuation=text was asked for"
    assert recorded is not None and recorded["continuation"]["mode"] == "text"


def test_an_unknown_continuation_is_refused() -> None:
    with pytest.raises(ConfigError, match="auto, text"):
        AetherSearchAgent(continuation="ids")
