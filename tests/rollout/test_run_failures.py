"""Failures must never look like scores: dead endpoints, refusals, malformed replies, two writers.

Each test here fails on the code before issue 11: a run against a closed port
exited 0 and scored EM 0.0; ``evaluate`` returned all-zero metrics; a context-length
400 was retried on every resume; a 200 with a broken body failed the whole
question; two processes could write one run directory.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.api import evaluate
from aethersearch.demo import build_demo_inputs
from aethersearch.errors import RunFailed, RunLocked
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget, Decoding, RunLimits
from aethersearch.rollout.health import enforce_error_rate
from aethersearch.rollout.runner import run_questions
from aethersearch.rollout.store import RunStore
from aethersearch.testing.scripted_server import Faults, Reply, ScriptedServer, search_r1_rule
from tests.agents.fakes import FakeSearchEnv
from tests.rollout import helpers

FAST = RunLimits(call_timeout_s=5.0, question_deadline_s=30.0, max_retries=1, stop_after_failures=None)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real, verifiable demo release (140 questions) and its BM25 index."""
    return build_demo_inputs(tmp_path_factory.mktemp("demo"))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again on exit: nothing listens there


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aethersearch.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "200"}, timeout=300)


def test_aether_run_against_a_closed_port_exits_non_zero_with_a_summary(demo: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    release, _ = demo
    start = time.monotonic()
    result = _cli("run", str(release), "--out", str(tmp_path / "run"), "--agent", "direct",
                  "--endpoint", f"http://127.0.0.1:{_closed_port()}/v1", "--model", "m", "--no-progress")
    wall = time.monotonic() - start
    assert result.returncode == 3, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert "0 of 140 run" in message and "connection" in message and "140 questions not run" in message
    assert "fix:" in message and "start the" in message and "--endpoint" in message
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run" / "traces.jsonl").exists()  # nothing that could be scored as EM 0
    assert wall < 60, wall
    evaluated = _cli("eval", str(release), "--out", str(tmp_path / "eval"), "--agent", "direct",
                     "--endpoint", f"http://127.0.0.1:{_closed_port()}/v1", "--model", "m", "--no-progress")
    assert evaluated.returncode == 3 and "0 of 140 run" in " ".join(evaluated.stderr.split())
    assert not (tmp_path / "eval" / "run" / "scores.json").exists() and not (tmp_path / "eval" / "report.html").exists()


def test_a_stalled_server_is_bounded_by_the_call_timeout_and_question_deadline(demo: tuple[Path, Path],
                                                                              tmp_path: Path) -> None:
    release, _ = demo
    defaults = RunLimits()
    assert defaults.question_deadline_s is not None and defaults.question_deadline_s < 600  # not 10 min a question
    faults = Faults(rate=1.0, kinds=("stall",), stall_s=60.0)
    start = time.monotonic()
    with ScriptedServer(lambda r: Reply("<answer> x </answer>"), faults=faults) as server:
        result = _cli("run", str(release), "--out", str(tmp_path / "run"), "--agent", "direct", "--endpoint",
                      server.url, "--model", "scripted", "--no-progress", "--call-timeout", "0.3",
                      "--question-deadline", "5", "--max-retries", "1", "--stop-after-failures", "0")
    wall = time.monotonic() - start
    assert result.returncode == 3, result.stdout + result.stderr
    assert "timeout 140 (retried on rerun)" in " ".join(result.stderr.split())
    assert wall < 40, wall  # 140 questions, 64 at a time, each given up after 2 x 0.3 s
    limits = orjson.loads((tmp_path / "run" / "run.json").read_bytes())["limits"]
    assert limits == {"call_timeout_s": 0.3, "question_deadline_s": 5.0, "max_retries": 1, "max_error_rate": 0.0,
                      "stop_after_failures": None}


def test_a_server_that_dies_mid_run_stops_the_run_instead_of_failing_every_question(tmp_path: Path) -> None:
    qs = helpers.questions(40)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    agent = SearchR1Agent()
    with ScriptedServer(helpers.MODEL, faults=Faults(rate=1.0, kinds=("502",))) as server:
        fp = helpers.fingerprint(rollout, agent, server.url, count=len(qs))
        summary = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                                llm=OpenAIClient(server.url, "m", max_retries=0), concurrency=2,
                                stop_after_failures=5)
    assert summary.outcomes.get("endpoint_error", 0) <= 7  # the failures in flight when it stopped
    assert summary.errors.errored == 40 and summary.errors.by_kind["not_run"] >= 33
    with pytest.raises(RunFailed, match="stopped starting questions after 5 in a row"):
        enforce_error_rate(summary.errors, 0.0, tmp_path / "run")


def test_aether_run_whose_questions_all_fail_exits_non_zero_naming_kinds_and_counts(
        demo: tuple[Path, Path], tmp_path: Path) -> None:
    release, _ = demo
    with ScriptedServer(lambda r: Reply("<answer> x </answer>"), faults=Faults(rate=1.0, kinds=("500",))) as server:
        result = _cli("run", str(release), "--out", str(tmp_path / "run"), "--agent", "direct",
                      "--endpoint", server.url, "--model", "scripted", "--no-progress", "--max-retries", "1")
    assert result.returncode == 3, result.stdout + result.stderr
    message = " ".join(result.stderr.split())
    assert "140 of 140 questions ended in error" in message
    failed = int(message.split("server_error ")[1].split()[0])
    not_run = int(message.split("not_run ")[1].split()[0])
    assert failed + not_run == 140 and 50 <= failed < 140  # a dead server stops the run after 50 in a row
    assert "stopped starting questions after 50 in a row failed on the endpoint" in message
    assert "rerun the same command" in message
    run_json = orjson.loads((tmp_path / "run" / "run.json").read_bytes())
    assert run_json["limits"]["max_retries"] == 1


def test_evaluate_raises_a_typed_error_with_the_summary_instead_of_zero_metrics(demo: tuple[Path, Path],
                                                                                tmp_path: Path) -> None:
    release, index = demo
    with ScriptedServer(search_r1_rule(lambda q: "Paris"), faults=Faults(rate=1.0, kinds=("503",))) as server:
        with pytest.raises(RunFailed) as info:
            evaluate(server.url, release, model="scripted", index=index, run_dir=tmp_path / "run", limits=FAST)
    error = info.value
    assert (error.total, error.errored, error.retryable) == (140, 140, 140)
    assert error.kinds == {"server_error": 140}
    assert "140 of 140 questions ended in error" in str(error) and "fix" in str(error)
    assert not (tmp_path / "run" / "scores.json").exists()
    start = time.monotonic()
    with pytest.raises(RunFailed) as closed:
        evaluate(f"http://127.0.0.1:{_closed_port()}/v1", release, model="m", index=index,
                 run_dir=tmp_path / "run2")
    assert closed.value.kinds == {"connection": 140}
    assert time.monotonic() - start < 30


def test_a_tolerated_error_share_passes_and_is_still_reported(demo: tuple[Path, Path], tmp_path: Path) -> None:
    release, _ = demo
    with ScriptedServer(lambda r: Reply("<answer> Paris </answer>"),
                        faults=Faults(rate=0.1, kinds=("context",), seed=3)) as server:
        result = _cli("run", str(release), "--out", str(tmp_path / "run"), "--agent", "direct",
                      "--endpoint", server.url, "--model", "scripted", "--no-progress", "--max-error-rate", "0.5")
        refused = server.stats.faults["context"]
    assert result.returncode == 0, result.stderr
    out = " ".join(result.stdout.split())
    assert 0 < refused < 70
    assert f"{refused} of 140 questions are in error" in out and "context_length" in out
    assert "not retried on resume" in out


def test_a_context_length_refusal_is_request_rejected_and_never_retried(tmp_path: Path) -> None:
    qs = helpers.questions(4)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    agent = SearchR1Agent()
    with ScriptedServer(helpers.MODEL, faults=Faults(rate=1.0, kinds=("context",))) as bad:
        fp = helpers.fingerprint(rollout, agent, bad.url, count=len(qs))
        first = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                              llm=OpenAIClient(bad.url, "m", max_retries=3, backoff_base_s=0.01))
        assert bad.stats.requests == 4  # no call-level retry of a deterministic refusal
    assert first.outcomes == {"request_rejected": 4}
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl")
    assert {(t["outcome"], t["error_kind"]) for t in traces} == {("request_rejected", "context_length")}
    assert first.errors.by_kind == {"context_length": 4} and first.errors.retryable == 0
    with pytest.raises(RunFailed) as info:
        enforce_error_rate(first.errors, 0.0, tmp_path / "run")
    text = str(info.value)
    assert "not retried on resume" in text and "new --out" in text
    assert "0 of them are retried by rerunning" in text
    with ScriptedServer(helpers.MODEL) as good:
        fp = helpers.fingerprint(rollout, agent, good.url, count=len(qs))
        again = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                              llm=OpenAIClient(good.url, "m"))
        assert good.stats.requests == 0  # resume does not retry a deterministic refusal
    assert (again.attempted, again.skipped) == (0, 4)


def test_a_malformed_200_is_retried_at_the_call_level(tmp_path: Path) -> None:
    faults = Faults(rate=0.4, kinds=("badjson", "nochoices"), seed=11)
    with ScriptedServer(lambda r: Reply("<answer> Paris </answer>"), faults=faults) as server:

        async def go() -> tuple[list[str], int]:
            async with OpenAIClient(server.url, "m", max_retries=12, backoff_base_s=0.001, seed=0) as llm:
                texts = [(await llm.complete(f"Question: q{i}\n", Decoding())).text for i in range(20)]
                chat = await llm.chat([{"role": "user", "content": "Question: c\n"}], Decoding())
                return [*texts, chat.text], llm.retries
        texts, retries = asyncio.run(go())
        injected = dict(server.stats.faults)
    assert set(injected) == {"badjson", "nochoices"}
    assert retries == sum(injected.values())
    assert all(text.strip() == "<answer> Paris </answer>" for text in texts)


def test_a_malformed_200_that_persists_is_a_typed_retried_error(tmp_path: Path) -> None:
    with ScriptedServer(lambda r: "x", faults=Faults(rate=1.0, kinds=("nochoices",))) as server:

        async def go() -> None:
            async with OpenAIClient(server.url, "m", max_retries=2, backoff_base_s=0.001) as llm:
                await llm.complete("Question: q\n", Decoding())
        from aethersearch.errors import EndpointError

        with pytest.raises(EndpointError) as info:
            asyncio.run(go())
        assert server.stats.requests == 3
    assert info.value.transient and info.value.kind == "malformed_reply"


def test_a_second_writer_of_one_run_directory_is_refused_naming_the_pid(demo: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    release, index = demo
    qs = helpers.questions(2)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    fp = helpers.fingerprint(rollout, SearchR1Agent(), None, count=len(qs))
    run_dir = tmp_path / "run"
    with RunStore.open(run_dir, fp):
        with pytest.raises(RunLocked, match=f"process {os.getpid()}") as info:
            RunStore.open(run_dir, fp)
        assert info.value.pid == os.getpid()
        result = _cli("run", str(release), "--out", str(run_dir), "--agent", "lexical", "--index", str(index),
                      "--no-progress")
        assert result.returncode == 2
        message = " ".join(result.stderr.split())
        assert f"being written by process {os.getpid()}" in message and "another --out" in message
    # released when the holder closes (the kernel also releases it if the holder dies)
    RunStore.open(run_dir, fp).close()
