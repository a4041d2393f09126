"""`aether construct demo` prints the summary table; `aether sandbox serve` answers real HTTP on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from aethersearch.cli import app
from aethersearch.errors import ConfigError
from tests.serving import wait_for_json


def test_construct_demo_prints_hops_and_rejections(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "rel"
    result = runner.invoke(app, ["construct", "demo", "--out", str(out), "--max-questions", "12"],
                           env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "accepted questions" in result.output and "12" in result.output
    assert "-hop" in result.output and "rejected: " in result.output
    again = runner.invoke(app, ["construct", "demo", "--out", str(out)])
    assert isinstance(again.exception, ConfigError) and "--force" in str(again.exception)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_sandbox_serve_answers_a_real_client_on_loopback(tmp_path: Path) -> None:
    from aethersearch.construct.build import build_demo_release
    from aethersearch.construct.hintfree import ConstructionConfig
    from aethersearch.corpus.importers import import_corpus
    from aethersearch.search.index_dir import build_index

    release = build_demo_release(tmp_path / "rel", config=ConstructionConfig(max_questions=5)).path
    store = import_corpus("demo", "-", tmp_path / "store").store
    build_index(store, "bm25", tmp_path / "index")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "aethersearch.cli", "sandbox", "serve", str(release),
                             "--index", str(tmp_path / "index"), "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        health = wait_for_json(f"{base}/health", proc)
        assert health["questions"] == 5
        qid = "webdetective_demo_0001"
        eid = httpx.post(f"{base}/episodes", json={"question_id": qid}, timeout=60).json()["episode_id"]
        found = httpx.post(f"{base}/episodes/{eid}/search", json={"query": "city", "k": 3}, timeout=120)
        assert found.status_code == 200 and len(found.json()["documents"]) == 3
        assert httpx.post(f"{base}/episodes/{eid}/visit", json={"page": "../../etc/passwd"}, timeout=60).status_code == 422
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_construct_reports_progress_per_candidate_when_redirected(tmp_path: Path) -> None:
    """A long construction (minutes on Wikispeedia) says how far it is, also in a log file."""
    proc = subprocess.run([sys.executable, "-m", "aethersearch.cli", "construct", "demo", "-o", str(tmp_path / "r"),
                           "--max-questions", "10"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("construct:")]
    assert lines, proc.stderr
    assert "candidates" in lines[-1] and "accepted 10" in lines[-1]


@pytest.mark.realdata
def test_a_dead_validator_endpoint_fails_the_real_build_loudly_and_writes_nothing(tmp_path: Path) -> None:
    """The LLM validator's endpoint is down: exit non-zero, name the candidate and the option, no release."""
    from tests.conftest import require_shared

    data = require_shared("wikispeedia/plaintext_articles.tar.gz").parent
    out = tmp_path / "rel"
    proc = subprocess.run([sys.executable, "-m", "aethersearch.cli", "construct", "wikispeedia", str(data),
                           "-o", str(out), "--max-questions", "3", "--validator-endpoint",
                           f"http://127.0.0.1:{_free_port()}/v1", "--validator-model", "m", "--no-screen"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0, proc.stdout
    assert "LLM entailment validator endpoint" in proc.stderr and "failed at chain of" in proc.stderr, proc.stderr
    assert "--validator-endpoint" in proc.stderr and not out.exists()
