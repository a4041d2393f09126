"""Helpers for tests that start a real server on loopback: a free port, and waiting until it answers."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_json(url: str, proc: subprocess.Popen[Any] | None = None, timeout: float = 60) -> Any:
    """GET ``url`` until it answers with JSON; fail with the server's output if it died or ``timeout`` passed."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return httpx.get(url, timeout=10).json()
        except httpx.HTTPError:
            if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
                output = proc.stdout.read() if proc is not None and proc.stdout else ""
                pytest.fail(f"{url} never answered: {output.decode() if isinstance(output, bytes) else output}")
            time.sleep(0.3)


@contextmanager
def serving_app(app: Any, **config: Any) -> Iterator[str]:
    """Run an ASGI ``app`` under uvicorn on a free loopback port in a thread; yield its base URL.

    For clients that speak real HTTP only (aiohttp has no in-process ASGI transport).
    """
    import uvicorn

    port = free_port()
    settings = {"log_level": "warning", "loop": "asyncio", **config}  # ``config``: more uvicorn settings
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **settings))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
