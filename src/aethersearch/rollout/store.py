"""The run directory: ``run.json``, ``traces.jsonl`` (append-only, fsynced) and ``predictions.jsonl``.

Why this layout: a run must survive ``kill -9`` at any instant and resume without
redoing or duplicating work. Each finished question is one line of
``traces.jsonl``, made durable (flush + fsync) before the question counts as done.
On open, a torn last line (a crash mid-append) is set aside to
``traces.jsonl.torn-<n>`` and cut off, so the log is again a sequence of whole
rows. The latest trace per (id, sample) decides its state: an error outcome is
retried on resume, anything else is final and never regenerated. A run of K
samples per question (``run.json`` ``samples``) has K such keys per question
(``rollout/samples.py``). ``predictions.jsonl`` is a pure function of the traces
(latest per key, in question order then sample order), rewritten atomically.

Appends are group-committed: the event loop gathers the rows that finish within a
short window (``COMMIT_INTERVAL_S``) and one writer thread writes and fsyncs them
together, so the event loop never blocks on the disk and durability costs one
fsync and one thread hand-off per window, not per row.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Self

from aethersearch.errors import IntegrityError, RunLocked
from aethersearch.jsonl import (
    GroupCommitWriter,
    atomic_write_bytes,
    atomic_write_json,
    loads,
    plain_line_encoder,
    read_jsonl_tolerant,
    truncate_to,
    validate_row,
    write_jsonl,
)
from aethersearch.records import (
    RETRIED_OUTCOMES,
    LLMCall,
    Prediction,
    RunFingerprint,
    Step,
    ToolCall,
    Trace,
    Usage,
)
from aethersearch.rollout.fingerprint import fingerprint_diff
from aethersearch.rollout.samples import SampleKey, sample_keys

__all__ = ["COMMIT_INTERVAL_S", "COMMIT_MAX_ROWS", "LOCK", "PREDICTIONS", "RUN_JSON", "RunLock", "RunStore",
    "TRACES", "TraceWriter", "encode_line", "export_predictions", "kept_summary"]

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


#: The records the run directory's lines are made of: plain fields, no aliases or custom serializers.
_encode_plain = plain_line_encoder({Trace, Step, LLMCall, ToolCall, Usage, Prediction})


def encode_line(record: Trace | Prediction) -> bytes:
    """The JSONL line of a trace or prediction: exactly :func:`aethersearch.jsonl.dumps` (plus a newline).

    Written by :func:`aethersearch.jsonl.plain_line_encoder`, which skips ``model_dump``'s
    dict copies (~26 µs a trace down to ~7 µs, a fifth of the run's own CPU per question);
    a test compares both on varied traces and predictions.
    """
    return _encode_plain(record)


#: How long a finished trace may wait for the next group commit (one write + fsync for every
#: trace that finished in the window). Nothing is reported done before its commit.
COMMIT_INTERVAL_S = 0.1
#: A window holding this many traces is committed at once.
COMMIT_MAX_ROWS = 256


class TraceWriter(GroupCommitWriter):
    """Durable, group-committed appends to ``traces.jsonl``: one write + fsync per commit window.

    Why windows: at 64+ episodes in flight, handing each finished trace to the
    writer thread on its own cost two thread switches and a loop wake-up per
    trace (~140 µs of CPU, a third of the harness's own cost per question). Now
    the event loop collects the traces that finish within ``interval_s`` (or
    ``max_rows`` of them) and hands them over as one batch (see
    :class:`aethersearch.jsonl.GroupCommitWriter`, shared with the sandbox's action log).
    Durability is unchanged: :meth:`append` returns only after its row is fsynced,
    so ``kill -9`` loses only rows nobody was told were done.
    """

    def __init__(self, path: Path, *, interval_s: float = COMMIT_INTERVAL_S,
                 max_rows: int = COMMIT_MAX_ROWS) -> None:
        super().__init__(path, interval_s=interval_s, max_rows=max_rows, thread_name="trace-writer")

    async def append(self, trace: Trace) -> None:
        """Return once ``trace`` is on disk (fsynced with the rest of its commit window)."""
        await self.submit(trace)

    def submit(self, trace: Trace) -> asyncio.Future[None]:
        """Encode ``trace`` now and queue it for its commit window; the future is done once it is fsynced.

        Why apart from :meth:`append`: the caller can let go of the trace (its steps,
        observations, response) as soon as it is encoded, while that memory is still
        in the CPU's caches, and wait for the commit holding only what it needs after
        it. Kept alive across the ~100 ms wait, the full traces of a window were freed
        cold: ~7 µs of CPU per model call at 64 in flight (issue 16).
        """
        return self.submit_line(encode_line(trace))


class RunStore:
    """One run directory, opened against the fingerprint of the settings about to run."""

    def __init__(self, run_dir: Path, fingerprint: RunFingerprint) -> None:
        self.run_dir = run_dir
        self.fingerprint = fingerprint
        #: the latest trace per (id, sample): as read from disk, or (for traces recorded by this process)
        #: without ``steps`` and ``response`` (see :meth:`record`); ``traces.jsonl`` holds every trace in full
        self.latest: dict[SampleKey, Trace] = {}
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
            if trace.sample >= self.fingerprint.samples:
                raise IntegrityError(
                    f"{self.traces_path}:{line}: question {trace.id!r} has sample {trace.sample}, but the run has "
                    f"{self.fingerprint.samples} sample(s) per question (run.json samples)",
                    fix="keep the traces of this run only, or write to a new --out directory")
            self.latest[(trace.id, trace.sample)] = trace
        self.rows = len(read.rows)

    def finished_ids(self) -> set[SampleKey]:
        """(id, sample) keys whose latest trace is final: never run again.

        Final includes ``request_rejected`` (the server refused that exact request,
        e.g. context length exceeded): the same request would be refused again.
        """
        return {k for k, t in self.latest.items() if t.outcome not in RETRIED_OUTCOMES}

    def errored_ids(self) -> set[SampleKey]:
        """(id, sample) keys whose latest trace is an endpoint or tool error: retried on resume."""
        return {k for k, t in self.latest.items() if t.outcome in RETRIED_OUTCOMES}

    def next_attempt(self, question_id: str, sample: int = 0) -> int:
        """1 for a new (id, sample), previous attempt + 1 for an errored one."""
        previous = self.latest.get((question_id, sample))
        return 1 if previous is None else previous.attempt + 1

    def writer(self) -> TraceWriter:
        """A durable appender for this run's traces."""
        return TraceWriter(self.traces_path)

    def record(self, trace: Trace) -> None:
        """Note a trace that was just made durable (keeps ``latest`` current).

        What is kept is the trace without its ``steps`` and ``response``
        (:func:`kept_summary`): outcome, error, prediction and attempt are all that
        resuming, the error report and ``predictions.jsonl`` read, and the full trace
        is on disk. Why: the steps of every finished question, kept alive for the
        whole run, were most of what the cyclic GC walked during a run (~12 µs of CPU
        per model call at 64 in flight; ~1 µs without them).
        """
        self.latest[(trace.id, trace.sample)] = kept_summary(trace)

    def export_predictions(self, order: Iterable[str]) -> Path:
        """Write ``predictions.jsonl`` (latest trace per (id, sample), ids in ``order``) atomically."""
        rows: list[Prediction] = []
        for key in sample_keys(order, self.fingerprint.samples):
            trace = self.latest.get(key)
            if trace is not None:
                rows.append(Prediction.trusted(id=trace.id, prediction=trace.prediction, outcome=trace.outcome,
                                               sample=trace.sample))
        path = self.run_dir / PREDICTIONS
        atomic_write_bytes(path, b"".join(map(encode_line, rows)))  # what write_jsonl writes, without model_dump
        return path


def kept_summary(trace: Trace) -> Trace:
    """``trace`` without its ``steps`` and ``response``: what :meth:`RunStore.record` keeps of a finished question."""
    if not trace.steps and not trace.response:
        return trace
    fields = dict(trace.__dict__)  # a trace's own fields: not checked or validated again (Record.adopt)
    fields["steps"], fields["response"] = [], ""
    return Trace.adopt(fields)


def export_predictions(run_dir: str | Path) -> Path:
    """Rewrite ``predictions.jsonl`` of a run from its traces alone (e.g. after a crash).

    Order: first appearance of each (id, sample) in ``traces.jsonl``; a torn last line is ignored (not removed).
    """
    run_dir = Path(run_dir)
    traces = run_dir / TRACES
    read = read_jsonl_tolerant(traces)
    latest: dict[SampleKey, Trace] = {}
    for line, row in enumerate(read.rows, start=1):
        trace = validate_row(traces, line, row, Trace)
        latest[(trace.id, trace.sample)] = trace
    path = run_dir / PREDICTIONS
    write_jsonl(path, [Prediction(id=t.id, prediction=t.prediction, outcome=t.outcome, sample=t.sample)
                       for t in latest.values()])
    return path
