"""`aether serve` options: every one validated with a message, the ready line printed only when ready."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aethersearch.cli", "serve", *args],
                          check=False, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(("args", "message"), [
    (["--port", "99999"], "--port 99999 is not a TCP port"),
    (["--port", "0"], "--port 0 is not a TCP port"),
    (["--max-topk", "0"], "--max-topk 0"),
    (["--max-batch", "-5"], "--max-batch -5"),
    (["--max-response-mb", "0"], "--max-response-mb"),
    (["--max-body-mb", "0"], "--max-body-mb"),
    (["--workers", "0"], "--workers 0"),
    (["--processes", "0"], "--processes 0 must be at least 1"),
    (["--url-prefix", ""], "--url-prefix"),
    (["--host", "no-such-host.invalid"], "does not resolve"),
])
def test_invalid_options_are_refused_with_a_message(demo_index_dir: Path, args: list[str], message: str) -> None:
    result = _serve("--index", str(demo_index_dir), *args)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert message in output, output
    assert "Traceback" not in output and "pydantic" not in output.lower() and "serving" not in output


def test_a_busy_port_is_refused_before_anything_is_announced(demo_index_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = _serve("--index", str(demo_index_dir), "--port", str(busy.getsockname()[1]))
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "cannot listen on 127.0.0.1" in output and "serving" not in output
    assert "Traceback" not in output


def test_no_index_given_is_a_message(tmp_path: Path) -> None:
    result = _serve("--port", str(_free_port()))
    assert result.returncode != 0 and "no index given" in result.stdout + result.stderr


def test_ready_line_appears_only_once_the_port_answers(demo_index_dir: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "serve", "--index", str(demo_index_dir),
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        line = proc.stdout.readline()
        while "serving" not in line:
            assert line or proc.poll() is None, "server exited without announcing"
            assert time.monotonic() < deadline
            line = proc.stdout.readline()
        # at the moment the line is printed the port accepts and answers, with no retry
        health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
        assert health.status_code == 200
        assert f"on http://127.0.0.1:{port}" in line
    finally:
        proc.terminate()
        proc.wait(timeout=20)
