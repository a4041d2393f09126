"""Join a run's predictions to the release's gold by question id.

Why: a score is only honest when its denominator is the whole release. A
question the run never answered (crash, filter, forgotten resume) counts as a
scored zero and is listed as ``missing``; a prediction for an id the release
does not contain is listed as ``unknown`` and not scored; the same id twice is
listed as a ``duplicate`` when both rows agree and is an error when they
disagree, because then there is no single answer to score. Rows of the same id
with *different* ``attempt`` numbers are the runner's retries of an errored
question: the highest attempt is the answer, and the id is listed as ``retried``.

This module and ``api.py`` are the only readers of gold (``eval.jsonl``).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from aethersearch.errors import ConfigError, DataError
from aethersearch.jsonl import iter_jsonl, read_records, validate_row
from aethersearch.records import EvalRow, Outcome, Prediction, Trace, Usage
from aethersearch.release_layout import release_layout
from aethersearch.scoring.aethersearch_compat import EpisodeActions, trace_actions
from aethersearch.scoring.extract import (
    Extraction,
    check_compat,
    resolve_prediction,
    resolve_trace,
    settle,
)

TRACES_FILE = "traces.jsonl"
PREDICTIONS_FILE = "predictions.jsonl"
EVAL_FILE = "eval.jsonl"


class RunEntry(NamedTuple):
    """One row of a run file, already resolved to the prediction the scorer will score."""

    line: int
    id: str
    extraction: Extraction
    usage: Usage | None
    attempt: int = 1
    stop_reason: str | None = None
    actions: EpisodeActions | None = None
    """``--compat aethersearch``: what their scorer reads of the episode (``aethersearch_compat``)."""


class RunFile(NamedTuple):
    """A run's scored rows and the file they came from (``traces.jsonl`` or ``predictions.jsonl``)."""

    path: Path
    kind: str
    entries: list[RunEntry]


class JoinedRow(NamedTuple):
    """One release question with what the run produced for it (``present`` False when missing)."""

    id: str
    source: str
    question: str
    golds: list[str]
    prediction: str | None
    outcome: str
    present: bool
    usage: Usage | None
    stop_reason: str | None = None
    """Why the episode ended (``trace.stop_reason``); None for missing rows and ``predictions.jsonl`` runs."""
    actions: EpisodeActions | None = None
    """``--compat aethersearch``: the episode's action texts, executed queries and system validity."""


class JoinResult(NamedTuple):
    """Every release question in release order, plus the id problems found on the way."""

    rows: list[JoinedRow]
    missing: list[str]
    duplicates: list[str]
    unknown: list[str]
    run_file: str
    retried: list[str]


MISSING = "missing"
"""The outcome label of a release question the run has no row for (scored 0, counted)."""


def load_release(release_dir: Path) -> list[EvalRow]:
    """The release's gold rows; duplicate ids in the release itself are an error."""
    path = release_layout(release_dir).eval  # the release's gold file, named by its manifest
    if not path.is_file():
        raise DataError(path, f"release has no {path.name}",
                        fix="pass --release the release directory (the one holding the manifest and eval file)")
    rows = read_records(path, EvalRow)
    seen: dict[str, int] = {}
    for number, row in enumerate(rows, start=1):
        if row.id in seen:
            raise DataError(path, f"question id {row.id!r} appears twice (rows {seen[row.id]} and {number})",
                            line=number, field="id", fix="rebuild the release; ids must be unique")
        seen[row.id] = number
    if not rows:
        raise DataError(path, "release has no questions", fix="rebuild the release")
    return rows


def load_run(run_dir: Path, *, compat: str | None = None) -> RunFile:
    """Read a run's traces (preferred: raw responses can be re-extracted) or its predictions."""
    check_compat(compat)
    run_dir = Path(run_dir)
    traces = run_dir / TRACES_FILE
    predictions = run_dir / PREDICTIONS_FILE
    if traces.is_file():
        entries = []
        for number, value in iter_jsonl(traces):
            trace = validate_row(traces, number, value, Trace)
            entries.append(RunEntry(number, trace.id, resolve_trace(trace, compat=compat), trace.usage,
                                    trace.attempt, trace.stop_reason,
                                    trace_actions(trace) if compat == "aethersearch" else None))
        return RunFile(traces, "traces", entries)
    if compat is not None:
        raise ConfigError(f"--compat {compat} needs raw responses but {run_dir} has no {TRACES_FILE}",
                          fix="score without --compat, or point at a run directory that kept its traces")
    if predictions.is_file():
        entries = []
        for number, value in iter_jsonl(predictions):
            row = validate_row(predictions, number, value, Prediction)
            entries.append(RunEntry(number, row.id, resolve_prediction(row.prediction, row.outcome), None))
        return RunFile(predictions, "predictions", entries)
    raise DataError(run_dir, f"run directory has neither {TRACES_FILE} nor {PREDICTIONS_FILE}",
                    fix="pass the directory the runner wrote (it holds run.json and traces.jsonl)")


def join(release: list[EvalRow], run: RunFile) -> JoinResult:
    """Match run rows to release rows by id; the result always has one row per release question."""
    gold_ids = {row.id for row in release}
    chosen: dict[str, RunEntry] = {}
    duplicates: list[str] = []
    unknown: list[str] = []
    retried: set[str] = set()
    for entry in run.entries:
        if entry.id not in gold_ids:
            if entry.id not in unknown:
                unknown.append(entry.id)
            continue
        first = chosen.get(entry.id)
        if first is None:
            chosen[entry.id] = entry
            continue
        if entry.attempt != first.attempt:
            retried.add(entry.id)
            if entry.attempt > first.attempt:
                chosen[entry.id] = entry
            continue
        if first.extraction[:2] != entry.extraction[:2]:
            raise DataError(
                run.path,
                f"question {entry.id!r} has conflicting rows: line {first.line} scores "
                f"{first.extraction.prediction!r} ({first.extraction.outcome}) but line {entry.line} scores "
                f"{entry.extraction.prediction!r} ({entry.extraction.outcome})",
                line=entry.line, field="id",
                fix="keep one row per question id (delete the stale one, or re-run that question)")
        if entry.id not in duplicates:
            duplicates.append(entry.id)
    rows: list[JoinedRow] = []
    missing: list[str] = []
    for gold in release:
        found = chosen.get(gold.id)
        if found is None:
            missing.append(gold.id)
            rows.append(JoinedRow(gold.id, gold.source_dataset, gold.question, list(gold.answers),
                                  None, MISSING, False, None))
        else:
            settled = settle(found.extraction, gold.answers)  # gold wins over a refusal-shaped answer
            rows.append(JoinedRow(gold.id, gold.source_dataset, gold.question, list(gold.answers),
                                  settled.prediction, Outcome(settled.outcome).value, True, found.usage,
                                  found.stop_reason, found.actions))
    return JoinResult(rows, missing, sorted(duplicates), sorted(unknown), str(run.path), sorted(retried))
