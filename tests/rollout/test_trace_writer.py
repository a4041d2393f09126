"""The group-committed trace writer: durable before an append returns, one loop wake-up per fsync batch."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from aethersearch.jsonl import loads
from aethersearch.records import Outcome, Trace
from aethersearch.rollout import store as store_module
from aethersearch.rollout.store import TraceWriter


def _trace(i: int) -> Trace:
    return Trace(id=f"q{i}", question_seen="q?", agent="a", outcome=Outcome.ANSWERED, stop_reason="answer")


def test_each_append_returns_after_its_row_is_fsynced_with_one_wakeup_per_batch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "traces.jsonl"
    synced: list[int] = []  # file size at each fsync: what is durable
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        synced.append(os.fstat(fd).st_size)

    monkeypatch.setattr(store_module.os, "fsync", fsync)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        wakeups = 0
        real = loop.call_soon_threadsafe

        def counting(*args: object, **kwargs: object) -> asyncio.Handle:
            nonlocal wakeups
            wakeups += 1
            return real(*args, **kwargs)  # type: ignore[arg-type]

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        writer = TraceWriter(path)

        async def one(i: int) -> None:
            await writer.append(_trace(i))
            rows = path.read_bytes()
            assert synced and f'"q{i}"'.encode() in rows[: synced[-1]]  # durable before we resumed

        await asyncio.gather(*(one(i) for i in range(200)))
        during = wakeups  # (closing below wakes the loop once more, through to_thread)
        await asyncio.to_thread(writer.close)
        assert during <= writer.fsyncs < 200  # batched: not one wake-up (or fsync) per trace
        return during

    asyncio.run(main())
    ids = [loads(line)["id"] for line in path.read_bytes().splitlines()]
    assert sorted(ids) == sorted(f"q{i}" for i in range(200))


def test_a_cancelled_append_does_not_break_the_rest_of_its_batch(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"

    async def main() -> None:
        writer = TraceWriter(path)
        tasks = [asyncio.create_task(writer.append(_trace(i))) for i in range(20)]
        await asyncio.sleep(0)
        tasks[3].cancel()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.to_thread(writer.close)
        assert [r for i, r in enumerate(results) if i != 3] == [None] * 19

    asyncio.run(main())
    assert len(path.read_bytes().splitlines()) == 20  # the cancelled episode's row was still written


def test_a_failed_write_reaches_every_waiting_episode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module.os, "fsync", broken)

    async def main() -> list[object]:
        writer = TraceWriter(tmp_path / "traces.jsonl")
        results = await asyncio.gather(*(writer.append(_trace(i)) for i in range(5)), return_exceptions=True)
        await asyncio.to_thread(writer.close)
        return results

    assert all(isinstance(r, OSError) for r in asyncio.run(main()))


def _rich_trace(notes: dict[str, object]) -> Trace:
    from aethersearch.records import ErrorKind, LLMCall, Step, ToolCall, Usage

    call = LLMCall(text="<search> q </search>", prompt_tokens=12, completion_tokens=3, finish_reason="stop",
                   elapsed_s=0.05, tool_calls_raw=[{"id": "c1", "function": {"name": "search"}}])
    step = Step(index=0, llm=call, tool_calls=[ToolCall(tool="search", arguments={"query": "é", "k": 3},
                                                        returned_ids=["d1"], elapsed_s=1)],
                observation="Doc 1(Title: x) \u2028 \ud7ff", notes=notes)
    copied = step.model_copy(update={"notes": {**step.notes, "later": [1, 2.5, None]}, "index": 1})
    return Trace(id="q1", question_seen="q?", agent="a", steps=[step, copied], response="r", prediction=None,
                 outcome=Outcome.ENDPOINT_ERROR, stop_reason="endpoint_error", error="boom",
                 error_kind=ErrorKind.TIMEOUT, usage=Usage(prompt_tokens=3, turns=2), elapsed_s=float("nan"))


@pytest.mark.parametrize("notes", [
    {},
    {"stop": "in_text", "z": {"b": 1, "a": [True, None, 1e300]}, "outcome": Outcome.ANSWERED},
    {"tuple": (1, "x"), "counter": __import__("collections").Counter("aab")},
    {"set": {3}, "path": Path("/x")},  # orjson refuses these: the line is written by dumps
    {"when": __import__("datetime").datetime(2026, 1, 2, tzinfo=__import__("datetime").timezone.utc)},
    {"model": Trace(id="inner", question_seen="q", agent="a", outcome=Outcome.ANSWERED, stop_reason="s")},
])
def test_encoded_trace_lines_are_exactly_the_canonical_dumps(notes: dict[str, object]) -> None:
    from aethersearch.jsonl import dumps
    from aethersearch.rollout.store import encode_line

    trace = _rich_trace(notes)
    assert encode_line(trace) == dumps(trace) + b"\n"
    assert encode_line(_trace(7)) == dumps(_trace(7)) + b"\n"


def test_traces_finishing_within_one_window_share_one_fsync_and_commit_now_does_not_wait(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"

    async def main() -> tuple[int, float]:
        writer = TraceWriter(path, interval_s=5.0)  # a window far longer than the test may take
        first = asyncio.gather(*(writer.append(_trace(i)) for i in range(30)))
        await asyncio.sleep(0.05)
        assert not first.done() and path.read_bytes() == b""  # nothing is done before its commit
        started = asyncio.get_running_loop().time()
        writer.commit_now()
        await first
        waited = asyncio.get_running_loop().time() - started
        await asyncio.to_thread(writer.close)
        return writer.fsyncs, waited

    fsyncs, waited = asyncio.run(main())
    assert fsyncs == 1 and waited < 2.0
    assert len(path.read_bytes().splitlines()) == 30


def test_a_full_window_is_committed_at_once(tmp_path: Path) -> None:
    async def main() -> int:
        writer = TraceWriter(tmp_path / "traces.jsonl", interval_s=5.0, max_rows=10)
        await asyncio.wait_for(asyncio.gather(*(writer.append(_trace(i)) for i in range(20))), 3.0)
        await asyncio.to_thread(writer.close)
        return writer.fsyncs

    assert 1 <= asyncio.run(main()) <= 2


def test_the_store_keeps_finished_traces_without_their_steps(tmp_path: Path) -> None:
    from aethersearch.records import LLMCall, Step
    from aethersearch.rollout.store import RunStore

    store = RunStore(tmp_path, None)  # type: ignore[arg-type]  # record() needs no fingerprint
    full = _trace(1).model_copy(update={"steps": [Step(index=0, llm=LLMCall(text="x"))], "response": "long",
                                        "prediction": "p", "attempt": 2})
    store.record(full)
    kept = store.latest[("q1", 0)]
    assert (kept.steps, kept.response) == ([], "")
    assert (kept.prediction, kept.outcome, kept.attempt, kept.error) == ("p", Outcome.ANSWERED, 2, None)
