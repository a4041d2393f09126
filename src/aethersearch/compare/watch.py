"""Training-time evaluation: evaluate each new checkpoint on the frozen split as it appears.

Why: the card's periodic SFT_eval. A training job drops checkpoints into a
directory (``checkpoint-500/``, ``global_step_100/``) or a serving job lists
endpoints in a file; ``watch`` polls, evaluates every checkpoint it has not
evaluated yet with the caller's ``evaluate`` function (``aethersearch.api.evaluate``
from the CLI), appends one durable row per checkpoint to a history JSONL and
re-plots the curve. The history is the state: restart ``watch`` and it carries
on with the checkpoints it has not seen, never re-evaluating one.

Targets:

* a directory: each non-hidden subdirectory is a checkpoint once nothing in it
  has changed for ``settle_s`` seconds (so a half-written checkpoint is not
  evaluated); its step is the trailing number of its name.
* a file: an endpoint list, one checkpoint per line, ``name url [step]`` or just
  ``url``; ``#`` starts a comment. Appending a line adds a checkpoint.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import ValidationError

from aethersearch.compare.loggers import MetricLogger
from aethersearch.errors import AetherError, ConfigError, DataError
from aethersearch.jsonl import (
    DurableAppender,
    atomic_write_text,
    read_jsonl_tolerant,
    truncate_to,
    validation_problem,
)
from aethersearch.records import SparseRecord

__all__ = ["Checkpoint", "Evaluator", "HistoryRow", "WatchResult", "discover", "plot_history", "read_history",
    "read_history_rows", "retry_delay", "watch"]

_STEP = re.compile(r"(\d+)$")


class Checkpoint(NamedTuple):
    """One checkpoint to evaluate: a directory path or a served endpoint URL."""

    name: str
    location: str
    step: int | None
    kind: str


Evaluator = Callable[[Checkpoint], Mapping[str, Any]]


def _step(name: str) -> int | None:
    found = _STEP.search(name)
    return int(found.group(1)) if found else None


def _settled(path: Path, settle_s: float, now: float) -> bool:
    newest = path.stat().st_mtime
    for child in path.rglob("*"):
        try:
            newest = max(newest, child.stat().st_mtime)
        except FileNotFoundError:
            return False
    return now - newest >= settle_s


def _endpoint_list(path: Path) -> list[Checkpoint]:
    found = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) == 1:
            name, url, step = parts[0], parts[0], None
        elif len(parts) in (2, 3):
            name, url = parts[0], parts[1]
            step = _step(name)
            if len(parts) == 3:
                if not parts[2].isdigit():
                    raise DataError(path, f"step {parts[2]!r} is not a whole number", line=number,
                                    fix="write `name url step` with an integer step")
                step = int(parts[2])
        else:
            raise DataError(path, f"expected `name url [step]` or `url`, got {len(parts)} fields", line=number,
                            fix="one checkpoint per line: `name url [step]`")
        if not url.startswith(("http://", "https://")):
            raise DataError(path, f"{url!r} is not an http(s) endpoint URL", line=number,
                            fix="give the OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
        found.append(Checkpoint(name, url, step, "endpoint"))
    return found


def discover(target: Path, *, settle_s: float = 30.0, now: float | None = None) -> list[Checkpoint]:
    """Checkpoints currently available under ``target``, ordered by (step, name)."""
    target = Path(target)
    now = time.time() if now is None else now
    if target.is_dir():
        found = [Checkpoint(child.name, str(child), _step(child.name), "directory")
                 for child in target.iterdir()
                 if child.is_dir() and not child.name.startswith(".") and not child.name.endswith(".tmp")
                 and _settled(child, settle_s, now)]
    elif target.is_file():
        found = _endpoint_list(target)
    else:
        raise ConfigError(f"watch target {target} does not exist",
                          fix="pass a checkpoint directory or a file listing endpoints (`name url [step]`)")
    return sorted(found, key=lambda c: (c.step if c.step is not None else -1, c.name))


#: ``status`` of a history row: a scored checkpoint, or an evaluation that failed (no metrics).
OK, FAILED = "ok", "failed"


class HistoryRow(SparseRecord):
    """One line of a ``watch`` history: a checkpoint's evaluation, or a failed attempt at one.

    A scored row has ``metrics`` (whatever the evaluator returned: figures by name);
    a failed one ``status: failed``, the ``error``, the ``attempt`` and whether it
    ``will_retry``, and no metrics. A row written by hand or by an older version may
    carry only ``checkpoint``, ``location``, ``step`` and ``metrics`` (``status`` then
    reads as ``ok``). Written with the fields it was given.
    """

    checkpoint: str
    location: str | None = None
    kind: str | None = None
    step: int | None = None
    status: Literal["ok", "failed"] = "ok"
    metrics: dict[str, Any] | None = None
    error: str | None = None
    attempt: int | None = None
    will_retry: bool | None = None
    evaluated_at: str | None = None
    elapsed_s: float | None = None

    @property
    def scored(self) -> bool:
        """A point of the curve: evaluated, with metrics."""
        return self.status == OK and self.metrics is not None


def read_history_rows(path: Path) -> list[HistoryRow]:
    """Every row of a history JSONL, failed attempts included, oldest first (a torn last line is ignored; a
    line that is not a history row is a DataError naming it)."""
    read = read_jsonl_tolerant(path)
    rows = []
    for number, row in enumerate(read.rows, start=1):
        try:
            rows.append(HistoryRow.model_validate(row))
        except ValidationError as exc:
            raise DataError(path, f"not a history row: {validation_problem(exc)}", line=number,
                            fix="each line is a row `aether watch` appends (checkpoint, status, metrics or error)"
                            ) from None
    return rows


def read_history(path: Path) -> list[HistoryRow]:
    """The scored rows of a history JSONL, oldest first: what curves and tables may plot.

    A failed evaluation is recorded in the history (``status: failed``, an
    ``error``, no ``metrics``) but is never a point of the curve: plotting it
    as 0 would draw a collapse that did not happen.
    """
    return [row for row in read_history_rows(path) if row.scored]


def plot_history(history: Path, out_path: Path) -> Path:
    """Write the training curve of ``history`` as an SVG file (atomically); failed checkpoints are not points."""
    from aethersearch.report.charts import training_curve

    rows = read_history(history)
    keys = sorted({k for row in rows for k, v in (row.metrics or {}).items() if isinstance(v, int | float)})
    atomic_write_text(out_path, training_curve(rows, keys))
    return out_path


class WatchResult(NamedTuple):
    """What one ``watch`` call did: rows appended this call, checkpoints that failed, polls made."""

    evaluated: list[HistoryRow]
    failed: list[HistoryRow]
    polls: int


class _Retry(NamedTuple):
    attempts: int
    not_before: float


def retry_delay(attempts: int, base_s: float, cap_s: float) -> float:
    """Seconds to wait before evaluating a checkpoint again after ``attempts`` failures (doubling, capped)."""
    return min(cap_s, base_s * 2.0 ** max(0, attempts - 1))


def watch(target: Path, evaluate: Evaluator, *, history: Path, plot: Path | None = None,
          poll_s: float = 60.0, settle_s: float = 30.0, max_polls: int | None = None,
          stop_after: int | None = None, sleep: Callable[[float], None] = time.sleep,
          retry_base_s: float = 60.0, retry_cap_s: float = 3600.0, max_attempts: int = 5,
          clock: Callable[[], float] = time.monotonic, loggers: Sequence[MetricLogger] = ()) -> WatchResult:
    """Poll ``target`` and evaluate each checkpoint not yet in ``history``, appending one row each.

    ``max_polls=1`` evaluates what is there now and returns (``--once``);
    ``stop_after`` returns after that many new evaluations. A checkpoint whose
    evaluation raises a toolkit error (an unreachable server, a run refused
    for its errors: :class:`~aethersearch.errors.RunFailed`) is appended to the
    history as ``status: failed`` with the message and no metrics — never as a
    score — and retried with backoff (``retry_base_s`` doubling up to
    ``retry_cap_s``) until it has failed ``max_attempts`` times in all, counted
    across restarts from the history. One bad checkpoint never stops the watcher.
    """
    history = Path(history)
    existing = read_jsonl_tolerant(history)
    if existing.torn_tail is not None:
        truncate_to(history, existing.valid_bytes)  # a crash mid-append: drop the torn row, keep the rest
    # A checkpoint is (name, location): one server may serve several models at one URL
    # (``sft http://h/v1`` and ``rl http://h/v1``), each its own checkpoint.
    rows = read_history_rows(history)
    done = {(row.checkpoint, row.location) for row in rows if row.status == OK}
    retries: dict[tuple[str, str], _Retry] = {}
    for row in rows:  # a restart retries at once, but remembers how often each checkpoint failed
        key = (row.checkpoint, str(row.location))
        if row.status == FAILED and key not in done:
            retries[key] = _Retry(retries.get(key, _Retry(0, 0.0)).attempts + 1, 0.0)
    evaluated: list[HistoryRow] = []
    failed: list[HistoryRow] = []
    polls = 0
    while True:
        polls += 1
        for checkpoint in discover(target, settle_s=settle_s):
            key = (checkpoint.name, checkpoint.location)
            retry = retries.get(key)
            if key in done or (retry is not None and (retry.attempts >= max_attempts or clock() < retry.not_before)):
                continue
            started = time.monotonic()
            where = HistoryRow(checkpoint=checkpoint.name, location=checkpoint.location, kind=checkpoint.kind,
                               step=checkpoint.step)
            try:
                metrics = dict(evaluate(checkpoint))
            except AetherError as exc:
                attempts = (retry.attempts if retry else 0) + 1
                retries[key] = _Retry(attempts, clock() + retry_delay(attempts, retry_base_s, retry_cap_s))
                row = where.model_copy(update={
                    "status": FAILED, "error": str(exc), "attempt": attempts, "will_retry": attempts < max_attempts,
                    "evaluated_at": datetime.now(UTC).isoformat(timespec="seconds"),
                    "elapsed_s": round(time.monotonic() - started, 3)})
                with DurableAppender(history) as appender:
                    appender.append(row.line())
                failed.append(row)
                continue
            row = where.model_copy(update={
                "status": OK, "metrics": metrics, "evaluated_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "elapsed_s": round(time.monotonic() - started, 3)})
            with DurableAppender(history) as appender:
                appender.append(row.line())
            done.add(key)
            retries.pop(key, None)
            evaluated.append(row)
            for logger in loggers:  # after the durable append: the history stays the record
                logger.log(metrics, checkpoint.step)
            if plot is not None:
                plot_history(history, plot)
            if stop_after is not None and len(evaluated) >= stop_after:
                return WatchResult(evaluated, failed, polls)
        if max_polls is not None and polls >= max_polls:
            return WatchResult(evaluated, failed, polls)
        pending = [r.not_before for k, r in retries.items() if k not in done and r.attempts < max_attempts]
        wait = poll_s if not pending else max(0.0, min(poll_s, min(pending) - clock()))
        sleep(wait)
