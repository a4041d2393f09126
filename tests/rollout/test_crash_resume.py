"""Crash test: kill -9 the runner (a real subprocess) at 20 random points, resume, compare."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from aethersearch.agents.scripted_server import ScriptedServer
from aethersearch.jsonl import read_jsonl, read_jsonl_tolerant
from tests.rollout import helpers

SCRIPT = Path(__file__).with_name("crash_runner.py")


def _start(url: str, rollout: Path, run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(SCRIPT), url, str(rollout), str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == b"ready", (line, proc.stderr.read() if proc.poll() is not None else b"")
    return proc


def _finished(run_dir: Path) -> set[str]:
    rows = read_jsonl_tolerant(run_dir / "traces.jsonl").rows
    return {r["id"] for r in rows if r["outcome"] not in ("endpoint_error", "tool_error")}


def test_kill_minus_nine_at_twenty_random_points_then_resume(tmp_path: Path) -> None:
    qs = helpers.questions(60)
    text = {q.id: q.question + "?" for q in qs}  # the form the model sees (Search-R1 adds '?')
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    rng = random.Random(20260)
    with ScriptedServer(helpers.MODEL, latency_s=0.03) as server:
        reference = _start(server.url, rollout, tmp_path / "reference")
        assert reference.wait(60) == 0, reference.stderr.read()
        run = tmp_path / "crashed"
        kills = 0
        for _ in range(20):
            finished = _finished(run) if run.exists() else set()
            before = server.stats.by_key.copy()
            proc = _start(server.url, rollout, run)
            time.sleep(rng.uniform(0.0, 0.09))
            if proc.poll() is None:
                proc.kill()  # SIGKILL: no cleanup, no flush
                kills += 1
            proc.wait(30)
            called = server.stats.by_key - before
            assert not {i for i in finished if text[i] in called}, "a finished id was called again"
        finished = _finished(run)
        before = server.stats.by_key.copy()
        final = _start(server.url, rollout, run)
        assert final.wait(60) == 0, final.stderr.read()
        called = server.stats.by_key - before
        assert not {i for i in finished if text[i] in called}
    assert kills >= 18, f"only {kills} kills landed during the run"
    assert len(finished) < len(qs), "the run finished before the last kill"
    predictions = read_jsonl(run / "predictions.jsonl")
    ids = [p["id"] for p in predictions]
    assert ids == [q.id for q in qs]  # 0 lost, 0 duplicated, in question order
    assert (run / "predictions.jsonl").read_bytes() == (tmp_path / "reference" / "predictions.jsonl").read_bytes()
    per_id = Counter(t["id"] for t in read_jsonl(run / "traces.jsonl") if t["outcome"] == "answered")
    assert set(per_id.values()) == {1}  # no finished question was ever regenerated
