"""Read timeouts on a real socket: idle and slow-header connections are closed, slow bodies get 408.

uvicorn itself only closes connections idle after a response; the header deadline of
``search.http_guard`` covers a connection that never sends a request or sends its
headers a byte at a time, with either HTTP parser.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from aethersearch.search.http_guard import HttpTimeouts, TimedHttpToolsProtocol, uvicorn_options
from aethersearch.search.index_dir import OpenedIndex
from aethersearch.search.server import ServerLimits, create_app

TIMEOUTS = HttpTimeouts(header_timeout_s=0.6, body_timeout_s=0.6, keep_alive_s=1)
PARSERS = ["h11"] + (["httptools"] if TimedHttpToolsProtocol is not None else [])


@pytest.fixture(params=PARSERS)
def server(request: pytest.FixtureRequest, demo_index: OpenedIndex) -> Iterator[int]:
    app = create_app(demo_index.index, demo_index.store, ServerLimits(timeouts=TIMEOUTS))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                            **uvicorn_options(request.param, TIMEOUTS))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    yield port
    server.should_exit = True
    thread.join(10)


def _closed_within(sock: socket.socket, seconds: float) -> float:
    """Seconds until the server closed ``sock`` (reading whatever it sent first); fails after ``seconds``."""
    started = time.monotonic()
    sock.settimeout(seconds)
    while True:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            return time.monotonic() - started


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def test_a_connection_that_never_sends_a_request_is_closed(server: int) -> None:
    with _connect(server) as sock:
        assert _closed_within(sock, 5.0) < 3.0


def test_headers_sent_a_byte_at_a_time_are_cut_off(server: int) -> None:
    with _connect(server) as sock:
        started = time.monotonic()
        request = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100 + b"\r\n\r\n"
        closed = False
        for byte in request:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            time.sleep(0.05)
            if time.monotonic() - started > 3.0:
                break
        if not closed:
            assert _closed_within(sock, 5.0) < 3.0
        assert time.monotonic() - started < 4.0


def test_a_slow_body_gets_408_and_a_normal_request_still_answers(server: int) -> None:
    with _connect(server) as sock:
        sock.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 40\r\n\r\n{\"queries\"")
        sock.settimeout(5.0)
        reply = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 408") and b"body-timeout-s" in reply
    with _connect(server) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5.0)
        reply: Any = sock.recv(65536)
        assert reply.startswith(b"HTTP/1.1 200") and b'"408":1' in reply  # the refusal is counted
