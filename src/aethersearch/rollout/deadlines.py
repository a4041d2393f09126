"""Per-question deadlines of a run, all of one length, kept by a single timer.

Why not ``asyncio.timeout`` per question: each one schedules a timer on the event
loop (a heap push with Python-level comparisons) and cancels it when the question
ends, leaving a cancelled entry in the loop's timer heap until the loop sweeps it;
at 64+ questions in flight that was one of the larger single items of the
harness's own CPU per question (issue 16). Every question of a run has the same
deadline length and questions start in order, so their deadlines fall in start
order: a FIFO of (deadline, task) with one timer armed for its head expires them
exactly when ``asyncio.timeout`` would, at the cost of a deque append per question.

The semantics are ``asyncio.timeout``'s: an overdue question's task is cancelled,
and the :class:`CancelledError` raised inside the guarded block becomes a
``TimeoutError`` (:meth:`Deadline.__exit__`) unless the task was also cancelled
by someone else, in which case the cancellation goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from types import TracebackType
from typing import Any

__all__ = ["Deadline", "Deadlines"]


class Deadline:
    """One question's deadline (loop time ``when``): a context manager around the question's guarded block.

    On exit, as ``asyncio.timeout``'s: if the deadline expired, its own cancel
    request is withdrawn (``uncancel``), and a ``CancelledError`` leaving the block
    becomes ``TimeoutError`` when no other cancel request is pending.
    """

    __slots__ = ("when", "task", "cancelling", "expired", "_owner")

    def __init__(self, owner: Deadlines, when: float, task: asyncio.Task[Any]) -> None:
        self._owner = owner
        self.when = when
        self.task: asyncio.Task[Any] | None = task
        self.cancelling = task.cancelling()  # cancel requests already pending when the block was entered
        self.expired = False

    def __enter__(self) -> Deadline:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        task = self.task
        self._owner._finish(self)
        if self.expired and task is not None:
            if task.uncancel() <= self.cancelling and exc_type is asyncio.CancelledError:
                raise TimeoutError from exc


class Deadlines:
    """The deadlines of one run's questions on one event loop: ``seconds`` after each question starts.

    ``with deadlines.start():`` around a question's guarded block, inside its task.
    """

    def __init__(self, seconds: float) -> None:
        if not seconds > 0:
            raise ValueError(f"a deadline must be positive, got {seconds!r}")
        self.seconds = seconds
        self._loop = asyncio.get_running_loop()
        self._queue: deque[Deadline] = deque()
        self._timer: asyncio.TimerHandle | None = None
        #: the loop runs a timer up to one clock resolution early (asyncio.timeout's own timer too)
        self._slack = time.get_clock_info("monotonic").resolution

    def start(self) -> Deadline:
        """The deadline of the current task's question, ``seconds`` from now."""
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a question's deadline must be started inside its task")
        deadline = Deadline(self, self._loop.time() + self.seconds, task)
        self._queue.append(deadline)
        if self._timer is None:
            self._timer = self._loop.call_at(deadline.when, self._expire)
        return deadline

    def _finish(self, deadline: Deadline) -> None:
        """The question's guarded block ended: its deadline can no longer cancel it."""
        deadline.task = None  # a finished question's task is not kept alive by the queue
        queue = self._queue
        while queue and queue[0].task is None:  # drop finished questions from the head
            queue.popleft()
        if not queue and self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        """Timer callback: cancel every question past its deadline, then arm the timer for the next one."""
        self._timer = None
        queue = self._queue
        now = self._loop.time() + self._slack
        while queue:
            head = queue[0]
            if head.task is None:
                queue.popleft()
            elif head.when <= now:
                queue.popleft()
                head.expired = True
                head.task.cancel()
            else:
                self._timer = self._loop.call_at(head.when, self._expire)
                break

    def __len__(self) -> int:
        """Deadlines still queued (started, not yet finished or dropped)."""
        return len(self._queue)
