"""The real small model evaluated on the real Wikispeedia hint-free release, inside the masked sandbox.

``aether eval RELEASE --index IDX --endpoint URL`` with the ``search-r1`` and
``react`` agents: every episode must complete without error (the figures of a
135M model may be degenerate; the path is what is tested), and the command writes
``factorised.json``, with the Forget probe asked of the same model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_shared
from tests.realmodel.conftest import RealServer

pytestmark = [pytest.mark.realmodel, pytest.mark.realdata, pytest.mark.slow, pytest.mark.timeout(1500)]
AETHER = str(Path(sys.executable).with_name("aether"))
QUESTIONS = 6  # at most (--max-questions): a 135M model on 2 cores takes seconds per call


def _aether(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AETHER, *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "COLUMNS": "200"})


@pytest.fixture(scope="module")
def wikispeedia_sandbox(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(release, index): the real Wikispeedia hint-free release and the index of the pages it was built from."""
    data = require_shared("wikispeedia/plaintext_articles.tar.gz").parent
    root = tmp_path_factory.mktemp("wikispeedia-sandbox")
    # --no-screen: what is tested is the evaluation path, not the construction's parametric screen
    for args in (("construct", "wikispeedia", str(data), "--out", str(root / "release"), "--max-questions",
                  str(QUESTIONS), "--no-screen"),
                 ("corpus", "import", "wikispeedia", str(data), "--out", str(root / "store")),
                 ("index", "build", str(root / "store"), "--out", str(root / "index"))):
        done = _aether(*args)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return root / "release", root / "index"


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("agent, tools_model, max_tokens, probes", [
    ("search-r1", False, 300, True),
    # react's tool-calling handler samples under a grammar (slow on CPU): fewer tokens a call keeps it in budget
    ("react", True, 200, False),
])
def test_the_real_model_runs_the_wikispeedia_release_in_the_sandbox(real_server: RealServer,
                                                                     wikispeedia_sandbox: tuple[Path, Path],
                                                                     tmp_path: Path, agent: str, tools_model: bool,
                                                                     max_tokens: int, probes: bool) -> None:
    release, index = wikispeedia_sandbox
    started = time.monotonic()
    done = _aether("eval", str(release), "--index", str(index), "--agent", agent, "--endpoint", real_server.url,
                   "--model", real_server.tools_model if tools_model else real_server.model,
                   "--max-turns", "4", "--max-tool-calls", "4", "--max-tokens", str(max_tokens),
                   "--concurrency", "2", "--out", str(tmp_path / "eval"), "--no-progress",
                   "--probes" if probes else "--no-probes")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    run = tmp_path / "eval" / "run"
    traces = _read(run / "traces.jsonl")
    questions = len(_read(release / "rollout_questions.jsonl"))
    assert 0 < questions <= QUESTIONS and len(traces) == questions
    assert not [t for t in traces if t["outcome"] in ("tool_error", "endpoint_error", "request_rejected")]
    fingerprint = json.loads((run / "run.json").read_text())
    assert fingerprint["environment"] == "sandbox" and fingerprint["sandbox"]["tools"] == ["search", "visit"]
    factorised = json.loads((run / "factorised.json").read_text())
    assert factorised["n"] == questions and factorised["overall"]["n_errors"] == 0
    calls = [c for t in traces for s in t["steps"] for c in s["tool_calls"]]
    if probes:
        forget = json.loads((run / "probes.json").read_text())["forget"]
        assert forget.get("applicable") is not False, forget  # asked of the model itself
    outcomes: dict[str, int] = {}
    for trace in traces:
        outcomes[trace["outcome"]] = outcomes.get(trace["outcome"], 0) + 1
    print(f"\nreal model in the sandbox ({agent}): {json.dumps(outcomes)}; tool calls {len(calls)} "
          f"({sum(c['tool'] == 'visit' for c in calls)} visits); factorised {json.dumps(factorised['overall'])}; "
          f"{time.monotonic() - started:.0f}s")
