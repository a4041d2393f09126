"""The rollout hot path keeps its guarantees: done only once on disk, GC settings restored, slots freed."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

from aethersearch.agents.llm import OpenAIClient
from aethersearch.agents.scripted_server import ScriptedServer
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget
from aethersearch.rollout.runner import Progress, run_gc_policy, run_questions
from tests.agents.fakes import FakeSearchEnv
from tests.rollout import helpers


def test_a_question_is_reported_done_only_once_its_trace_is_on_disk(tmp_path: Path) -> None:
    qs = helpers.questions(24)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    agent = SearchR1Agent(tokenizer="regex", prompt_format="raw", chat_template="raw")
    on_disk_when_reported: list[tuple[int, int]] = []

    def progress(event: Progress) -> None:
        rows = (tmp_path / "run" / "traces.jsonl").read_bytes().count(b"\n")
        on_disk_when_reported.append((event.done, rows))

    with ScriptedServer(helpers.MODEL, latency_s=0.01) as server:
        fp = helpers.fingerprint(rollout, agent, server.url, count=len(qs))
        summary = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                                llm=OpenAIClient(server.url, "m"), concurrency=5, progress=progress)
    assert summary.outcomes == {"answered": 24}
    assert len(on_disk_when_reported) == 24
    assert all(rows >= done for done, rows in on_disk_when_reported), on_disk_when_reported
    traces = read_jsonl(tmp_path / "run" / "traces.jsonl")
    assert all(len(t["steps"]) == 2 for t in traces)  # full traces on disk (the store keeps summaries)
    assert summary.elapsed_s < 10


def test_the_gc_policy_is_restored_after_nested_and_concurrent_runs() -> None:
    before = gc.get_threshold()
    entered = threading.Barrier(2)

    def other_run() -> None:
        with run_gc_policy():
            entered.wait(5)
            entered.wait(5)

    thread = threading.Thread(target=other_run)
    thread.start()
    with run_gc_policy():
        entered.wait(5)
        assert gc.get_threshold()[0] >= 20_000 and gc.get_freeze_count() > 0
        entered.wait(5)
        thread.join(5)
        assert gc.get_threshold()[0] >= 20_000  # the other run ending does not undo this one's settings
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
