"""Crash test: kill -9 the runner (a real subprocess) at 20 random points, resume, compare."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aethersearch.jsonl import read_jsonl, read_jsonl_tolerant
from aethersearch.rollout.samples import derive_seed
from aethersearch.testing.scripted_server import ScriptedRequest, ScriptedServer, question_of
from tests.rollout import helpers

SCRIPT = Path(__file__).with_name("crash_runner.py")


def _start(url: str, rollout: Path, run_dir: Path, samples: int = 1) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(SCRIPT), url, str(rollout), str(run_dir), str(samples)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == b"ready", (line, proc.stderr.read() if proc.poll() is not None else b"")
    return proc


def _finished(run_dir: Path) -> set[str]:
    rows = read_jsonl_tolerant(run_dir / "traces.jsonl").rows
    return {r["id"] for r in rows if r["outcome"] not in ("endpoint_error", "tool_error")}


def _kill_and_resume(server: ScriptedServer, rollout: Path, run: Path, rng: random.Random, times: int,
                     finished_of: Callable[[Path], set[Any]], text: dict[Any, str],
                     samples: int = 1) -> tuple[int, set[Any], Counter[str]]:
    """Start the runner ``times`` times, SIGKILL each at a random moment, then let a last one finish.

    After every start, no unit finished before it was requested again. Returns the
    kills that landed, the units finished before the last start and its requests.
    """
    kills = 0
    for _ in range(times):
        finished = finished_of(run) if run.exists() else set()
        before = server.stats.by_key.copy()
        proc = _start(server.url, rollout, run, samples)
        time.sleep(rng.uniform(0.0, 0.09))
        if proc.poll() is None:
            proc.kill()  # SIGKILL: no cleanup, no flush
            kills += 1
        proc.wait(30)
        called = server.stats.by_key - before
        assert not {unit for unit in finished if text[unit] in called}, "a finished unit was called again"
    finished = finished_of(run)
    before = server.stats.by_key.copy()
    final = _start(server.url, rollout, run, samples)
    assert final.wait(60) == 0, final.stderr.read()
    called = server.stats.by_key - before
    assert not {unit for unit in finished if text[unit] in called}
    return kills, finished, called


def test_kill_minus_nine_at_twenty_random_points_then_resume(tmp_path: Path) -> None:
    qs = helpers.questions(60)
    text = {q.id: q.question + "?" for q in qs}  # the form the model sees (Search-R1 adds '?')
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    rng = random.Random(20260)
    with ScriptedServer(helpers.MODEL, latency_s=0.03) as server:
        reference = _start(server.url, rollout, tmp_path / "reference")
        assert reference.wait(60) == 0, reference.stderr.read()
        run = tmp_path / "crashed"
        kills, finished, _ = _kill_and_resume(server, rollout, run, rng, 20, _finished, text)
    assert kills >= 18, f"only {kills} kills landed during the run"
    assert len(finished) < len(qs), "the run finished before the last kill"
    predictions = read_jsonl(run / "predictions.jsonl")
    ids = [p["id"] for p in predictions]
    assert ids == [q.id for q in qs]  # 0 lost, 0 duplicated, in question order
    assert (run / "predictions.jsonl").read_bytes() == (tmp_path / "reference" / "predictions.jsonl").read_bytes()
    per_id = Counter(t["id"] for t in read_jsonl(run / "traces.jsonl") if t["outcome"] == "answered")
    assert set(per_id.values()) == {1}  # no finished question was ever regenerated


def _sample_key(request: ScriptedRequest) -> str | None:
    """Requests grouped by (question, seed): one group per sample of a question."""
    return f"{question_of(request)}|{request.body.get('seed')}"


def _finished_samples(run_dir: Path) -> set[tuple[str, int]]:
    rows = read_jsonl_tolerant(run_dir / "traces.jsonl").rows
    return {(r["id"], r["sample"]) for r in rows if r["outcome"] not in ("endpoint_error", "tool_error")}


def test_kill_minus_nine_during_a_three_sample_run_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Each (id, sample) is a unit: a kill loses none, a resume reruns exactly the unfinished ones."""
    qs = helpers.questions(20)
    samples = 3
    seeds = {(q.id, k): derive_seed(0, q.id, k) for q in qs for k in range(samples)}
    text = {key: f"{next(q.question for q in qs if q.id == key[0])}?|{seed}" for key, seed in seeds.items()}
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    rng = random.Random(20261)
    with ScriptedServer(helpers.MODEL, latency_s=0.03, key=_sample_key) as server:
        reference = _start(server.url, rollout, tmp_path / "reference", samples)
        assert reference.wait(60) == 0, reference.stderr.read()
        assert set(server.stats.by_key) == set(text.values())  # K distinct requests per question
        run = tmp_path / "crashed"
        kills, finished, called = _kill_and_resume(server, rollout, run, rng, 12, _finished_samples, text, samples)
        assert {key for key in seeds if text[key] in called} == set(seeds) - finished  # exactly the missing ones
    assert kills >= 10, f"only {kills} kills landed during the run"
    assert len(finished) < len(seeds), "the run finished before the last kill"
    predictions = read_jsonl(run / "predictions.jsonl")
    assert [(p["id"], p["sample"]) for p in predictions] == list(seeds)  # 0 lost, 0 duplicated, in order
    assert (run / "predictions.jsonl").read_bytes() == (tmp_path / "reference" / "predictions.jsonl").read_bytes()
    per_key = Counter((t["id"], t["sample"]) for t in read_jsonl(run / "traces.jsonl") if t["outcome"] == "answered")
    assert set(per_key) == set(seeds) and set(per_key.values()) == {1}  # no finished sample was regenerated
