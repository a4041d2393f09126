"""Join a run's predictions to the release's gold by question id.

Why: a score is only honest when its denominator is the whole release. A
question the run never answered (crash, filter, forgotten resume) counts as a
scored zero and is listed as ``missing``; a prediction for an id the release
does not contain is listed as ``unknown`` and not scored; the same id twice is
listed as a ``duplicate`` when both rows agree and is an error when they
disagree, because then there is no single answer to score. Rows of the same id
with *different* ``attempt`` numbers are the runner's retries of an errored
question: the highest attempt is the answer, and the id is listed as ``retried``.

A run of K samples per question (``run.json`` ``samples``) is joined by
(id, sample): the result has K rows per release question, sample order, and a
missing or duplicated sample is named ``id#k`` (``rollout/samples.py``).

This module and ``api.py`` are the only readers of gold (``eval.jsonl``).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from aethersearch.errors import ConfigError, DataError
from aethersearch.jsonl import iter_jsonl, read_records, validate_row
from aethersearch.records import EvalRow, Outcome, Prediction, Trace, Usage
from aethersearch.release_layout import release_layout
from aethersearch.rollout.samples import unit_label
from aethersearch.scoring.aethersearch_compat import EpisodeActions, trace_actions
from aethersearch.scoring.extract import (
    Extraction,
    check_compat,
    resolve_prediction,
    resolve_trace,
    settle,
)

__all__ = ["EVAL_FILE", "JoinResult", "JoinedRow", "MISSING", "PREDICTIONS_FILE", "RunEntry", "RunFile",
    "TRACES_FILE", "has_actions", "join", "load_release", "load_run", "recorded_usage", "run_samples"]

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
    sample: int = 0


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
    sample: int = 0
    """Which of the run's K samples of the question this row is."""
    confidence: float | None = None
    """The stated confidence (stated-confidence runs; ``scoring.extract.with_stated_confidence``)."""
    confidence_status: str | None = None
    """How it was read (``aethersearch.stated_confidence.STATUSES``); None when the prompt asked for none."""


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


def has_actions(trace: Trace) -> bool:
    """Whether a trace keeps its model actions one by one (steps with model calls), or has none to keep.

    An imported response that could not be cut into actions has a response and no
    step; an episode that failed before its first model call has neither.
    """
    return any(step.llm is not None for step in trace.steps) or not trace.response.strip()


def recorded_usage(trace: Trace) -> Usage | None:
    """The trace's usage, or None when it was never recorded: model calls were made but none was counted.

    An imported episode (a verl dump, AetherSearch's predictions) carries no token or
    call counts; scoring its zeros would report an episode that cost nothing.
    """
    usage = trace.usage
    counted = usage.turns or usage.prompt_tokens or usage.completion_tokens or usage.tool_calls
    called = any(step.llm is not None for step in trace.steps) or bool(trace.response.strip())
    return None if called and not counted else usage


def load_run(run_dir: Path, *, compat: str | None = None, stated_confidence: bool = False) -> RunFile:
    """Read a run's traces (preferred: raw responses can be re-extracted) or its predictions.

    ``stated_confidence`` (the run's prompt asked for one) reads it off each answer; a
    ``predictions.jsonl`` run has only the agent's answers, so its confidences are missing.
    """
    check_compat(compat)
    run_dir = Path(run_dir)
    traces = run_dir / TRACES_FILE
    predictions = run_dir / PREDICTIONS_FILE
    if traces.is_file():
        entries = []
        unsplit: list[str] = []
        for number, value in iter_jsonl(traces):
            trace = validate_row(traces, number, value, Trace)
            if compat == "aethersearch" and not has_actions(trace):
                unsplit.append(f"{unit_label((trace.id, trace.sample))} (line {number})")
            entries.append(RunEntry(number, trace.id, resolve_trace(trace, compat=compat, stated_confidence=stated_confidence), recorded_usage(trace),
                                    trace.attempt, trace.stop_reason,
                                    trace_actions(trace) if compat == "aethersearch" else None, trace.sample))
        if unsplit:
            raise ConfigError(
                f"--compat aethersearch scores each model action, but {len(unsplit)} episode(s) of {traces} keep "
                f"only their whole response, not where one action ends (first: {', '.join(unsplit[:3])}); "
                "their R_task cannot be computed from them",
                fix="for a verl dump, decode with special tokens kept and import with `aether import verl "
                    "--eos-text TEXT` (import.json lists why each response could not be cut); or import "
                    "AetherSearch's predictions.jsonl with `aether import aethersearch`; or score without --compat")
        return RunFile(traces, "traces", entries)
    if compat is not None:
        raise ConfigError(f"--compat {compat} needs raw responses but {run_dir} has no {TRACES_FILE}",
                          fix="score without --compat, or point at a run directory that kept its traces")
    if predictions.is_file():
        entries = []
        for number, value in iter_jsonl(predictions):
            row = validate_row(predictions, number, value, Prediction)
            extraction = resolve_prediction(row.prediction, row.outcome)
            if stated_confidence:
                extraction = extraction._replace(confidence_status="missing")
            entries.append(RunEntry(number, row.id, extraction, None, sample=row.sample))
        return RunFile(predictions, "predictions", entries)
    raise DataError(run_dir, f"run directory has neither {TRACES_FILE} nor {PREDICTIONS_FILE}",
                    fix="pass the directory the runner wrote (it holds run.json and traces.jsonl)")


def run_samples(run: RunFile, declared: int | None) -> int:
    """K of a run: ``run.json``'s ``samples``, else (a hand-written predictions file) 1 + the highest sample."""
    highest = max((entry.sample for entry in run.entries), default=0)
    if declared is None:
        return highest + 1
    if highest >= declared:
        line = next(entry.line for entry in run.entries if entry.sample == highest)
        raise DataError(run.path, f"sample {highest} but run.json says {declared} sample(s) per question",
                        line=line, field="sample",
                        fix="score the run directory the runner wrote (its run.json and traces belong together)")
    return declared


def join(release: list[EvalRow], run: RunFile, samples: int = 1) -> JoinResult:
    """Match run rows to release rows by (id, sample); the result always has K rows per release question."""
    gold_ids = {row.id for row in release}
    chosen: dict[tuple[str, int], RunEntry] = {}
    duplicates: list[str] = []
    unknown: list[str] = []
    retried: set[str] = set()
    for entry in run.entries:
        if entry.id not in gold_ids:
            if entry.id not in unknown:
                unknown.append(entry.id)
            continue
        key = (entry.id, entry.sample)
        first = chosen.get(key)
        if first is None:
            chosen[key] = entry
            continue
        if entry.attempt != first.attempt:
            retried.add(unit_label(key))
            if entry.attempt > first.attempt:
                chosen[key] = entry
            continue
        if first.extraction[:2] != entry.extraction[:2]:
            raise DataError(
                run.path,
                f"question {entry.id!r} has conflicting rows: line {first.line} scores "
                f"{first.extraction.prediction!r} ({first.extraction.outcome}) but line {entry.line} scores "
                f"{entry.extraction.prediction!r} ({entry.extraction.outcome})",
                line=entry.line, field="id",
                fix="keep one row per question id (delete the stale one, or re-run that question)")
        if unit_label(key) not in duplicates:
            duplicates.append(unit_label(key))
    rows: list[JoinedRow] = []
    missing: list[str] = []
    for gold in release:
        for sample in range(samples):
            found = chosen.get((gold.id, sample))
            if found is None:
                missing.append(unit_label((gold.id, sample)))
                rows.append(JoinedRow(gold.id, gold.source_dataset, gold.question, list(gold.answers),
                                      None, MISSING, False, None, None, None, sample))
            else:
                settled = settle(found.extraction, gold.answers)  # gold wins over a refusal-shaped answer
                rows.append(JoinedRow(gold.id, gold.source_dataset, gold.question, list(gold.answers),
                                      settled.prediction, Outcome(settled.outcome).value, True, found.usage,
                                      found.stop_reason, found.actions, sample, settled.confidence,
                                      settled.confidence_status))
    return JoinResult(rows, missing, sorted(duplicates), sorted(unknown), str(run.path), sorted(retried))
