"""Injected endpoint faults: retries where they help, typed errors where they don't, never a hang."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.errors import EndpointError
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget, Decoding
from aethersearch.rollout.runner import run_questions
from aethersearch.testing.scripted_server import Faults, ScriptedServer
from tests.agents.fakes import FakeSearchEnv
from tests.rollout import helpers


def test_twenty_percent_faults_every_question_ends_with_a_prediction_or_typed_error(tmp_path: Path) -> None:
    qs = helpers.questions(40)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    agent = SearchR1Agent()
    faults = Faults(rate=0.2, retry_after_s=0.05, stall_s=3.0, seed=7)
    with ScriptedServer(helpers.MODEL, latency_s=0.005, faults=faults) as server:
        llm = OpenAIClient(server.url, "m", call_timeout_s=0.3, deadline_s=2.0, max_retries=4,
                           backoff_base_s=0.02, backoff_cap_s=0.2, seed=1)
        fp = helpers.fingerprint(rollout, agent, server.url, count=len(qs))
        start = time.monotonic()
        summary = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                                llm=llm, concurrency=8, question_timeout_s=5.0)
        wall = time.monotonic() - start
        injected = dict(server.stats.faults)
    assert set(injected) == {"429", "500", "reset", "stall"}, injected
    assert llm.retries > 0
    traces = {t["id"]: t for t in read_jsonl(tmp_path / "run" / "traces.jsonl")}
    assert set(traces) == {q.id for q in qs}
    for q in qs:
        t = traces[q.id]
        if t["outcome"] == "answered":
            assert t["prediction"] == helpers.answer_for(q.question)
        else:
            assert t["outcome"] == "endpoint_error" and t["error"], t
    assert summary.outcomes.get("answered", 0) >= 30
    # bounded by the per-call deadline and the per-question deadline, far from a hang
    assert wall < 5.0 * 40 / 8


def test_429_retry_after_is_honoured_then_a_typed_transient_error() -> None:
    faults = Faults(rate=1.0, kinds=("429",), retry_after_s=0.2)
    with ScriptedServer(helpers.MODEL, faults=faults) as server:

        async def go():
            async with OpenAIClient(server.url, "m", max_retries=2, seed=0) as llm:
                start = time.monotonic()
                with pytest.raises(EndpointError) as info:
                    await llm.complete("Question: x\n", Decoding())
                return time.monotonic() - start, info.value
        elapsed, error = asyncio.run(go())
        assert server.stats.requests == 3
    assert elapsed >= 0.4 and error.transient and error.status == 429
    assert "HTTP 429" in str(error) and "giving up after 2 retries" in str(error)


def test_non_transient_errors_are_not_retried() -> None:
    with ScriptedServer(helpers.MODEL) as server:
        bad = [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "x", "type": "function", "function": {"name": "search", "arguments": "{oops"}}]}]

        async def go():
            async with OpenAIClient(server.url, "m", max_retries=5) as llm:
                with pytest.raises(EndpointError) as info:
                    await llm.chat(bad, Decoding())
                return info.value
        error = asyncio.run(go())
        assert server.stats.requests == 1
    assert error.status == 400 and not error.transient


def test_stalled_server_hits_the_total_deadline_not_a_hang() -> None:
    faults = Faults(rate=1.0, kinds=("stall",), stall_s=30.0)
    with ScriptedServer(helpers.MODEL, faults=faults) as server:

        async def go():
            async with OpenAIClient(server.url, "m", call_timeout_s=0.2, deadline_s=0.7,
                                    backoff_base_s=0.01) as llm:
                start = time.monotonic()
                with pytest.raises(EndpointError) as info:
                    await llm.complete("Question: x\n", Decoding())
                return time.monotonic() - start, info.value
        elapsed, error = asyncio.run(go())
    assert elapsed < 1.5 and error.transient
    assert "deadline" in str(error) or "no reply within" in str(error)


def test_client_concurrency_is_bounded() -> None:
    with ScriptedServer(helpers.MODEL, latency_s=0.05) as server:

        async def go():
            async with OpenAIClient(server.url, "m", concurrency=4) as llm:
                await asyncio.gather(*(llm.complete("Question: x\n", Decoding()) for _ in range(16)))
        asyncio.run(go())
        assert server.stats.requests == 16 and server.stats.max_in_flight == 4
