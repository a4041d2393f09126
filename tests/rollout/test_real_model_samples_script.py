"""``scripts/real_model_samples.py`` retries errored samples by resuming, and fails naming them.

Why: on the shared 2-core machine one sampled call took 4 minutes, past the run's
call timeout; the run then exited non-zero (``--max-error-rate`` 0) and the script
ended before scoring anything. The script now resumes the run (which reruns only
the errored (id, sample) pairs) up to ``--attempts`` times.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "real_model_samples.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("real_model_samples", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _append(run_dir: Path, rows: list[tuple[str, int, str]]) -> None:
    with (run_dir / "traces.jsonl").open("a") as handle:
        for qid, sample, outcome in rows:
            handle.write(json.dumps({"id": qid, "sample": sample, "outcome": outcome}) + "\n")


def test_a_failed_run_is_resumed_until_it_succeeds(tmp_path: Path) -> None:
    script = _script()
    calls: list[tuple[str, ...]] = []

    def run(*args: str) -> int:
        calls.append(args)
        if len(calls) == 1:
            _append(tmp_path, [("q1", 0, "answered"), ("q1", 1, "endpoint_error")])
            return 1
        _append(tmp_path, [("q1", 1, "answered")])
        return 0

    script.rollout(["run", "x"], tmp_path, 3, run)
    assert calls == [("run", "x"), ("run", "x")]
    assert script.errored_samples(tmp_path / "traces.jsonl") == []


def test_a_run_failing_every_attempt_exits_naming_the_samples(tmp_path: Path) -> None:
    script = _script()
    calls: list[Any] = []

    def run(*args: str) -> int:
        calls.append(args)
        _append(tmp_path, [("q2", 3, "endpoint_error"), ("q1", 0, "answered")])
        return 1

    with pytest.raises(SystemExit) as failed:
        script.rollout(["run"], tmp_path, 2, run)
    assert len(calls) == 2
    message = str(failed.value.code)
    assert "after 2 attempts" in message and "q2#3" in message and "q1#0" not in message
    assert "rerun this script with the same OUT" in message


def test_the_latest_trace_of_a_sample_decides_whether_it_is_errored(tmp_path: Path) -> None:
    _append(tmp_path, [("a", 0, "endpoint_error"), ("a", 0, "answered"), ("b", 1, "answered"),
                       ("b", 1, "endpoint_error")])
    assert _script().errored_samples(tmp_path / "traces.jsonl") == ["b#1"]
