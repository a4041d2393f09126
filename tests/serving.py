"""Helpers for tests that start a real server on loopback: a free port, and waiting until it answers."""

from __future__ import annotations

import socket
import subprocess
import time
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
