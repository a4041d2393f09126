"""Progress for long commands: a live bar on a terminal, plain periodic lines when redirected, nothing with --quiet.

Why: under SLURM, nohup or CI the output is a file, and a rich live bar writes
nothing useful there until the end (a 49 s rollout printed nothing until it was
done). When stderr is not a terminal, a plain line is written every
``AETHER_PROGRESS_INTERVAL`` seconds (default 10) and once at the end, with done/total,
rate and ETA, so a log shows the job is alive and when it will finish. The global
``aether --quiet`` turns all of it off.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["INTERVAL_ENV", "PIPED_WIDTH", "PlainProgress", "QUIET", "REFRESH_PER_SECOND", "StageReport",
    "interval_s", "make_console", "progress", "set_quiet", "stage_progress"]

QUIET = False
"""Set by ``aether --quiet``: no progress output at all."""
INTERVAL_ENV = "AETHER_PROGRESS_INTERVAL"


def set_quiet(quiet: bool) -> None:
    """Turn progress output off (or back on) for this process."""
    global QUIET
    QUIET = quiet


def interval_s() -> float:
    """Seconds between plain progress lines (``AETHER_PROGRESS_INTERVAL``, default 10)."""
    try:
        return max(0.0, float(os.environ.get(INTERVAL_ENV, "10")))
    except ValueError:
        return 10.0


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class PlainProgress:
    """Periodic one-line progress reports to a stream (a log file, CI output)."""

    def __init__(self, label: str, stream: TextIO, every_s: float, clock: Callable[[], float] = time.monotonic,
                 unit: str = "") -> None:
        self.label, self.stream, self.every_s, self.clock, self.unit = label, stream, every_s, clock, unit
        self.start = clock()
        self.last: float | None = None
        self.state: tuple[int, int | None, dict[str, Any]] = (0, None, {})

    def line(self) -> str:
        """The current progress as one line: done/total, percent, rate, elapsed and ETA, extra fields."""
        done, total, fields = self.state
        elapsed = self.clock() - self.start
        rate = done / elapsed if elapsed > 0 else 0.0
        parts = [f"{self.label}: {done:,}" + (f"/{total:,} ({100 * done / total:.1f}%)" if total else "")]
        parts.append(f"{rate:,.1f}{self.unit}/s" if rate < 100 else f"{rate:,.0f}{self.unit}/s")
        parts.append(f"elapsed {_duration(elapsed)}")
        if total and rate > 0 and done < total:
            parts.append(f"ETA {_duration((total - done) / rate)}")
        parts.extend(f"{key} {value}" for key, value in fields.items())
        return ", ".join(parts)

    def update(self, done: int, total: int | None = None, **fields: Any) -> None:
        """Record progress; write a line when ``every_s`` has passed since the last one."""
        self.state = (done, total, fields)
        now = self.clock()
        if now - (self.last if self.last is not None else self.start) >= self.every_s:
            self.write()
            self.last = now

    def write(self) -> None:
        """Write the current line now (flushed, so a tailing log sees it)."""
        print(self.line(), file=self.stream, flush=True)


#: Live-bar redraws per second. Why not rich's 10: a redraw costs ~2 ms of CPU in its own thread, which
#: at 10 Hz was ~25 µs per model call of a 64-in-flight rollout (issue 16); 2 Hz is ~5x cheaper.
REFRESH_PER_SECOND = 2


@contextlib.contextmanager
def progress(label: str, *, unit: str = "", stream: TextIO | None = None,
             fields: dict[str, Any] | None = None) -> Iterator[Callable[..., None]]:
    """``update(done, total=None, **fields)`` for a long task, rendered for where the output goes."""
    if QUIET:
        yield lambda *args, **kwargs: None
        return
    out = stream if stream is not None else sys.stderr
    if out.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        extra = [TextColumn(f"{key} {{task.fields[{key}]}}") for key in (fields or {})]
        with Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(), *extra,
                      TimeRemainingColumn(), console=Console(file=out), transient=False,
                      refresh_per_second=REFRESH_PER_SECOND) as bar:
            task = bar.add_task(label, total=None, **(fields or {}))

            def live(done: int, total: int | None = None, **values: Any) -> None:
                bar.update(task, completed=done, total=total, **values)

            yield live
        return
    plain = PlainProgress(label, out, interval_s(), unit=unit)
    plain.state = (0, None, dict(fields or {}))
    yield plain.update
    plain.write()  # the final line, always


StageReport = Callable[[str, int, "int | None"], None]
"""``report(stage, done, total)``: progress of a job made of named stages (build, audit)."""


@contextlib.contextmanager
def stage_progress(prefix: str, *, heartbeat_s: float = 1.0) -> Iterator[StageReport]:
    """``report(stage, done, total)`` for a multi-stage job: one ``progress`` display per stage.

    A new stage name ends the previous stage's display (its final line) and opens
    the next, labelled ``"{prefix} {stage}"``. A heartbeat thread re-sends the
    current state every ``heartbeat_s``, so a long step inside a stage (one big
    similarity block) still prints a plain line every progress interval in a log.
    """
    import threading

    lock = threading.Lock()
    stop = threading.Event()
    with contextlib.ExitStack() as stages:
        current: dict[str, Any] = {}

        def report(stage: str, done: int, total: int | None) -> None:
            with lock:
                if current.get("stage") != stage:
                    stages.close()  # the previous stage's display ends with its final line
                    current.update(stage=stage, update=stages.enter_context(progress(f"{prefix} {stage}")))
                current.update(state=(done, total))
                current["update"](done, total)

        def heartbeat() -> None:
            while not stop.wait(heartbeat_s):
                with lock:
                    if "update" in current:
                        current["update"](*current["state"])

        beat = threading.Thread(target=heartbeat, name=f"{prefix}-progress", daemon=True)
        beat.start()
        try:
            yield report
        finally:
            stop.set()
            beat.join()
            with lock:
                stages.close()


PIPED_WIDTH = 240
"""Console width when stdout is not a terminal: wide enough that tables and paths are not wrapped."""


def make_console(*, stderr: bool = False) -> Any:
    """A rich Console that never wraps when its output is piped or redirected (logs stay grep-able)."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, soft_wrap=True, width=max(PIPED_WIDTH, int(os.environ.get("COLUMNS", "0") or 0)))
