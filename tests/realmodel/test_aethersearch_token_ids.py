"""``--agent aethersearch`` on the real served model continues by token ids, EOS id kept in the context.

The server is ``scripts/serve_gguf.py`` (llama-cpp-python), whose ``/v1/completions``
refuses token-id prompts (its request type takes strings; HTTP 500 with pydantic's message) and whose added
``POST /completion`` takes them in llama-server's shape. The checks: the loop's
probe finds the token route (EOS ``<|im_end|>`` as one id); ``/v1/completions``
really does refuse a token-id prompt (so the probe did not pick a route by name);
a context holding the EOS id is continued; and in real episodes every request
after the first is the previous context, the ids the model generated, the EOS id
when it ended there, then the observation's ids (no re-tokenization), with every
step marked ``continuation: "token_ids"``.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

import pytest

from aethersearch.agents.aethersearch_loop import AetherSearchAgent
from aethersearch.agents.llm import OpenAIClient, TokenCompletion
from aethersearch.environment import ToolResult
from aethersearch.records import Budget, Decoding, Document, RolloutQuestion, ToolCall, Trace
from aethersearch.rollout.runner import run_episode
from tests.realmodel.conftest import RealServer

pytestmark = [pytest.mark.realmodel, pytest.mark.slow, pytest.mark.timeout(900)]

DOCS = [Document(id="d1", title="Paris", text="Paris is the capital and largest city of France."),
        Document(id="d2", title="France", text="France is a country in Western Europe.")]


class TwoDocs:
    """Returns both documents for every query."""

    tools = ("search",)

    async def search(self, query: str, k: int) -> ToolResult:
        return ToolResult(DOCS[:k], ToolCall(tool="search", arguments={"query": query, "k": k},
                                             returned_ids=[d.id for d in DOCS[:k]]))

    async def close(self) -> None:
        return None


def _post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=300) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def test_v1_completions_refuses_token_ids_and_completion_takes_them(real_server: RealServer) -> None:
    status, refusal = _post(real_server.url + "/completions", {"model": real_server.model, "prompt": [19556],
                                                              "max_tokens": 1})
    # llama-cpp-python answers its request validation error with HTTP 500
    assert status != 200 and "Input should be a valid string" in str(refusal), (status, refusal)
    status, reply = _post(real_server.root + "/completion", {"prompt": [19556], "n_predict": 2, "temperature": 0,
                                                             "return_tokens": True})
    assert status == 200 and reply["stop_type"] in ("eos", "limit") and len(reply["tokens"]) <= 2


class RecordingClient(OpenAIClient):
    """Keeps every token-id context sent and the reply's ids."""

    sent: list[tuple[list[int], TokenCompletion]]

    async def complete_ids(self, ids: Sequence[int], decoding: Decoding, **route: Any) -> TokenCompletion:
        reply = await super().complete_ids(ids, decoding, **route)
        self.sent.append((list(ids), reply))
        return reply


def test_a_context_holding_the_eos_id_is_continued(real_server: RealServer) -> None:
    async def go() -> tuple[TokenCompletion, TokenCompletion, int]:
        async with OpenAIClient(real_server.url, real_server.model, concurrency=1) as llm:
            route = await llm.served.token_route()
            assert route.eos_token_id is not None
            first_ids = list(await llm.served.tokenize("<|im_start|>user\nSay hello.<|im_end|>\n"
                                                       "<|im_start|>assistant\n"))
            first = await llm.complete_ids(first_ids, Decoding(max_tokens=40))
            more = list(await llm.served.tokenize("\n<|im_start|>user\nAgain.<|im_end|>\n<|im_start|>assistant\n"))
            second = await llm.complete_ids([*first_ids, *first.token_ids, route.eos_token_id, *more],
                                            Decoding(max_tokens=40))
            return first, second, route.eos_token_id

    first, second, eos = asyncio.run(go())
    assert eos not in first.token_ids and eos not in second.token_ids  # the EOS id is the caller's to add
    assert first.completion.text and second.completion.text
    assert second.completion.prompt_tokens > first.completion.prompt_tokens + len(first.token_ids)


def test_episodes_continue_by_token_ids_with_the_eos_id_kept(real_server: RealServer) -> None:
    questions = ["what is the capital of france", "who wrote hamlet", "where is the eiffel tower"]

    async def go() -> tuple[Any, list[Trace], list[tuple[list[int], TokenCompletion]], tuple[int, ...]]:
        async with RecordingClient(real_server.url, real_server.model, concurrency=1) as llm:
            llm.sent = []
            route = await llm.served.token_route()
            traces = []
            for n, question in enumerate(questions):
                traces.append(await run_episode(RolloutQuestion(id=f"q{n}", question=question),
                                                AetherSearchAgent(max_action_tokens=60), TwoDocs(), llm,
                                                Budget(max_tool_calls=None, max_turns=None), Decoding()))
            return route, traces, llm.sent, await llm.served.tokenize("<|im_end|>")

    route, traces, sent, eos = asyncio.run(go())
    assert route.mode == "token_ids" and route.route == "/completion"
    assert route.eos_text == "<|im_end|>" and (route.eos_token_id,) == eos
    assert len(sent) == sum(len(t.steps) for t in traces)
    calls = iter(sent)
    for trace in traces:
        previous: tuple[list[int], TokenCompletion, Any] | None = None
        for step in trace.steps:
            ids, reply = next(calls)
            if previous is not None:  # previous context + generated ids + EOS id if it ended there + observation
                prior_ids, prior_reply, prior_step = previous
                grown = [*prior_ids, *prior_reply.token_ids, *(eos if prior_reply.ended_eos else ())]
                assert ids[:len(grown)] == grown
                assert len(ids) - len(grown) == prior_step.notes["observation_tokens"]
            previous = (ids, reply, step)
    for trace in traces:
        assert trace.steps, trace
        for step in trace.steps:
            assert step.notes["continuation"] == "token_ids"
            ended = step.llm is not None and step.llm.finish_reason == "stop"
            assert step.notes["eos_appended"] == ("<|im_end|>" if ended else "")
        # the recorded response is each action's text, the EOS text where it ended there, and each observation
        rebuilt = "".join((s.llm.text if s.llm else "") + s.notes["eos_appended"] + (s.observation or "")
                          for s in trace.steps)
        assert trace.response == rebuilt
        assert trace.steps[-1].notes["response_tokens"] >= sum(1 for s in trace.steps if s.notes["eos_appended"])
