"""The run directory: ``run.json``, ``traces.jsonl`` (append-only, fsynced) and ``predictions.jsonl``.

Why this layout: a run must survive ``kill -9`` at any instant and resume without
redoing or duplicating work. Each finished question is one line of
``traces.jsonl``, made durable (flush + fsync) before the question counts as done.
On open, a torn last line (a crash mid-append) is set aside to
``traces.jsonl.torn-<n>`` and cut off, so the log is again a sequence of whole
rows. The latest trace per id decides its state: an error outcome is retried on
resume, anything else is final and never regenerated. ``predictions.jsonl`` is a
pure function of the traces (latest per id, in question order), rewritten
atomically.

Appends are group-committed by one writer thread: all rows that arrived while
the previous fsync ran share the next one, so the event loop never blocks on the
disk and durability costs one fsync per batch, not per row.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import queue
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from aethersearch.errors import IntegrityError, RunLocked
from aethersearch.jsonl import (
    atomic_write_bytes,
    atomic_write_json,
    dumps,
    loads,
    read_jsonl_tolerant,
    truncate_to,
    validate_row,
    write_jsonl,
)
from aethersearch.records import RETRIED_OUTCOMES, Prediction, RunFingerprint, Trace
from aethersearch.rollout.fingerprint import fingerprint_diff

RUN_JSON = "run.json"
TRACES = "traces.jsonl"
PREDICTIONS = "predictions.jsonl"
LOCK = ".run.lock"


class RunLock:
    """An exclusive ``flock`` on ``<run>/.run.lock`` held while a process writes the run.

    Why: two ``aether run`` on one directory both see the same unfinished ids and
    run them twice, interleaving their traces. ``flock`` is released by the kernel
    when the holder exits, even on ``kill -9``, so a stale lock file never blocks
    a later run; the file holds the holder's PID only to name it in the message.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        """Take the lock or raise :class:`RunLocked` naming the other process's PID."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
            os.close(fd)
            pid = int(holder) if holder.isdigit() else None
            who = f"process {pid}" if pid is not None else "another process"
            raise RunLocked(f"{self.path.parent}: the run directory is being written by {who}; two writers "
                            "would run the same questions twice and interleave their traces",
                            pid=pid, fix=(f"wait for {who} to finish (or stop it: kill {pid})" if pid else
                                          "wait for the other run to finish") +
                            ", or write this run to another --out directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        """Release the lock (safe to call twice)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class TraceWriter:
    """Durable, group-committed appends to ``traces.jsonl`` from a single writer thread.

    Why the hand-back is per batch: the thread wakes the event loop once per fsync
    (one ``call_soon_threadsafe`` settling every episode of the batch), not once per
    trace; at 64+ episodes in flight a wake-up per trace cost more CPU than the
    fsync itself. An episode still resumes only after its own row is fsynced.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle = path.open("ab")
        self._queue: queue.SimpleQueue[tuple[bytes, asyncio.AbstractEventLoop, asyncio.Future[None]] | None] = (
            queue.SimpleQueue())
        self._thread = threading.Thread(target=self._loop, name="trace-writer", daemon=True)
        self._thread.start()
        self.fsyncs = 0

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            batch = []
            stop = item is None
            if item is not None:
                batch.append(item)
            while not stop:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                else:
                    batch.append(item)
            if batch:
                error: BaseException | None = None
                try:
                    self._handle.write(b"".join(data for data, _, _ in batch))
                    self._handle.flush()
                    os.fsync(self._handle.fileno())
                    self.fsyncs += 1
                except BaseException as exc:  # surfaced to every waiting episode
                    error = exc
                _settle_batch(batch, error)
            if stop:
                return

    async def append(self, trace: Trace) -> None:
        """Return once ``trace`` is on disk (fsynced)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._queue.put((dumps(trace) + b"\n", loop, future))
        await future

    def close(self) -> None:
        """Flush everything queued, stop the thread and close the file."""
        self._queue.put(None)
        self._thread.join()
        self._handle.close()


def _settle_batch(batch: list[tuple[bytes, asyncio.AbstractEventLoop, asyncio.Future[None]]],
                  error: BaseException | None) -> None:
    """From the writer thread: resolve a batch's futures with one wake-up per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
    for _, loop, future in batch:
        by_loop.setdefault(loop, []).append(future)
    for loop, futures in by_loop.items():
        try:
            loop.call_soon_threadsafe(_resolve, futures, error)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


def _resolve(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    """On the event loop: wake every episode of one fsynced batch (cancelled waiters are skipped)."""
    for future in futures:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


class RunStore:
    """One run directory, opened against the fingerprint of the settings about to run."""

    def __init__(self, run_dir: Path, fingerprint: RunFingerprint) -> None:
        self.run_dir = run_dir
        self.fingerprint = fingerprint
        self.latest: dict[str, Trace] = {}
        self.torn_tail_path: Path | None = None
        self.rows = 0
        self._lock: RunLock | None = None

    @property
    def traces_path(self) -> Path:
        """``<run>/traces.jsonl``."""
        return self.run_dir / TRACES

    @classmethod
    def open(cls, run_dir: str | Path, fingerprint: RunFingerprint) -> RunStore:
        """Lock the run directory, then create the run or reopen it if its run.json matches.

        A different fingerprint is refused (IntegrityError); a directory another
        process is writing is refused (RunLocked). Call :meth:`close` when done
        (or use the store as a context manager) to release the lock.
        """
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        store = cls(run_dir, fingerprint)
        store._lock = RunLock(run_dir).acquire()
        try:
            run_json = run_dir / RUN_JSON
            if run_json.exists():
                stored = validate_row(run_json, 1, loads(run_json.read_bytes()), RunFingerprint)
                diff = fingerprint_diff(stored, fingerprint)
                if diff:
                    raise IntegrityError(
                        f"{run_json}: this run was started with different settings; refusing to resume "
                        "(that would mix two runs):\n    " + "\n    ".join(diff),
                        fix="rerun with the original settings, or write to a new --out directory")
                if stored != fingerprint:  # only resume-ignored fields (endpoint, concurrency, limits) differ
                    atomic_write_json(run_json, fingerprint)
            else:
                atomic_write_json(run_json, fingerprint)
            store._load()
        except BaseException:
            store.close()
            raise
        return store

    def close(self) -> None:
        """Release the run-directory lock (safe to call twice)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _load(self) -> None:
        read = read_jsonl_tolerant(self.traces_path)
        if read.torn_tail is not None:
            number = 1
            while (self.run_dir / f"{TRACES}.torn-{number}").exists():
                number += 1
            self.torn_tail_path = self.run_dir / f"{TRACES}.torn-{number}"
            atomic_write_bytes(self.torn_tail_path, read.torn_tail)
            truncate_to(self.traces_path, read.valid_bytes)
        for line, row in enumerate(read.rows, start=1):
            trace = validate_row(self.traces_path, line, row, Trace)
            self.latest[trace.id] = trace
        self.rows = len(read.rows)

    def finished_ids(self) -> set[str]:
        """Ids whose latest trace is final: never run again.

        Final includes ``request_rejected`` (the server refused that exact request,
        e.g. context length exceeded): the same request would be refused again.
        """
        return {i for i, t in self.latest.items() if t.outcome not in RETRIED_OUTCOMES}

    def errored_ids(self) -> set[str]:
        """Ids whose latest trace is an endpoint or tool error: retried on resume."""
        return {i for i, t in self.latest.items() if t.outcome in RETRIED_OUTCOMES}

    def next_attempt(self, question_id: str) -> int:
        """1 for a new id, previous attempt + 1 for an errored one."""
        previous = self.latest.get(question_id)
        return 1 if previous is None else previous.attempt + 1

    def writer(self) -> TraceWriter:
        """A durable appender for this run's traces."""
        return TraceWriter(self.traces_path)

    def record(self, trace: Trace) -> None:
        """Note a trace that was just made durable (keeps ``latest`` current)."""
        self.latest[trace.id] = trace

    def export_predictions(self, order: Iterable[str]) -> Path:
        """Write ``predictions.jsonl`` (latest trace per id, in ``order``) atomically."""
        rows: list[Any] = []
        for question_id in order:
            trace = self.latest.get(question_id)
            if trace is not None:
                rows.append(Prediction(id=trace.id, prediction=trace.prediction, outcome=trace.outcome))
        path = self.run_dir / PREDICTIONS
        write_jsonl(path, rows)
        return path


def export_predictions(run_dir: str | Path) -> Path:
    """Rewrite ``predictions.jsonl`` of a run from its traces alone (e.g. after a crash).

    Order: first appearance in ``traces.jsonl``; a torn last line is ignored (not removed).
    """
    run_dir = Path(run_dir)
    traces = run_dir / TRACES
    read = read_jsonl_tolerant(traces)
    latest: dict[str, Trace] = {}
    for line, row in enumerate(read.rows, start=1):
        trace = validate_row(traces, line, row, Trace)
        latest[trace.id] = trace
    path = run_dir / PREDICTIONS
    write_jsonl(path, [Prediction(id=t.id, prediction=t.prediction, outcome=t.outcome) for t in latest.values()])
    return path
