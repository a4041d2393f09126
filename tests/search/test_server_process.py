"""The server started as a real process (``aether serve``) on a loopback port, queried by a real httpx client."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from aethersearch.search.client import SearchClient
from aethersearch.search.environment import IndexEnvironment, RetrievalServerEnvironment


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server_url(demo_index_dir: Path):  # type: ignore[no-untyped-def]
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "serve", str(demo_index_dir),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stdout.read().decode() if proc.stdout else ''}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("server did not come up within 60 s")
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_real_server_answers_like_in_process(server_url: str, demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    queries = [f.question for f in demo_world.facts[:30]]

    async def main():  # type: ignore[no-untyped-def]
        async with SearchClient(server_url, timeout_s=10) as client:
            health = await client.health()
            batched = await client.retrieve(queries, 3)
            single = await asyncio.gather(*(client.retrieve([q], 3) for q in queries))
            return health, batched, [s[0] for s in single]

    health, batched, single = asyncio.run(main())
    assert health["index_hash"] == demo_index.index.index_hash
    expected = [[(d, s) for d, s in hits] for hits in demo_index.index.search(queries, 3)]
    assert [[(h.document.id, h.score) for h in hits] for hits in batched] == expected
    assert [[(h.document.id, h.score) for h in hits] for hits in single] == expected
    top = demo_index.store.get(expected[0][0][0])
    assert batched[0][0].document.title == top.title and batched[0][0].document.text == top.text


def test_real_server_limit_and_loopback_bind(server_url: str) -> None:
    response = httpx.post(f"{server_url}/retrieve", json={"queries": ["x"], "topk": 1000})
    assert response.status_code == 422 and "limit of 100" in response.json()["detail"]
    assert server_url.startswith("http://127.0.0.1:")


def test_environments_agree_over_http_and_in_process(server_url: str, demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    fact = demo_world.facts[7]

    async def main():  # type: ignore[no-untyped-def]
        local = IndexEnvironment(demo_index.index, demo_index.store, tools=("search", "visit"))
        remote = RetrievalServerEnvironment(SearchClient(server_url), tools=("search", "visit"), close_client=True)
        a, b = await local.search(fact.question, 3), await remote.search(fact.question, 3)
        va, vb = await local.visit(fact.subject_id), await remote.visit(fact.subject_id)
        missing = await remote.visit("no_such_page")
        await remote.close()
        return a, b, va, vb, missing

    a, b, va, vb, missing = asyncio.run(main())
    assert a.call.returned_ids == b.call.returned_ids and a.call.returned_ids
    assert [(d.title, d.text) for d in a.documents] == [(d.title, d.text) for d in b.documents]
    assert va.documents[0].text == vb.documents[0].text and va.call.returned_ids == [fact.subject_id]
    assert missing.documents == [] and "unknown page" in (missing.call.error or "")


@pytest.mark.slow
def test_multi_process_server_answers_the_same(demo_index_dir: Path, demo_index, demo_world) -> None:  # type: ignore[no-untyped-def]
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "serve", str(demo_index_dir),
                             "--port", str(port), "--processes", "2"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "server did not come up"
                time.sleep(0.3)
        queries = [f.question for f in demo_world.facts[:20]]
        responses = [httpx.post(f"{url}/retrieve", json={"queries": [q], "topk": 3, "return_scores": True},
                                timeout=30).json()["result"][0] for q in queries]
        expected = demo_index.index.search(queries, 3)
        assert [[(h["document"]["id"], h["score"]) for h in r] for r in responses] == expected
    finally:
        proc.terminate()
        proc.wait(timeout=20)
