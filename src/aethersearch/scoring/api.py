"""``score_run``: a run directory + a release -> ``scores.json``, without ever touching the agent.

Why a separate stage: scoring reads only files (``run.json``, ``traces.jsonl`` or
``predictions.jsonl``, and the release's ``eval.jsonl``), so a run can be
rescored with a new metric, a compatibility rule or a judge at no model cost,
and the agent side of the pipeline never sees gold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aethersearch import __version__
from aethersearch.errors import DataError, IntegrityError
from aethersearch.jsonl import (
    atomic_write_bytes,
    atomic_write_json,
    encode_jsonl,
    iter_jsonl,
    loads,
    sha256_bytes,
    sha256_file,
    validate_row,
)
from aethersearch.records import SCHEMA_VERSION, Outcome, RunFingerprint
from aethersearch.release_layout import release_layout
from aethersearch.scoring.aggregate import DEFAULT_RESAMPLES, DEFAULT_SEED, aggregate
from aethersearch.scoring.extract import check_compat
from aethersearch.scoring.join import JoinedRow, join, load_release, load_run
from aethersearch.scoring.judge import (
    PROMPT_HASH,
    JudgeCase,
    JudgeConfig,
    disagreement_table,
    judge_cases,
)
from aethersearch.scoring.metrics import METRICS, score_all

SCORES_FILE = "scores.json"
QUESTIONS_FILE = "scores_questions.jsonl"
RUN_FILE = "run.json"
JUDGE_METRIC = "judge"
SEARCHR1_KEY = "val/test_score/{source}"


def read_fingerprint(run_dir: Path) -> RunFingerprint | None:
    """The run's ``run.json`` settings fingerprint, or None when the run has none (hand-written predictions)."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        return None
    try:
        value = loads(path.read_bytes())
    except ValueError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix="restore run.json from the runner") from None
    return validate_row(path, 1, value, RunFingerprint)


def _check_release(fingerprint: RunFingerprint | None, release_dir: Path, size: int) -> None:
    if fingerprint is None:
        return
    if fingerprint.question_count != size:
        raise IntegrityError(
            f"run was made for {fingerprint.question_count} questions (release {fingerprint.release_id!r}) "
            f"but {release_layout(release_dir).eval} has {size}",
            fix="score the run against the release it was rolled out on")
    manifest = release_layout(release_dir).manifest
    if manifest.is_file():
        try:
            release_id = loads(manifest.read_bytes()).get("release_id")
        except (ValueError, AttributeError):
            release_id = None
        if release_id is not None and release_id != fingerprint.release_id:
            raise IntegrityError(
                f"run.json says release {fingerprint.release_id!r} but {manifest} is release {release_id!r}",
                fix="score the run against the release it was rolled out on")


def score_row(row: JoinedRow, *, compat: str | None) -> dict[str, float]:
    """Metric values of one joined question: only an ``answered`` prediction can score (compat: any string)."""
    scorable = row.prediction is not None and (compat is not None or row.outcome == Outcome.ANSWERED.value)
    if not scorable:
        return dict.fromkeys(METRICS, 0.0)
    return score_all(row.prediction, row.golds)


def per_question_rows(rows: list[JoinedRow], *, compat: str | None) -> list[dict[str, Any]]:
    """One scored dict per release question (release order): what compare and report read back."""
    out = []
    for row in rows:
        entry: dict[str, Any] = {"id": row.id, "source": row.source, "outcome": row.outcome,
                                 "stop_reason": row.stop_reason, "present": row.present,
                                 "prediction": row.prediction}
        entry.update(score_row(row, compat=compat))
        entry["usage"] = row.usage.model_dump() if row.usage is not None else None
        out.append(entry)
    return out


def _apply_judge(rows: list[JoinedRow], scored: list[dict[str, Any]], config: JudgeConfig,
                 run_dir: Path) -> dict[str, Any]:
    if config.cache_path is None:
        config = config.model_copy(update={"cache_path": Path(run_dir) / "judge_cache.jsonl"})
    cases = [JudgeCase(r.id, r.question, r.golds, r.prediction) for r in rows
             if r.prediction is not None and r.outcome == Outcome.ANSWERED.value]
    verdicts = judge_cases(cases, config)
    for entry in scored:
        verdict = verdicts.get(entry["id"])
        entry["judge_verdict"] = verdict.verdict if verdict is not None else "not_attempted"
        entry[JUDGE_METRIC] = 1.0 if entry["judge_verdict"] == "correct" else 0.0
    errors = {qid: v.error for qid, v in verdicts.items() if v.error}
    return {
        "model": config.model, "base_url": config.base_url, "prompt_sha256": PROMPT_HASH,
        "temperature": 0, "judged": len(cases), "cached": sum(v.cached for v in verdicts.values()),
        "errors": errors,
        "disagreement": disagreement_table({e["id"]: e["em"] for e in scored if e["id"] in verdicts}, verdicts),
    }


def searchr1_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """Search-R1's validation keys: ``val/test_score/{source}`` = mean EM of that source."""
    return {SEARCHR1_KEY.format(source=source): float(entry["metrics"]["em"]["mean"])
            for source, entry in summary["by_source"].items()}


def score_run(run_dir: Path, release_dir: Path, *, compat: str | None = None,
              judge: JudgeConfig | None = None, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Score a finished (or partial) run against its release and write ``<run_dir>/scores.json`` atomically.

    The denominator is the release's question count: missing questions score 0
    and are listed. Returns the same dict that was written.
    """
    check_compat(compat)
    run_dir, release_dir = Path(run_dir), Path(release_dir)
    release = load_release(release_dir)
    fingerprint = read_fingerprint(run_dir)
    _check_release(fingerprint, release_dir, len(release))
    run = load_run(run_dir, compat=compat)
    joined = join(release, run)
    scored = per_question_rows(joined.rows, compat=compat)
    metrics = list(METRICS)
    judge_summary = None
    if judge is not None:
        judge_summary = _apply_judge(joined.rows, scored, judge, run_dir)
        metrics.append(JUDGE_METRIC)
    summary = aggregate(scored, metrics, resamples=resamples, seed=seed)
    result: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "software_version": __version__,
        "run_dir": str(run_dir),
        "run_file": joined.run_file,
        "release_dir": str(release_dir),
        "release_eval_sha256": sha256_file(release_layout(release_dir).eval),
        "fingerprint": fingerprint.model_dump(mode="json") if fingerprint is not None else None,
        "compat": compat,
        "question_count": len(release),
        "denominator": len(release),
        "metrics": metrics,
        "join": {
            "answered_rows": len(release) - len(joined.missing),
            "missing": joined.missing,
            "duplicates": joined.duplicates,
            "unknown": joined.unknown,
            "retried": joined.retried,
        },
        **summary,
        "searchr1": searchr1_metrics(summary),
        "judge": judge_summary,
    }
    # Per-question rows go to their own compact JSONL (a 1M-question run would
    # make an unreadable scores.json); scores.json pins it by sha256 and is
    # written second, so a reader never pairs a summary with other rows.
    questions = encode_jsonl(scored)
    atomic_write_bytes(run_dir / QUESTIONS_FILE, questions)
    result["per_question_file"] = {"path": QUESTIONS_FILE, "sha256": sha256_bytes(questions), "rows": len(scored)}
    atomic_write_json(run_dir / SCORES_FILE, result)
    return {**result, "per_question": scored}


def read_scores(run_dir: Path) -> dict[str, Any]:
    """A run's ``scores.json`` with its per-question rows attached (``per_question``), checked by sha256."""
    path = Path(run_dir) / SCORES_FILE
    if not path.is_file():
        raise DataError(path, "run has not been scored",
                        fix=f"run `aether score {run_dir} --release <release dir>` first")
    try:
        scores: dict[str, Any] = loads(path.read_bytes())
    except ValueError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix="re-run `aether score`") from None
    pinned = scores.get("per_question_file") or {}
    questions = Path(run_dir) / str(pinned.get("path", QUESTIONS_FILE))
    if not questions.is_file() or sha256_file(questions) != pinned.get("sha256"):
        raise IntegrityError(f"{questions} is missing or does not match the sha256 pinned in {path}",
                             fix=f"re-run `aether score {run_dir} --release <release dir>`")
    scores["per_question"] = [row for _, row in iter_jsonl(questions)]
    return scores
