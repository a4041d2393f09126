"""One timer for a run's per-question deadlines behaves as ``asyncio.timeout`` per question did."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from aethersearch.agents.llm import LLM, Completion
from aethersearch.agents.search_r1 import SearchR1Agent
from aethersearch.records import Budget, Decoding, Outcome, RolloutQuestion
from aethersearch.rollout.deadlines import Deadlines
from aethersearch.rollout.runner import run_episode
from tests.agents.fakes import FakeSearchEnv


class _SearchingModel(LLM):
    """Always asks for a search (the server names its stop string)."""

    endpoint = "in-process"
    model = "m"

    @property
    def served(self) -> _SearchingModel:
        return self

    async def complete(self, prompt: str, decoding: Decoding) -> Completion:
        return Completion("<search> q ", "stop", "</search>", 1, 3, [], 0.0, 1)


async def _guarded(deadlines: Deadlines, sleep_s: float) -> str:
    try:
        with deadlines.start():
            await asyncio.sleep(sleep_s)
    except TimeoutError:
        return "timeout"
    return "done"


def test_each_question_expires_its_own_deadline_after_it_started_and_not_before() -> None:
    async def main() -> tuple[list[str], list[float], int]:
        deadlines = Deadlines(0.2)
        started = time.monotonic()
        ends: list[float] = []

        async def one(delay_start: float, sleep_s: float) -> str:
            await asyncio.sleep(delay_start)
            result = await _guarded(deadlines, sleep_s)
            ends.append(time.monotonic() - started)
            return result

        # staggered starts: the queue's order is the start order; fast ones finish, slow ones expire
        results = await asyncio.gather(one(0.0, 5), one(0.05, 0.01), one(0.1, 5), one(0.15, 0.05), one(0.3, 5))
        return results, sorted(ends), len(deadlines)

    results, ends, left = asyncio.run(main())
    assert results == ["timeout", "done", "timeout", "done", "timeout"]
    slow_ends = ends[2:]  # the three that expired, each 0.2 s after its own start (0.0, 0.1, 0.3)
    for end, expected in zip(slow_ends, (0.2, 0.3, 0.5), strict=True):
        assert expected - 0.01 <= end < expected + 0.07, (slow_ends, expected)
    assert left == 0  # nothing kept once every question ended


def test_an_external_cancel_is_not_turned_into_a_deadline() -> None:
    async def main() -> tuple[bool, int]:
        deadlines = Deadlines(30)
        task = asyncio.ensure_future(_guarded(deadlines, 10))
        await asyncio.sleep(0.01)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True, len(deadlines)
        return False, len(deadlines)

    cancelled, left = asyncio.run(main())
    assert cancelled and left == 0


def test_an_expired_deadline_withdraws_its_cancel_request() -> None:
    async def main() -> tuple[str, int]:
        deadlines = Deadlines(0.05)
        result = await _guarded(deadlines, 5)
        task = asyncio.current_task()
        assert task is not None
        await asyncio.sleep(0.01)  # the task is usable afterwards: no pending cancellation
        return result, task.cancelling()

    assert asyncio.run(main()) == ("timeout", 0)


def test_finished_questions_do_not_keep_their_tasks_or_the_timer() -> None:
    async def main() -> tuple[int, bool]:
        deadlines = Deadlines(60)
        await asyncio.gather(*(_guarded(deadlines, 0) for _ in range(100)))
        return len(deadlines), deadlines._timer is None

    assert asyncio.run(main()) == (0, True)


def test_a_non_positive_deadline_is_refused() -> None:
    async def main() -> None:
        Deadlines(0)

    with pytest.raises(ValueError, match="positive"):
        asyncio.run(main())


def test_run_episode_with_a_shared_queue_records_the_deadline_outcome(tmp_path: Path) -> None:
    agent = SearchR1Agent(tokenizer="regex", prompt_format="raw", chat_template="raw")

    async def main() -> tuple[list[tuple[str, str, bool]], int]:
        deadlines = Deadlines(0.2)
        slow, fast = FakeSearchEnv(delay_s=5.0), FakeSearchEnv(delay_s=0.0)
        traces = await asyncio.gather(*(
            run_episode(RolloutQuestion(id=f"q{i}", question="Who?"), agent, slow if i % 2 else fast,
                        _SearchingModel(), Budget(max_turns=2, max_tool_calls=2), Decoding(), timeout_s=0.2,
                        deadlines=deadlines) for i in range(4)))
        return [(t.stop_reason, t.outcome.value, t.elapsed_s < 1) for t in traces], len(deadlines)

    outcomes, left = asyncio.run(main())
    # fast questions end on their budget; slow ones at their deadline, recorded as such (not a crash, not a hang)
    assert outcomes == [("budget", Outcome.BUDGET.value, True), ("deadline", Outcome.ENDPOINT_ERROR.value, True)] * 2
    assert left == 0


class _TimingOutTool(FakeSearchEnv):
    """A search tool whose own client times out (raises ``TimeoutError``) at once."""

    async def search(self, query: str, k: int):  # type: ignore[no-untyped-def]
        raise TimeoutError("search backend read timed out")


@pytest.mark.parametrize("timeout_s", [None, 30.0])
def test_a_tools_own_timeout_is_a_tool_error_not_the_deadline(timeout_s: float | None) -> None:
    """Only the question's deadline is recorded as one: a tool's TimeoutError, with or without a
    deadline set, is that tool's fault (it crashed the run without one, and was labelled a deadline with one)."""
    agent = SearchR1Agent(tokenizer="regex", prompt_format="raw", chat_template="raw")

    async def main() -> tuple[str, str, str | None, str | None]:
        trace = await run_episode(RolloutQuestion(id="q0", question="Who?"), agent, _TimingOutTool(),
                                  _SearchingModel(), Budget(max_turns=2, max_tool_calls=2), Decoding(),
                                  timeout_s=timeout_s)
        return trace.stop_reason, trace.outcome.value, trace.error, trace.error_kind

    stop, outcome, error, kind = asyncio.run(main())
    assert (stop, outcome, kind) == ("tool_error", Outcome.TOOL_ERROR.value, "tool")
    assert error == "TimeoutError: search backend read timed out"
