"""Read-only loading of the run directories ``aether view`` serves, with every failure kept as a page.

Why a problem is data here, not an exception: a viewer is opened on runs that
may be half-written (a rollout still going), hand-edited or scored against
another release. One bad run must not stop the others from being browsed, and
the researcher needs the reason and the fix on screen, not a traceback. So
each run loads into a :class:`LoadedRun` that either holds its data or one
:class:`RunProblem` (what, where, the fix), built from the toolkit's own error
messages (``read_scores`` already checks every pinned sha256).

Nothing here writes: scores are read with ``read_scores`` (never rescored),
traces are indexed by byte offset and read one line at a time on demand, so a
viewer over 1,400 questions x 10 runs holds only the per-question rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from aethersearch.diagnostics.factorised import FACTORISED_ROWS_FILE, FactorisedRow, read_factorised_rows
from aethersearch.errors import AetherError, DataError, IntegrityError
from aethersearch.jsonl import loads, sha256_file
from aethersearch.records import DiagnosticsRow, RunFingerprint
from aethersearch.scoring.scores_file import QuestionScore, Scores, read_scores

__all__ = ["LoadedRun", "Release", "RunProblem", "TRACES_FILE", "TraceSummary", "against_release",
    "find_release", "index_traces", "load_run", "run_keys"]

TRACES_FILE = "traces.jsonl"


class RunProblem(NamedTuple):
    """Why a run cannot be shown: the message (naming the file or line) and how to fix it."""

    title: str
    message: str
    fix: str | None


class Release(NamedTuple):
    """The gold a viewer shows beside the traces: aliases and diagnostics rows by id, and the eval file's sha256."""

    path: Path
    eval_sha256: str
    golds: dict[str, list[str]]
    diagnostics: dict[str, DiagnosticsRow]


class LoadedRun(NamedTuple):
    """One run as the viewer holds it; ``problem`` set means only the problem page can be shown."""

    key: str
    path: Path
    label: str
    problem: RunProblem | None
    fingerprint: RunFingerprint | None = None
    scores: Scores | None = None
    questions: dict[str, QuestionScore] = {}
    traces: dict[str, TraceSummary] = {}
    factorised: dict[str, FactorisedRow] = {}

    def read_traces(self, qid: str) -> list[dict[str, Any]]:
        """Every recorded trace line of ``qid`` (attempts and samples), read from disk by offset."""
        summary = self.traces.get(qid)
        offsets = summary.offsets if summary is not None else []
        found = []
        with (self.path / TRACES_FILE).open("rb") as handle:
            for offset in offsets:
                handle.seek(offset)
                found.append(loads(handle.readline()))
        return found


def _problem(title: str, exc: AetherError) -> RunProblem:
    return RunProblem(title, exc.message, exc.fix)


class TraceSummary(NamedTuple):
    """What the question list needs from a question's trace lines, gathered while indexing them."""

    offsets: list[int]
    question_seen: str
    elapsed_s: float
    samples: dict[int, str | None]
    """Prediction of each sample's latest attempt, when the traces carry a ``sample`` field (c of K)."""


def index_traces(path: Path) -> dict[str, TraceSummary]:
    """Each question's trace lines by byte offset, with its list summary; a malformed line is a DataError.

    A torn last line (the runner died mid-append, or is still writing) is named
    as such, so a half-written run reads as one, not as corruption.
    """
    found: dict[str, TraceSummary] = {}
    position = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            start, position = position, position + len(raw)
            if not raw.strip():
                continue
            try:
                row = loads(raw)
            except ValueError as exc:
                torn = not raw.endswith(b"\n")
                raise DataError(path, ("the last line is incomplete (the run is still being written, or its "
                                       "writer died mid-line)" if torn else f"invalid JSON: {exc}"), line=number,
                                fix=("wait for the run to finish, or resume it with the same `aether run` command"
                                     if torn else "each line must be one complete trace object; restore the file "
                                     "or rerun the question")) from None
            if not isinstance(row, dict) or not isinstance(row.get("id"), str):
                raise DataError(path, "a trace line without a string 'id'", line=number,
                                fix="each line must be one trace object as the runner writes it")
            qid = row["id"]
            summary = found.get(qid) or TraceSummary([], "", 0.0, {})
            summary.offsets.append(start)
            if isinstance(row.get("sample"), int):
                summary.samples[row["sample"]] = row.get("prediction")
            elapsed = row.get("elapsed_s")
            found[qid] = summary._replace(question_seen=str(row.get("question_seen") or summary.question_seen),
                                          elapsed_s=float(elapsed) if isinstance(elapsed, int | float) else 0.0)
    return found


def _factorised_rows(run_dir: Path) -> dict[str, FactorisedRow]:
    path = run_dir / FACTORISED_ROWS_FILE
    return {row.id: row for row in read_factorised_rows(path)} if path.is_file() else {}


def load_run(key: str, run_dir: Path, label: str) -> LoadedRun:
    """Load one run for viewing, or its problem (missing, unscored, changed since scoring, malformed)."""
    from aethersearch.scoring.api import read_fingerprint

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return LoadedRun(key, run_dir, label, RunProblem(
            "No such run directory", f"{run_dir} does not exist or is not a directory",
            "pass a directory written by `aether run --out DIR` (or `aether eval --out DIR`)"))
    try:
        fingerprint = read_fingerprint(run_dir)
        traces = run_dir / TRACES_FILE
        if not traces.is_file():
            raise DataError(traces, "the run has no traces yet",
                            fix="wait for `aether run` to write its first question, or check the path")
        offsets = index_traces(traces)
    except AetherError as exc:
        return LoadedRun(key, run_dir, label, _problem("Run files cannot be read", exc))
    try:
        scores = read_scores(run_dir)
    except (DataError, IntegrityError) as exc:
        return LoadedRun(key, run_dir, label, _problem("Run is not scored (or changed since it was scored)", exc),
                         fingerprint=fingerprint)
    try:
        factorised = _factorised_rows(run_dir)
    except AetherError as exc:
        return LoadedRun(key, run_dir, label, _problem("Diagnostics cannot be read", exc), fingerprint=fingerprint)
    return LoadedRun(key, run_dir, label, None, fingerprint, scores,
                     {row.id: row for row in scores.per_question}, offsets, factorised)


def against_release(run: LoadedRun, release: Release | None) -> LoadedRun:
    """``run``, or its problem page when it was scored on another release than the one the viewer shows."""
    if run.scores is None or release is None or run.scores.gold.eval_sha256 == release.eval_sha256:
        return run
    gold = run.scores.gold
    return LoadedRun(run.key, run.path, run.label, RunProblem(
        "Run scored against another release",
        f"{run.path} was scored against {gold.release_dir} (eval sha256 {gold.eval_sha256[:12]}), "
        f"but this viewer shows release {release.path} (eval sha256 {release.eval_sha256[:12]})",
        "view runs of one release together (`aether view` once per release), or rescore the run with "
        f"`aether score {run.path} --release {release.path}` if it was rolled out on that release"),
        fingerprint=run.fingerprint)


def _release_candidates(recorded: str, run_dir: Path) -> list[Path]:
    where = Path(recorded)
    return [where, run_dir.parent / where.name, run_dir.parent.parent / where] if not where.is_absolute() else [where]


def find_release(explicit: Path | None, runs: Sequence[LoadedRun]) -> Release | None:
    """The release to show gold from: ``--release``, else the one the first scored run recorded (None if absent)."""
    from aethersearch.diagnostics.probes import load_diagnostics
    from aethersearch.release_layout import release_layout
    from aethersearch.scoring.join import load_release

    candidates: list[Path] = [Path(explicit)] if explicit is not None else []
    if explicit is None:
        scored = next((run for run in runs if run.scores is not None), None)
        if scored is not None and scored.scores is not None:
            candidates.extend(_release_candidates(scored.scores.gold.release_dir, scored.path))
    for where in candidates:
        try:
            layout = release_layout(where)
            if not layout.eval.is_file():
                continue
        except AetherError:
            continue
        golds = {row.id: list(row.answers) for row in load_release(where)}
        diagnostics = load_diagnostics(where) if layout.diagnostics.is_file() else {}
        return Release(where, sha256_file(layout.eval), golds, diagnostics)
    if explicit is not None:
        raise DataError(explicit, "not a release directory (no eval file)",
                        fix="pass --release the release the runs were scored on")
    return None


def run_keys(run_dirs: Sequence[Path]) -> list[str]:
    """URL keys of the runs: their short unique names, as compare and the report name them."""
    from aethersearch.compare.checkpoints import run_names

    return run_names(run_dirs)
