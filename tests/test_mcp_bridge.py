"""`aether mcp`, driven by the official MCP SDK's own client (``ClientSession``) over stdio and HTTP.

An agent that knows only MCP runs the demo's releases end to end: its episodes land in a run
directory that `aether score` and `factorise` read like any other, under the same budget, mask
and refusal rules; a disconnect mid-episode and a reconnect continue the same episode.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("mcp", reason="the `mcp` extra is not installed (pip install 'aethersearch[mcp]')")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from aethersearch.jsonl import read_jsonl  # noqa: E402
from tests.serving import free_port  # noqa: E402


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aethersearch.demo import build_demo_inputs, run_sandbox_demo

    root = tmp_path_factory.mktemp("mcp")
    build_demo_inputs(root)
    run_sandbox_demo(root)
    return root


def _data(result: Any) -> dict[str, Any]:
    assert not result.isError, result.content
    return dict(result.structuredContent or json.loads(result.content[0].text))


def _error_text(result: Any) -> str:
    assert result.isError, result
    return " ".join(getattr(c, "text", "") for c in result.content)


@asynccontextmanager
async def stdio_session(release: Path, out: Path, index: Path, *extra: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=[
        "-m", "aethersearch.cli", "mcp", str(release), "--out", str(out), "--index", str(index), *extra])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def start_http_server(demo: Path, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    """``aether mcp --transport http`` over the sandbox release; (process, URL, run directory) once it listens."""
    import socket

    port = free_port()
    out = tmp_path / "sandbox_mcp_run"
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "mcp", str(demo / "sandbox_release"), "--out",
                             str(out), "--index", str(demo / "sandbox_index"), "--transport", "http", "--port",
                             str(port), *extra], stdout=subprocess.DEVNULL,
                            stderr=(tmp_path / "server.log").open("wb"))  # a file: a full pipe would block the server
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            time.sleep(0.1)
    return proc, f"http://127.0.0.1:{port}/mcp", out


@pytest.fixture()
def http_server(demo: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    proc, url, out = start_http_server(demo, tmp_path, "--max-tool-calls", "3")
    try:
        yield url, out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_session_that_ends_and_a_ctrl_c_log_no_traceback(demo: Path, tmp_path: Path) -> None:
    # a connected client keeps the SDK's stream of server-sent events open; when its session ended (or the
    # server stopped) the SDK logged that closed stream as an error, with a framed traceback
    import signal

    proc, url, out = start_http_server(demo, tmp_path)

    async def client() -> None:
        async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()
            assert (await session.list_tools()).tools

    asyncio.run(client())
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) in (0, 130)
    log = (tmp_path / "server.log").read_text()
    assert "Traceback" not in log and "Error" not in log, log[-2000:]
    assert (out / "run.json").is_file()


def test_the_frozen_corpus_over_stdio_lists_tools_runs_episodes_and_is_scored(demo: Path, tmp_path: Path) -> None:
    from aethersearch.scoring.api import score_run

    out = tmp_path / "mcp_run"

    async def agent() -> tuple[list[str], list[Any], str]:
        async with stdio_session(demo / "release", out, demo / "index", "--max-tool-calls", "2") as session:
            tools = sorted(t.name for t in (await session.list_tools()).tools)
            listed = _data(await session.call_tool("list_questions", {"limit": 3}))["questions"]
            hits = []
            for row in listed:
                started = _data(await session.call_tool("start", {"question_id": row["id"]}))
                found = _data(await session.call_tool("search", {"query": started["question"], "topk": 3}))
                hits.append(found)
                await session.call_tool("answer", {"answer": found["documents"][0]["title"]})
            bad = await session.call_tool("search", {"query": "", "topk": 3})
            return tools, hits, _error_text(bad)

    tools, hits, refused = asyncio.run(agent())
    assert tools == ["answer", "list_questions", "search", "start"]
    assert all(len(found["documents"]) == 3 and found["tool_calls_left"] == 1 for found in hits)
    assert "query" in refused.lower() or "string" in refused.lower()
    fingerprint = orjson.loads((out / "run.json").read_bytes())
    assert fingerprint["agent"] == "mcp-client" and fingerprint["budget"]["max_tool_calls"] == 2
    assert len(fingerprint["agent_config"]["tool_schema_sha256"]) == 64
    assert fingerprint["corpus_hash"] and fingerprint["index_hash"]
    traces = read_jsonl(out / "traces.jsonl")
    assert len(traces) == 3 and {t["outcome"] for t in traces} == {"answered"}
    scores = score_run(out, demo / "release")
    assert scores.outcomes["answered"] == 3 and scores.errors.missing == len(scores.per_question) - 3


def test_search_returns_what_retrieve_returns_for_the_same_query(demo: Path, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from aethersearch.search.index_dir import open_index
    from aethersearch.search.server import create_app

    query = "the restless garden of bravin"

    async def agent() -> dict[str, Any]:
        async with stdio_session(demo / "release", tmp_path / "run", demo / "index") as session:
            qid = _data(await session.call_tool("list_questions", {"limit": 1}))["questions"][0]["id"]
            await session.call_tool("start", {"question_id": qid})
            return _data(await session.call_tool("search", {"query": query, "topk": 5}))

    found = asyncio.run(agent())
    opened = open_index(demo / "index")
    served = TestClient(create_app(opened.index, opened.store)).post(
        "/retrieve", json={"queries": [query], "topk": 5, "return_scores": False}).json()["result"][0]
    assert [d["id"] for d in found["documents"]] == [str(hit["id"]) for hit in served]
    assert [d["contents"] for d in found["documents"]] == [hit["contents"] for hit in served]


def test_the_masked_sandbox_over_http_with_budget_locked_pages_and_a_reconnect(
        demo: Path, http_server: tuple[str, Path]) -> None:
    url, out = http_server

    async def first_connection() -> tuple[str, list[str], str]:
        async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()
            tools = sorted(t.name for t in (await session.list_tools()).tools)
            qid = _data(await session.call_tool("list_questions", {"limit": 1}))["questions"][0]["id"]
            question = _data(await session.call_tool("start", {"question_id": qid}))["question"]
            await session.call_tool("search", {"query": question, "topk": 3})
            locked = await session.call_tool("visit", {"page": "Nowhere at all"})
            return qid, tools, _error_text(locked)

    qid, tools, locked = asyncio.run(first_connection())
    assert tools == ["answer", "list_questions", "search", "start", "visit"]
    assert "Nowhere at all" in locked or "page" in locked.lower()

    async def reconnect() -> tuple[str, dict[str, Any]]:
        async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()
            _data(await session.call_tool("start", {"question_id": qid}))  # continues the same episode
            spent = await session.call_tool("search", {"query": "anything", "topk": 3})  # the budget's third call
            over = await session.call_tool("search", {"query": "anything else", "topk": 3})
            done = _data(await session.call_tool("answer", {"answer": "I don't know"}))
            again = await session.call_tool("start", {"question_id": qid})
            return _error_text(over) + " | " + _error_text(again), {"spent": spent.isError, **done}

    errors, done = asyncio.run(reconnect())
    assert "tool_calls" in errors and "already finished" in errors
    assert done["outcome"] == "abstained" and done["spent"] is False
    [trace] = read_jsonl(out / "traces.jsonl")
    calls = [c for step in trace["steps"] for c in step["tool_calls"]]
    assert [c["tool"] for c in calls] == ["search", "visit", "search"]  # both connections, one episode
    assert calls[1]["error"] and trace["stop_reason"] == "budget"
    fingerprint = orjson.loads((out / "run.json").read_bytes())
    assert fingerprint["environment"] == "sandbox" and fingerprint["sandbox"]["mask_policy"]
    _read_like_any_run(demo, out)


def _read_like_any_run(demo: Path, out: Path) -> None:
    """score, factorise, report and view read the MCP run like any other run."""
    from fastapi.testclient import TestClient

    from aethersearch.corpus.store import open_store
    from aethersearch.diagnostics.probes import factorise_run
    from aethersearch.report.html import write_report
    from aethersearch.report.viewer.app import create_app, load_viewer
    from aethersearch.scoring.api import score_run

    release = demo / "sandbox_release"
    scores = score_run(out, release)
    assert scores.outcomes["abstained"] == 1
    factorised = factorise_run(out, release, store=open_store(demo / "sandbox_corpus"))
    assert factorised["n"] == 1 and (out / "factorised.json").is_file()
    assert write_report([out], out / "report.html").stat().st_size > 1000
    [trace] = read_jsonl(out / "traces.jsonl")
    page = TestClient(create_app(load_viewer([out], release=release))).get(f"/q/{trace['id']}")
    assert page.status_code == 200 and "visit" in page.text


def test_an_episode_its_deadline_ended_between_calls_is_recorded_once(demo: Path, tmp_path: Path) -> None:
    from aethersearch.errors import AetherError
    from aethersearch.mcp_bridge.episodes import RemoteRun
    from aethersearch.pipeline import index_search
    from aethersearch.records import Budget

    async def episode() -> str:
        run = RemoteRun(demo / "release", tmp_path / "run", index_search(demo / "index"),
                        budget=Budget(max_tool_calls=3, max_turns=None), tool_schema_sha256="0" * 64,
                        tools=("search",), question_timeout_s=0.2)
        question = next(iter(run.questions))
        await run.start(question)
        await asyncio.sleep(0.5)  # the client goes quiet past the episode's deadline
        try:
            await run.call(question, "search", {"query": "anything", "topk": 3})
        except AetherError as exc:
            message = str(exc)
        else:
            raise AssertionError("a call after the deadline must be refused")
        await run.close()
        return message

    assert "ended" in asyncio.run(episode())
    [trace] = read_jsonl(tmp_path / "run" / "traces.jsonl")
    assert trace["error_kind"] == "deadline" and trace["stop_reason"] == "deadline"
