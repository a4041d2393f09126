"""The OpenAI client's retry policy per HTTP status, and the scripted server's strict conversation checks."""

from __future__ import annotations

import asyncio
import email.utils
import time
from pathlib import Path

import pytest

from aethersearch.agents.llm import OpenAIClient, _retry_after
from aethersearch.agents.react import tool_schema
from aethersearch.testing.scripted_server import Faults, Reply, ScriptedServer
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.errors import EndpointError
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget, Decoding
from aethersearch.rollout.runner import run_questions
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
