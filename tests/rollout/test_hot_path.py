"""The rollout hot path keeps its guarantees: done only once on disk, GC settings restored, slots freed."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from aethersearch.agents.llm import OpenAIClient, _chat_choice, _completion_choice
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.jsonl import read_jsonl
from aethersearch.records import Budget, Decoding, Outcome, Record, Trace, Usage
from aethersearch.rollout.runner import Progress, run_episode, run_gc_policy, run_questions
from aethersearch.rollout.store import RunStore
from aethersearch.testing.scripted_server import ScriptedServer
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


def _same_types(built: Any, validated: Any, where: str = "trace") -> None:
    """``built`` and ``validated`` hold equal values of the same exact types, record by record."""
    assert type(built) is type(validated), where
    if isinstance(built, Record):
        assert built.__dict__.keys() == validated.__dict__.keys(), where
        for name, value in built.__dict__.items():
            _same_types(value, validated.__dict__[name], f"{where}.{name}")
    elif isinstance(built, list):
        assert len(built) == len(validated), where
        for i, (a, b) in enumerate(zip(built, validated, strict=True)):
            _same_types(a, b, f"{where}[{i}]")
    else:
        assert built == validated, where


def test_the_records_the_hot_path_builds_unvalidated_equal_validated_ones(tmp_path: Path) -> None:
    """Trace, steps, model calls, usage, the store's copy and predictions: Record.trusted gives what validation gives."""
    agent = SearchR1Agent(tokenizer="regex", prompt_format="raw", chat_template="raw")
    question = helpers.questions(1)[0]
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", [question])

    async def episode(url: str) -> Trace:
        async with OpenAIClient(url, "m") as llm:
            return await run_episode(question, agent, FakeSearchEnv(), llm, Budget(), Decoding())

    with ScriptedServer(helpers.MODEL) as server:
        trace = asyncio.run(episode(server.url))
        store = RunStore.open(tmp_path / "run", helpers.fingerprint(rollout, agent, server.url, count=1))
    try:
        store.record(trace)
        predictions = read_jsonl(store.export_predictions([question.id]))
    finally:
        store.close()
    assert trace.outcome is Outcome.ANSWERED and len(trace.steps) == 2
    assert all(step.llm is not None and step.notes for step in trace.steps) and trace.steps[0].tool_calls
    _same_types(trace, Trace.model_validate(trace.model_dump()))
    kept = store.latest[(question.id, 0)]
    _same_types(kept, Trace.model_validate(kept.model_dump()), "stored")
    assert kept.steps == [] and kept.response == "" and kept.outcome is Outcome.ANSWERED
    assert predictions == [{"id": question.id, "prediction": trace.prediction, "outcome": "answered", "sample": 0}]


def test_a_trusted_record_needs_exactly_its_fields() -> None:
    assert Usage.trusted(prompt_tokens=1, completion_tokens=2, turns=3, tool_calls=4) == Usage(
        prompt_tokens=1, completion_tokens=2, turns=3, tool_calls=4)
    with pytest.raises(TypeError, match="Usage.trusted.*missing.*'tool_calls'"):
        Usage.trusted(prompt_tokens=1, completion_tokens=2, turns=3)  # a missing field would be missing on disk
    with pytest.raises(TypeError, match="Usage.trusted.*unexpected keyword argument 'extra'"):
        Usage.trusted(prompt_tokens=1, completion_tokens=2, turns=3, tool_calls=4, extra=5)
    with pytest.raises(TypeError, match="positional"):
        Usage.trusted(1, 2, 3, 4)  # type: ignore[call-arg]  # fields by name only: an order slip cannot swap them
    # the generic check, for a record built from a dict of fields
    with pytest.raises(TypeError, match="exactly its fields"):
        Record.trusted.__func__(Usage, prompt_tokens=1)  # type: ignore[attr-defined]


def test_every_record_class_has_its_own_trusted_constructor() -> None:
    """Each record gets a constructor of exactly its own fields, subclasses of records included."""
    from aethersearch.agents.llm import ConstrainedDecoding
    from aethersearch.records import LLMCall, Step

    for cls in (LLMCall, Step, Trace, Usage, Decoding, ConstrainedDecoding):
        assert cls.trusted.__qualname__ == f"{cls.__name__}.trusted"
    fields = Decoding().__dict__ | {"response_format": {"type": "json_object"}}
    built = ConstrainedDecoding.trusted(**fields)
    assert type(built) is ConstrainedDecoding and built == ConstrainedDecoding(**fields)
    assert built.model_fields_set == set(fields)
    with pytest.raises(TypeError, match="response_format"):
        ConstrainedDecoding.trusted(**Decoding().__dict__)


@pytest.mark.parametrize("reply", [
    {"choices": [{"text": "a", "finish_reason": 5}]},
    {"choices": [{"message": {"content": "a", "tool_calls": ["not an object"]}}]},
])
def test_a_reply_whose_recorded_fields_are_not_typed_is_malformed(reply: dict[str, Any]) -> None:
    """The model-call record is built unvalidated, so the reply's fields are checked where it is read."""
    parse = _chat_choice if "message" in reply["choices"][0] else _completion_choice
    with pytest.raises(TypeError):
        parse(reply)


def test_a_finished_question_lets_go_of_its_full_trace_before_waiting_for_its_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the summary waits for the fsync: the steps were freed while hot (issue 16), and done still means on disk."""
    import os
    import weakref

    from aethersearch.rollout import runner as runner_module
    from aethersearch.rollout import store as store_module

    qs = helpers.questions(12)
    rollout = helpers.write_rollout(tmp_path / "rollout_questions.jsonl", qs)
    agent = SearchR1Agent(tokenizer="regex", prompt_format="raw", chat_template="raw")
    full_traces: list[weakref.ref[Trace]] = []
    alive_at_fsync: list[int] = []
    real_episode, real_fsync = runner_module.run_episode, os.fsync

    async def recording_episode(*args: Any, **kwargs: Any) -> Trace:
        trace = await real_episode(*args, **kwargs)
        full_traces.append(weakref.ref(trace))
        return trace

    def fsync(fd: int) -> None:  # in the writer thread, while finished questions wait for this commit
        alive_at_fsync.append(sum(ref() is not None for ref in full_traces))
        real_fsync(fd)

    monkeypatch.setattr(runner_module, "run_episode", recording_episode)
    monkeypatch.setattr(store_module.os, "fsync", fsync)
    done_rows: list[tuple[int, int]] = []

    def progress(event: Progress) -> None:
        done_rows.append((event.done, (tmp_path / "run" / "traces.jsonl").read_bytes().count(b"\n")))

    with ScriptedServer(helpers.MODEL, latency_s=0.01) as server:
        fp = helpers.fingerprint(rollout, agent, server.url, count=len(qs))
        summary = run_questions(qs, agent, lambda q: FakeSearchEnv(), Budget(), tmp_path / "run", fp,
                                llm=OpenAIClient(server.url, "m"), concurrency=4, progress=progress)
    assert summary.outcomes == {"answered": 12} and len(full_traces) == 12
    assert alive_at_fsync and alive_at_fsync == [0] * len(alive_at_fsync)  # none kept across a commit wait
    assert all(rows >= done for done, rows in done_rows)  # still reported done only once on disk
    assert all(len(t["steps"]) == 2 for t in read_jsonl(tmp_path / "run" / "traces.jsonl"))  # full on disk


def test_the_search_environments_call_records_equal_validated_ones() -> None:
    """The product's search records its tool calls unvalidated (issue 16): each equals the validated record."""
    from aethersearch.records import Document, ToolCall
    from aethersearch.search.environment import refused_call, served_call

    documents = [Document(id="d1", title="T", text="x"), Document(id="d2", title="U", text="y")]
    served = served_call("search", {"query": "q", "k": 2}, documents, time.perf_counter())
    refused = refused_call("visit", {"page": "p"}, "unknown page 'p'", time.perf_counter())
    assert served.documents == documents and served.call.returned_ids == ["d1", "d2"] and served.call.error is None
    assert refused.documents == [] and refused.call.error == "unknown page 'p'" and refused.call.elapsed_s >= 0
    for result in (served, refused):
        _same_types(result.call, ToolCall.model_validate(result.call.model_dump()), "call")


def test_prediction_lines_are_exactly_what_write_jsonl_writes(tmp_path: Path) -> None:
    """predictions.jsonl is written without model_dump; its bytes are the canonical ones, enum and None included."""
    from aethersearch.jsonl import encode_jsonl
    from aethersearch.records import Prediction
    from aethersearch.rollout.store import encode_line

    rows = [Prediction(id="q1", prediction="Paris", outcome=Outcome.ANSWERED),
            Prediction(id="q2\u2028", prediction=None, outcome=Outcome.ENDPOINT_ERROR),
            Prediction.trusted(id="q3", prediction="I don't know", outcome=Outcome.ABSTAINED, sample=2)]
    assert b"".join(map(encode_line, rows)) == encode_jsonl(rows)
