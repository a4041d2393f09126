"""The OpenAI client's retry policy per HTTP status, and the scripted server's strict conversation checks."""

from __future__ import annotations

import asyncio
import email.utils
import time
from pathlib import Path

import pytest
from aiohttp import web

from aethersearch.agents.llm import OpenAIClient, _retry_after
from aethersearch.agents.react import tool_schema
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.errors import EndpointError
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget, Decoding
from aethersearch.rollout.runner import run_questions
from aethersearch.testing.scripted_server import Faults, Reply, ScriptedServer
from tests.agents.fakes import FakeSearchEnv
from tests.rollout import helpers


def _fail_with(status: str) -> tuple[EndpointError, int]:
    with ScriptedServer(helpers.MODEL, faults=Faults(rate=1.0, kinds=(status,))) as server:

        async def go() -> EndpointError:
            async with OpenAIClient(server.url, "m", max_retries=2, backoff_base_s=0.01, seed=0) as llm:
                with pytest.raises(EndpointError) as info:
                    await llm.complete("Question: x\n", Decoding())
                return info.value
        error = asyncio.run(go())
        return error, server.stats.requests


@pytest.mark.parametrize("status", ["408", "409", "500", "502", "503"])
def test_transient_statuses_are_retried_up_to_the_cap(status: str) -> None:
    error, requests = _fail_with(status)
    assert requests == 3  # one try + max_retries=2
    assert error.transient and error.status == int(status)
    assert "giving up after 2 retries" in str(error)


@pytest.mark.parametrize("status", ["400", "401", "404", "422"])
def test_other_statuses_fail_at_once_without_retry(status: str) -> None:
    error, requests = _fail_with(status)
    assert requests == 1
    assert not error.transient and error.status == int(status)
    assert "not retried" in error.fix


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert _retry_after("3") == 3.0
    assert _retry_after(None) is None and _retry_after("soon") is None
    later = email.utils.formatdate(time.time() + 5, usegmt=True)
    assert 3.0 <= _retry_after(later) <= 5.5  # type: ignore[operator]


def test_a_non_transient_error_is_a_recorded_outcome_then_retried_on_resume(tmp_path: Path) -> None:
    # 401 (bad credentials) is not retried call by call, but fixing the key and rerunning must retry it;
    # a 400 refusal of the request itself is the deterministic `request_rejected` (tests/rollout/test_failures.py)
    qs = helpers.questions(3)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    agent = SearchR1Agent()
    with ScriptedServer(helpers.MODEL, faults=Faults(rate=1.0, kinds=("401",))) as bad:
        fp = helpers.fingerprint(rollout, agent, bad.url, count=len(qs))
        summary = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                                llm=OpenAIClient(bad.url, "m"))
        assert bad.stats.requests == 3  # one call per question, none retried
    assert summary.outcomes == {"endpoint_error": 3} and summary.errored == 3
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl")
    assert all(t["outcome"] == "endpoint_error" and "HTTP 401" in t["error"] for t in traces)
    with ScriptedServer(helpers.MODEL) as good:
        fp = helpers.fingerprint(rollout, agent, good.url, count=len(qs))
        again = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                              llm=OpenAIClient(good.url, "m"))
    assert again.outcomes == {"answered": 3} and again.skipped == 0
    latest = {t["id"]: t for t in read_jsonl(tmp_path / "run" / "traces.jsonl")}
    assert {t["attempt"] for t in latest.values()} == {2}


def _chat_status(messages: list[dict], tools: list[dict] | None) -> int:
    with ScriptedServer(lambda request: Reply("<answer> ok </answer>")) as server:

        async def go() -> int:
            async with OpenAIClient(server.url, "m", max_retries=0) as llm:
                try:
                    await llm.chat(messages, Decoding(), tools)
                except EndpointError as exc:
                    return exc.status or 0
                return 200
        return asyncio.run(go())


def _turn(name: str, arguments: str) -> list[dict]:
    return [{"role": "user", "content": "Question: x\n"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "no results"}]


@pytest.mark.parametrize(("messages", "expected"), [
    (_turn("search", '{"query": "Paris"}'), 200),
    (_turn("search", "{}"), 400),                        # placeholder arguments missing 'query'
    (_turn("search", '{"query": 5}'), 400),              # wrong type
    (_turn("search", '{"query": "x", "k": 3}'), 400),    # extra argument
    (_turn("browse", '{"query": "Paris"}'), 400),        # a tool that was never offered
    (_turn("search", '{"query": "Par'), 400),            # broken JSON
    ([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "zz", "content": "x"}], 400),
])
def test_scripted_server_rejects_replayed_invalid_tool_calls_like_a_strict_server(
        messages: list[dict], expected: int) -> None:
    assert _chat_status(messages, [tool_schema("search")]) == expected


# ---- the server's tokenizer routes wait and retry like a model call --------------------------------------

async def _tokenizer_server(replies: list[tuple[float, int]]) -> tuple[web.AppRunner, str, list[float]]:
    """A server whose ``/tokenize`` answers each request with the next (delay, status) in ``replies``."""
    seen: list[float] = []

    async def tokenize(request: web.Request) -> web.Response:
        delay, status = replies[min(len(seen), len(replies) - 1)]
        seen.append(time.monotonic())
        await asyncio.sleep(delay)
        if status != 200:
            return web.json_response({"error": "busy"}, status=status)
        return web.json_response({"tokens": [7, 8]})

    async def props(request: web.Request) -> web.Response:
        return web.json_response({}, status=404)

    app = web.Application()
    app.router.add_post("/tokenize", tokenize)
    app.router.add_get("/props", props)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}/v1", seen


def test_a_tokenize_call_behind_a_busy_server_is_retried_under_the_call_timeout_not_a_probe_s() -> None:
    # llama-cpp-python answers one request at a time: a tokenize call waits behind the generations in flight.
    # It gets a model call's timeout and retries (here: a slow reply, then a 503, then the ids), and it is not
    # counted as a model call.
    async def go() -> tuple[tuple[int, ...], int, int]:
        runner, url, seen = await _tokenizer_server([(0.0, 200), (1.0, 200), (0.0, 503), (0.0, 200)])
        try:
            async with OpenAIClient(url, "m", call_timeout_s=0.3, max_retries=3, backoff_base_s=0.01,
                                    seed=0) as llm:
                ids = await llm.served.tokenize("a b")
                return ids, len(seen), llm.calls
        finally:
            await runner.cleanup()

    ids, requests, calls = asyncio.run(go())
    assert ids == (7, 8) and calls == 0
    assert requests == 4  # the probe's own /tokenize, then the slow try, the 503 and the answer


def test_a_tokenize_route_that_never_answers_says_how_long_it_waited_and_how_often() -> None:
    async def go() -> EndpointError:
        runner, url, _ = await _tokenizer_server([(0.0, 200), (1.0, 200)])
        try:
            async with OpenAIClient(url, "m", call_timeout_s=0.2, max_retries=1, backoff_base_s=0.01,
                                    seed=0) as llm:
                await llm.served.facts()  # the probe (first reply) finds the route
                with pytest.raises(EndpointError) as info:
                    await llm.served.tokenize("a b")
                return info.value
        finally:
            await runner.cleanup()

    error = asyncio.run(go())
    assert error.transient and error.kind == "timeout"
    assert "/tokenize: no reply within 0.2s" in str(error) and "giving up after 1 retries" in str(error)
