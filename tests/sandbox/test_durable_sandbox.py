"""A sandbox that holds for days: bounded state, durable actions, recovery after kill -9, hostile bodies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from aethersearch.sandbox.action_log import read_episodes
from aethersearch.sandbox.client import SandboxClient
from aethersearch.sandbox.environment import HttpSandboxFactory
from aethersearch.sandbox.episode import Sandbox
from aethersearch.sandbox.server import SandboxLimits, create_app
from aethersearch.search.http_guard import HttpTimeouts

ROOT = Path(__file__).resolve().parents[2]


def _http(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sandbox")


def test_nested_json_is_refused_and_logged_never_a_500(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    """~1,000 nested arrays (under the body limit) made repr() raise RecursionError: a 500, unlogged."""
    app = create_app(mini_sandbox, action_log=tmp_path / "log.jsonl")
    nested = ("[" * 1000 + "]" * 1000).encode()
    deep_field = b'{"query": ' + nested + b"}"

    async def scenario() -> None:
        async with _http(app) as http:
            eid = (await http.post("/episodes", json={"question_id": "q1"})).json()["episode_id"]
            for tool, raw in (("search", nested), ("visit", nested), ("search", deep_field),
                              ("visit", b'{"page": ' + nested + b"}")):
                response = await http.post(f"/episodes/{eid}/{tool}", content=raw,
                                           headers={"content-type": "application/json"})
                assert response.status_code == 422, (tool, response.text[:200])
                assert response.json()["call"]["error"]
            created = await http.post("/episodes", content=b'{"question_id": ' + nested + b"}",
                                      headers={"content-type": "application/json"})
            assert created.status_code in (400, 422)
            assert (await http.post(f"/episodes/{eid}/close")).status_code == 200

    asyncio.run(scenario())
    (logged,) = read_episodes(tmp_path / "log.jsonl").values()
    assert len(logged.calls) == 4 and all(c.error for c in logged.calls)


def test_a_50_mb_body_is_refused_before_it_is_read_and_logged(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    app = create_app(mini_sandbox, action_log=tmp_path / "log.jsonl")
    big = b'{"query": "' + b"x" * (50 << 20) + b'"}'
    read = 0

    async def chunks() -> Any:  # no Content-Length: the bounded streaming read must stop it
        nonlocal read
        for start in range(0, len(big), 1 << 20):
            read += 1 << 20
            yield big[start:start + (1 << 20)]

    async def scenario() -> None:
        async with _http(app) as http:
            eid = (await http.post("/episodes", json={"question_id": "q1"})).json()["episode_id"]
            declared = await http.post(f"/episodes/{eid}/search", content=big,
                                       headers={"content-type": "application/json"})
            assert declared.status_code == 413 and "limit" in declared.json()["detail"]
            assert declared.headers["connection"] == "close"
            streamed = await http.post(f"/episodes/{eid}/visit", content=chunks(),
                                       headers={"content-type": "application/json"})
            assert streamed.status_code == 413 and streamed.json()["call"]["error"]
            health = (await http.get("/health")).json()
            assert health["refusals"]["by_status"]["413"] == 2
            await http.post(f"/episodes/{eid}/close")

    asyncio.run(scenario())
    assert read <= 2 << 20  # it stopped at the first chunk over the 16 KiB limit
    (logged,) = read_episodes(tmp_path / "log.jsonl").values()
    assert [c.arguments for c in logged.calls] == [{"refused": 413}, {"refused": 413}]


def test_a_slow_body_gets_408_and_is_logged(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    limits = SandboxLimits(timeouts=HttpTimeouts(body_timeout_s=0.3))
    app = create_app(mini_sandbox, action_log=tmp_path / "log.jsonl", limits=limits)

    async def trickle() -> Any:  # one byte every 0.1 s: would take seconds
        for byte in b'{"query": "Kane Cornes"}':
            await asyncio.sleep(0.1)
            yield bytes([byte])

    async def scenario() -> None:
        async with _http(app) as http:
            eid = (await http.post("/episodes", json={"question_id": "q1"})).json()["episode_id"]
            started = time.monotonic()
            response = await http.post(f"/episodes/{eid}/search", content=trickle())
            assert response.status_code == 408 and "--body-timeout-s" in response.json()["detail"]
            assert time.monotonic() - started < 2.0
            trace = (await http.get(f"/episodes/{eid}/trace")).json()["trace"]
            assert trace[0]["arguments"] == {"refused": 408}

    asyncio.run(scenario())


def test_closed_episodes_leave_memory_and_their_trace_is_read_back(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    app = create_app(mini_sandbox, action_log=tmp_path / "log.jsonl")

    async def scenario() -> None:
        async with _http(app) as http:
            ids = []
            for n in range(300):
                eid = (await http.post("/episodes", json={"question_id": "q1", "run_id": f"r{n}"})).json()[
                    "episode_id"]
                await http.post(f"/episodes/{eid}/visit", json={"page": "kane", "seq": 0})
                closed = await http.post(f"/episodes/{eid}/close")
                assert len(closed.json()["trace"]) == 1
                ids.append(eid)
            assert len(app.state.episodes) == 0 and (await http.get("/health")).json()["open_episodes"] == 0
            first = (await http.get(f"/episodes/{ids[0]}/trace")).json()
            assert first["closed"] and first["run_id"] == "r0" and first["trace"][0]["returned_ids"] == ["kane"]
            assert "suppressed_ids" not in json.dumps(first)
            late = await http.post(f"/episodes/{ids[5]}/search", json={"query": "x"})
            assert late.status_code == 409 and "closed" in late.json()["detail"]
            assert (await http.get("/episodes/0123/trace")).status_code == 404

    asyncio.run(scenario())


def test_the_action_cap_answers_429_with_the_fix(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    app = create_app(mini_sandbox, action_log=tmp_path / "log.jsonl", limits=SandboxLimits(max_actions=3))

    async def scenario() -> None:
        async with _http(app) as http:
            eid = (await http.post("/episodes", json={"question_id": "q1"})).json()["episode_id"]
            for _ in range(3):
                assert (await http.post(f"/episodes/{eid}/search", json={"query": "Kane"})).status_code == 200
            over = await http.post(f"/episodes/{eid}/search", json={"query": "Kane"})
            assert over.status_code == 429 and "--max-actions" in over.json()["detail"]
            assert len((await http.get(f"/episodes/{eid}/trace")).json()["trace"]) == 3  # the trace stays bounded

    asyncio.run(scenario())
    rows = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert rows[-1]["event"] == "refused" and rows[-1]["status"] == 429


def test_a_retried_action_is_answered_from_the_log_not_run_twice(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    app = create_app(mini_sandbox, action_log=tmp_path / "log.jsonl")

    async def scenario() -> None:
        async with _http(app) as http:
            eid = (await http.post("/episodes", json={"question_id": "q1"})).json()["episode_id"]
            first = await http.post(f"/episodes/{eid}/search", json={"query": "Kane Cornes", "k": 2, "seq": 0})
            again = await http.post(f"/episodes/{eid}/search", json={"query": "Kane Cornes", "k": 2, "seq": 0})
            assert first.status_code == again.status_code == 200 and first.json() == again.json()
            masked = await http.post(f"/episodes/{eid}/visit", json={"page": "graham", "seq": 1})
            assert (await http.post(f"/episodes/{eid}/visit", json={"page": "graham", "seq": 1})).json() == \
                masked.json() and masked.status_code == 404
            ahead = await http.post(f"/episodes/{eid}/visit", json={"page": "kane", "seq": 5})
            assert ahead.status_code == 409 and "seq=2" in ahead.json()["detail"]
            assert len((await http.get(f"/episodes/{eid}/trace")).json()["trace"]) == 2

    asyncio.run(scenario())


def test_a_retried_seq_with_another_action_is_refused_naming_the_logged_one(mini_sandbox: Sandbox,
                                                                              tmp_path: Path) -> None:
    app = create_app(mini_sandbox, action_log=tmp_path / "log.jsonl")

    async def scenario() -> None:
        async with _http(app) as http:
            eid = (await http.post("/episodes", json={"question_id": "q1"})).json()["episode_id"]
            await http.post(f"/episodes/{eid}/search", json={"query": "Kane Cornes", "k": 2, "seq": 0})
            for tool, body in (("visit", {"page": "kane", "seq": 0}),  # another tool
                               ("search", {"query": "Chad Cornes", "k": 2, "seq": 0}),  # another query
                               ("search", {"query": "Kane Cornes", "k": 3, "seq": 0})):  # another k
                wrong = await http.post(f"/episodes/{eid}/{tool}", json=body)
                assert wrong.status_code == 409, (tool, body, wrong.text)
                assert 'was search {"query":"Kane Cornes","k":2}' in wrong.json()["detail"]
                assert "seq=1" in wrong.json()["detail"]
            same = await http.post(f"/episodes/{eid}/search", json={"query": "Kane Cornes", "k": 2, "seq": 0})
            assert same.status_code == 200  # the same action is still answered from the log
            assert len((await http.get(f"/episodes/{eid}/trace")).json()["trace"]) == 1  # nothing logged twice

    asyncio.run(scenario())


def test_replace_takes_over_an_episode_only_with_its_owner_token(mini_sandbox: Sandbox, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"

    async def first_start() -> tuple[str, str]:
        async with _http(create_app(mini_sandbox, action_log=log)) as http:
            created = (await http.post("/episodes", json={"question_id": "q1", "run_id": "shared"})).json()
            eid, owner = created["episode_id"], created["owner"]
            # another client (no token, or its own) cannot close it by replacing it
            for other in ({}, {"owner": "x" * 32}):
                taken = await http.post("/episodes", json={"question_id": "q1", "run_id": "shared", "replace": True,
                                                           **other})
                assert taken.status_code == 403 and "owner token" in taken.json()["detail"], taken.text
            assert (await http.post(f"/episodes/{eid}/search", json={"query": "Kane", "k": 2})).status_code == 200
            # without a run id, each request gets one of its own: two clients never collide by default
            a = (await http.post("/episodes", json={"question_id": "q2"})).json()
            b = (await http.post("/episodes", json={"question_id": "q2"})).json()
            assert a["run_id"] != b["run_id"] and a["run_id"].startswith("run-")
            return eid, owner

    eid, owner = asyncio.run(first_start())
    assert owner not in log.read_text()  # the log holds the token's hash, never the token

    async def after_restart() -> None:
        async with _http(create_app(mini_sandbox, action_log=log)) as http:  # recovered from the log
            taken = await http.post("/episodes", json={"question_id": "q1", "run_id": "shared", "replace": True})
            assert taken.status_code == 403
            mine = await http.post("/episodes", json={"question_id": "q1", "run_id": "shared", "replace": True,
                                                      "owner": owner})
            assert mine.status_code == 200 and mine.json()["episode_id"] != eid
            assert (await http.get(f"/episodes/{eid}/trace")).json()["closed"] is True  # replaced: closed

    asyncio.run(after_restart())


def test_an_unknown_episode_id_is_answered_without_reading_the_log(mini_sandbox: Sandbox, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "log.jsonl"
    app = create_app(mini_sandbox, action_log=log)
    reads: list[str] = []

    async def scenario() -> str:
        async with _http(app) as http:
            eid = (await http.post("/episodes", json={"question_id": "q1"})).json()["episode_id"]
            await http.post(f"/episodes/{eid}/search", json={"query": "Kane Cornes", "k": 2, "seq": 0})
            await http.post(f"/episodes/{eid}/close")
            original = type(app.state.action_log).read_trace
            monkeypatch.setattr(type(app.state.action_log), "read_trace",
                                lambda self, episode_id: reads.append(episode_id) or original(self, episode_id))
            for unknown in ("0" * 32, "f" * 32, "deadbeef"):
                response = await http.get(f"/episodes/{unknown}/trace")
                assert response.status_code == 404 and "no episode" in response.json()["detail"]
            closed = await http.get(f"/episodes/{eid}/trace")
            assert closed.status_code == 200 and len(closed.json()["trace"]) == 1
            return str(eid)

    eid = asyncio.run(scenario())
    assert reads == [eid]  # the log was read for the one episode it holds, never for an unknown id
    # a restarted sandbox indexes every episode of its log at start-up: known ids are found, unknown ones are not
    from aethersearch.sandbox.action_log import recover

    seen = recover(log).seen
    assert eid in seen and "0" * 32 not in seen and seen.added == 1


def test_a_restarted_sandbox_recovers_open_episodes_with_their_unlock_state(
        mini_sandbox: Sandbox, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"

    async def before() -> str:
        async with _http(create_app(mini_sandbox, action_log=log)) as http:
            eid: str = (await http.post("/episodes", json={"question_id": "q1", "run_id": "A"})).json()["episode_id"]
            assert (await http.post(f"/episodes/{eid}/visit", json={"page": "kane"})).status_code == 200
            assert (await http.post(f"/episodes/{eid}/visit", json={"page": "chad"})).status_code == 200
            return eid

    eid = asyncio.run(before())
    with log.open("ab") as handle:  # a crash mid-append leaves a torn line nobody was told about
        handle.write(b'{"event": "call", "episode_id": "')

    async def after() -> None:
        app = create_app(mini_sandbox, action_log=log)
        async with _http(app) as http:
            assert (await http.get("/health")).json()["recovered_episodes"] == 1
            assert (await http.post(f"/episodes/{eid}/visit", json={"page": "nicole"})).status_code == 200
            again = await http.post("/episodes", json={"question_id": "q1", "run_id": "A"})
            assert again.status_code == 409  # still the open episode of (A, q1)
            trace = (await http.post(f"/episodes/{eid}/close")).json()["trace"]
            assert [c["arguments"]["page"] for c in trace] == ["kane", "chad", "nicole"]

    asyncio.run(after())
    assert log.read_bytes().endswith(b"\n")


def test_an_episode_of_a_question_no_longer_served_is_refused_with_the_reason(
        mini_sandbox: Sandbox, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(json.dumps({"event": "open", "episode_id": "e1", "question_id": "gone", "run_id": "r"}) + "\n")

    async def scenario() -> None:
        async with _http(create_app(mini_sandbox, action_log=log)) as http:
            response = await http.post("/episodes/e1/search", json={"query": "x"})
            assert response.status_code == 409 and "not in the release" in response.json()["detail"]

    asyncio.run(scenario())


# ----------------------------------------------------------------------------- kill -9 with real processes


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(index_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, str(ROOT / "tests" / "sandbox" / "serve_mini.py"), str(index_dir),
                                str(port), str(log)], env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).json()["ready"]:
                return process
        except (httpx.HTTPError, ValueError):
            time.sleep(0.1)
    process.kill()
    raise AssertionError("the sandbox did not start")


@pytest.fixture()
def index_dir(tmp_path: Path) -> Path:
    from aethersearch.corpus.store import build_store
    from aethersearch.search.index_dir import build_index
    from tests.sandbox.conftest import PAGES

    # numpy scoring: numba's compile (the warm-up) takes over a minute on a loaded 2-core machine, twice per test
    build_index(build_store(PAGES, tmp_path / "store"), "bm25", tmp_path / "index", config={"numba": False})
    return tmp_path / "index"


@pytest.mark.slow
def test_kill_9_mid_run_then_restart_loses_no_question_and_runs_none_twice(index_dir: Path, tmp_path: Path) -> None:
    """Eight questions browse concurrently; the sandbox is killed -9 mid-run and restarted on the same log.

    Each episode continues where it was (the client retries with its ``seq``), pages it
    unlocked before the kill stay unlocked, and the log ends with exactly one closed
    episode per question holding exactly its five actions, none twice.
    """
    port, log = _free_port(), tmp_path / "actions.jsonl"
    process = _start(index_dir, port, log)
    killed = asyncio.Event()
    path = ["kane", "chad", "nicole", "graham"]

    async def question(n: int, client: SandboxClient) -> list[str]:
        env = await HttpSandboxFactory(client).open("q1", run_id=f"run{n}")
        pages = []
        for step, page in enumerate(path):
            result = await env.visit(page)
            assert result.call.error is None, (n, page, result.call.error)
            pages.append(result.documents[0].id)
            if step == 1:
                await killed.wait()  # every question is mid-episode when the sandbox dies
        assert (await env.search("Graham Cornes", 2)).call.error is None
        await env.close()
        return pages

    async def killer() -> None:
        nonlocal process
        await asyncio.sleep(1.0)
        process.send_signal(signal.SIGKILL)
        process.wait()
        killed.set()
        process = await asyncio.to_thread(_start, index_dir, port, log)

    async def scenario() -> list[list[str]]:
        client = SandboxClient(f"http://127.0.0.1:{port}", deadline_s=90.0)
        try:
            results = await asyncio.gather(killer(), *(question(n, client) for n in range(8)))
        finally:
            await client.aclose()
        return list(results[1:])

    try:
        answered = asyncio.run(scenario())
    finally:
        process.kill()
        process.wait()
    assert answered == [path] * 8
    episodes = list(read_episodes(log).values())
    assert sorted(e.run_id for e in episodes) == sorted(f"run{n}" for n in range(8))
    assert all(e.closed and [c.tool for c in e.calls] == ["visit"] * 4 + ["search"] for e in episodes)


def test_memory_stays_flat_over_finished_episodes(mini_sandbox: Sandbox, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Python memory the app holds does not grow with finished episodes (it grew ~1.5 KB per action before).

    Before this change the 1,000 actions below would have kept ~1.5 MB.

    The two bounded memories (closed ids, log offsets) are made small here so they are
    full after the warm-up; what is left to grow would be per-episode state.

    Each snapshot follows a full ``gc.collect()``: the test client (httpx's
    ``ASGITransport``) leaves every reply in a reference cycle (its ``Response`` and
    the ``BoundAsyncStream`` pointing back at it) that holds the reply body, which
    ``orjson.dumps`` allocated in ``sandbox/server.py``. Until the cyclic collector
    runs, tens of those bodies (~2 KB each) counted as the sandbox's own memory, more
    or fewer depending on where the collector's generation counters stood: a flaky
    +16 KB under xdist. Garbage is not growth; only what is still reachable counts.
    """
    import gc
    import tracemalloc

    from aethersearch.sandbox import action_log, server

    monkeypatch.setattr(server, "RECENTLY_CLOSED", 20)
    monkeypatch.setattr(action_log, "REMEMBERED_OFFSETS", 20)
    app = create_app(mini_sandbox, action_log=tmp_path / "log.jsonl")

    async def episodes(http: httpx.AsyncClient, n: int) -> None:
        for i in range(n):
            eid = (await http.post("/episodes", json={"question_id": "q1", "run_id": f"r{i}"})).json()["episode_id"]
            await http.post(f"/episodes/{eid}/search", json={"query": "Kane Cornes", "k": 3})
            await http.post(f"/episodes/{eid}/visit", json={"page": "kane"})
            await http.post(f"/episodes/{eid}/close")

    def snapshot() -> tracemalloc.Snapshot:
        gc.collect()  # cyclic garbage (the test client's, above) is not memory the sandbox holds
        return tracemalloc.take_snapshot()

    async def scenario() -> tuple[tracemalloc.Snapshot, tracemalloc.Snapshot]:
        async with _http(app) as http:
            tracemalloc.start()  # (objects allocated before start are never counted as freed: warm up traced)
            try:
                await episodes(http, 100)
                before = snapshot()
                await episodes(http, 250)
                after = snapshot()
            finally:
                tracemalloc.stop()
        return before, after

    before, after = asyncio.run(scenario())
    assert len(app.state.episodes) == 0
    mine = [tracemalloc.Filter(True, "*aethersearch*")]
    lines = after.filter_traces(mine).compare_to(before.filter_traces(mine), "lineno")
    grown = sum(s.size_diff for s in lines)
    top = "; ".join(f"{s.traceback[0].filename.rpartition('aethersearch/')[2] or s.traceback[0].filename}:"
                    f"{s.traceback[0].lineno} {s.size_diff:+d} B ({s.count_diff:+d} blocks)"
                    for s in sorted(lines, key=lambda s: s.size_diff, reverse=True)[:5] if s.size_diff > 0)
    assert grown < 10_000, (f"the sandbox's own memory grew {grown} bytes over 250 episodes (1,000 actions); "
                            f"grew most: {top or 'nothing'}")
    total = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert total < 200_000, f"the process's Python memory grew {total} bytes over 250 episodes"
