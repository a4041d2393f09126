"""A refusal's reason in the HTTP status line, and every protocol-level refusal counted (issue 49, point 7).

verl's search tool shows the model only ``requests``' ``HTTPError`` text, built from the
status line; before, it read ``422 Client Error: Unprocessable Content for url: ...``.
Runs a real uvicorn (both HTTP parsers): the reason phrase is written by uvicorn's
protocol, which an in-process ASGI client never exercises.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests

from aethersearch.search.http_guard import HttpTimeouts, TimedHttpToolsProtocol, uvicorn_options
from aethersearch.search.http_reason import MAX_REASON_BYTES, reason_phrase, standard_phrase
from aethersearch.search.index_dir import OpenedIndex
from aethersearch.search.server import ServerLimits, create_app
from tests.search.field_clients import verl_search_tool_text
from tests.serving import serving_app

TIMEOUTS = HttpTimeouts(header_timeout_s=0.5, body_timeout_s=2.0, keep_alive_s=2)
PARSERS = ["h11"] + (["httptools"] if TimedHttpToolsProtocol is not None else [])


def _serve(app: Any, http: str, timeouts: HttpTimeouts = TIMEOUTS) -> Iterator[str]:
    with serving_app(app, lifespan="off", **uvicorn_options(http, timeouts)) as base:
        yield base


@pytest.fixture(params=PARSERS)
def url(request: pytest.FixtureRequest, demo_index: OpenedIndex) -> Iterator[str]:
    app = create_app(demo_index.index, demo_index.store, ServerLimits(max_topk=10, timeouts=TIMEOUTS))
    yield from _serve(app, request.param)


def _raw(base: str, data: bytes) -> bytes:
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(data)
        out = b""
        while not out.endswith(b"\r\n\r\n") and b"\r\n\r\n" not in out:
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


def test_verl_search_tool_shows_the_model_the_reason(url: str) -> None:
    text = json.loads(verl_search_tool_text(f"{url}/retrieve", ["Morulistan"], topk=500))["result"]
    assert text.startswith("Search error: API Call Failed: API Request Error: 422 Client Error: Unprocessable ")
    assert "topk 500 exceeds the limit of 10" in text  # before: only "Unprocessable Content for url: ..."
    assert text.endswith(f"for url: {url}/retrieve")
    ok = json.loads(verl_search_tool_text(f"{url}/retrieve", ["Morulistan"], topk=2))["result"]
    assert ok.startswith("Doc 1 (Title: ")


def test_the_status_line_carries_the_reason_and_the_body_is_unchanged(url: str) -> None:
    reply = requests.post(f"{url}/retrieve", json={"queries": ["a"], "topk": 11}, timeout=10)
    phrase = standard_phrase(422)  # "Unprocessable Entity" in Python 3.11, "Content" from 3.13
    assert reply.status_code == 422 and reply.reason == f"{phrase}: topk 11 exceeds the limit of 10"
    assert reply.json() == {"detail": "topk 11 exceeds the limit of 10"}
    fine = requests.post(f"{url}/retrieve", json={"queries": ["a"], "topk": 1}, timeout=10)
    assert fine.status_code == 200 and fine.reason == "OK"  # only refusals carry a reason


def test_uvicorns_own_400_is_counted_logged_and_explained(url: str, caplog: pytest.LogCaptureFixture) -> None:
    before = httpx.get(f"{url}/health").json()["connections"]["by_kind"].get("malformed_request_400", 0)
    head = _raw(url, b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 Bad Request: Invalid HTTP request received."), head[:120]
    health = httpx.get(f"{url}/health").json()
    assert health["connections"]["by_kind"]["malformed_request_400"] == before + 1
    assert any("malformed_request_400" in r.getMessage() for r in caplog.records)
    assert not any(r.getMessage() == "Invalid HTTP request received." for r in caplog.records)  # ours replaces it


def test_header_timeout_closes_are_counted(url: str) -> None:
    before = httpx.get(f"{url}/health").json()["connections"]["by_kind"].get("header_timeout_closed", 0)
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n")  # never finishes its headers
        assert sock.recv(100) == b""  # closed by the header deadline
    counts = httpx.get(f"{url}/health").json()["connections"]
    assert counts["by_kind"]["header_timeout_closed"] == before + 1
    assert counts["total"] >= 1


def test_validation_422s_are_counted_in_refusals(url: str) -> None:
    requests.post(f"{url}/retrieve", data=b'{"queries": "not a list"}', timeout=10)
    refusals = httpx.get(f"{url}/health").json()["refusals"]
    assert refusals["by_status"]["422"] >= 1


def test_a_reason_phrase_is_one_safe_ascii_line() -> None:
    phrase = reason_phrase(404, "no page named 'Zürich\r\nX-Injected: 1' is available")
    assert phrase == b"Not Found: no page named 'Z?rich X-Injected: 1' is available"
    assert len(reason_phrase(413, "x" * 5000)) == MAX_REASON_BYTES
    assert reason_phrase(413, "x" * 5000).endswith(b"...")


def test_the_sandbox_refusals_carry_their_reason_too(tmp_path: Any) -> None:
    from aethersearch.corpus.store import build_store
    from aethersearch.sandbox.episode import Sandbox
    from aethersearch.sandbox.server import create_app as sandbox_app
    from aethersearch.search.index_dir import build_index
    from tests.sandbox.conftest import PAGES, make_masks
    from tests.serving import serving_app

    opened = build_index(build_store(PAGES, tmp_path / "store"), "bm25", tmp_path / "index")
    app = sandbox_app(Sandbox(make_masks(), opened.index, opened.store), action_log=tmp_path / "actions.jsonl")
    with serving_app(app) as base:
        episode = requests.post(f"{base}/episodes", json={"question_id": "q1"}, timeout=10).json()["episode_id"]
        locked = requests.post(f"{base}/episodes/{episode}/visit", json={"page": "Nicole Cornes"}, timeout=10)
        assert locked.status_code == 404
        assert locked.reason == "Not Found: no page named 'Nicole Cornes' is available; search for it or follow a link from a page you visited"
        with pytest.raises(requests.HTTPError, match="404 Client Error: Not Found: no page named"):
            locked.raise_for_status()
