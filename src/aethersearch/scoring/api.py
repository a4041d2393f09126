"""``score_run``: a run directory + a release -> ``scores.json``, without ever touching the agent.

Why a separate stage: scoring reads only files (``run.json``, ``traces.jsonl`` or
``predictions.jsonl``, and the release's ``eval.jsonl``), so a run can be
rescored with a new metric, a compatibility rule or a judge at no model cost,
and the agent side of the pipeline never sees gold.

Every score is bound to its gold (``binding.py``: checksums, the manifest and
the eval sha256 pinned in ``run.json``) and says how many of its questions
ended in errors; ``strict=True`` refuses a run with any error or missing row.

Metrics: ``em``/``subem`` are Search-R1's ``qa_em`` on the extracted answer,
whatever its outcome (an "I don't know" against gold "No" gets sub-EM 1, as in
Search-R1). The other published metrics (``squad_em``, ``f1``, ``cover_em``,
``popqa_acc``) are computed the same way. Each lenient one also has an
abstention-aware twin, ``<metric>_answered``, where an abstention scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aethersearch import __version__
from aethersearch.abstention import ABSTENTION_RULE
from aethersearch.errors import AetherError, ConfigError, DataError, IntegrityError, JudgeErrors
from aethersearch.jsonl import (
    atomic_write_bytes,
    atomic_write_json,
    encode_jsonl,
    loads,
    sha256_bytes,
    validate_row,
)
from aethersearch.records import ERROR_OUTCOMES, Outcome, RunFingerprint, Usage
from aethersearch.release_layout import release_layout
from aethersearch.scoring.aethersearch_compat import (
    AETHERSEARCH_METRICS,
    EpisodeScore,
    aethersearch_summary,
    episode_score,
)
from aethersearch.scoring.aggregate import DEFAULT_RESAMPLES, DEFAULT_SEED, QuestionReductions, aggregate
from aethersearch.scoring.binding import bind_gold
from aethersearch.scoring.budget_curve import budget_curve as budget_curve_section
from aethersearch.scoring.costs import run_cost
from aethersearch.scoring.extract import check_compat, check_compat_agent
from aethersearch.scoring.join import MISSING, JoinedRow, join, load_release, load_run, run_samples
from aethersearch.scoring.judge import JudgeConfig
from aethersearch.scoring.judges import (
    agreement,
    apply_to_questions,
    check_not_self,
    is_judge_metric,
    judge_rows,
    judge_summaries,
    reducible,
)
from aethersearch.scoring.metrics import ABSTENTION_AWARE, ALL_METRICS, BINARY_METRICS, score_all
from aethersearch.scoring.reducers import question_summary, reducer_names
from aethersearch.scoring.run_confidence import run_risk_coverage
from aethersearch.scoring.scores_file import (
    QUESTIONS_FILE,
    SCORES_FILE,
    QuestionScore,
    SampleScore,
    Scores,
    read_scores,
)
from aethersearch.stated_confidence import elicits_confidence

__all__ = ["QUESTIONS_FILE", "SCORES_FILE", "ScoreRefused", "Scores", "per_question_rows", "read_fingerprint",
    "read_scores", "score_row", "score_run", "searchr1_metrics"]

RUN_FILE = "run.json"
SEARCHR1_KEY = "val/test_score/{source}"
_ERROR_VALUES = frozenset(o.value for o in ERROR_OUTCOMES)


class ScoreRefused(AetherError):
    """``strict`` scoring of a run with errors or missing questions (its figures would count them as wrong)."""

    exit_code = 3

    def __init__(self, message: str, *, errors: dict[str, int], missing: int, fix: str | None = None) -> None:
        self.errors = dict(errors)
        self.missing = missing
        super().__init__(message, fix=fix)


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


def _check_size(fingerprint: RunFingerprint | None, release_dir: Path, size: int) -> None:
    if fingerprint is not None and fingerprint.question_count != size:
        raise IntegrityError(
            f"run was made for {fingerprint.question_count} questions (release {fingerprint.release_id!r}) "
            f"but {release_layout(release_dir).eval} has {size}",
            fix="score the run against the release it was rolled out on")


def score_row(row: JoinedRow, *, compat: str | None) -> dict[str, float]:
    """Metric values of one joined question.

    The published metrics score the extracted answer whatever its outcome (as
    Search-R1's ``qa_em`` does); ``<metric>_answered`` scores only ``answered``
    outcomes, so an abstention is 0 there. No extracted answer scores 0.
    """
    if row.prediction is None:
        values = dict.fromkeys(ALL_METRICS, 0.0)
    else:
        values = score_all(row.prediction, row.golds)
        answered = row.outcome == Outcome.ANSWERED.value
        for aware, base in ABSTENTION_AWARE.items():
            values[aware] = values[base] if answered else 0.0
    if compat == "aethersearch":
        theirs = aethersearch_row(row)
        values.update(aethersearch_f1=theirs.r_task, aethersearch_exact=float(theirs.exact),
                      aethersearch_format=float(theirs.format_indicator))
    return values


def aethersearch_row(row: JoinedRow) -> EpisodeScore:
    """AetherSearch's R_task, exact and F_ans of one joined question (a missing question has no actions)."""
    if row.actions is None:
        return episode_score((), row.golds, source=row.source)
    return episode_score(row.actions.actions, row.golds, source=row.source, system_valid=row.actions.system_valid,
                         queries=row.actions.queries)


def _summed_usage(rows: list[JoinedRow]) -> Usage | None:
    used = [row.usage for row in rows if row.usage is not None]
    if not used:
        return None
    return Usage(**{field: sum(getattr(u, field) for u in used) for field in Usage.model_fields})


def per_question_rows(rows: list[JoinedRow], values: list[dict[str, float]], *,
                      samples: int = 1) -> list[QuestionScore]:
    """One scored row per release question (release order): what compare and report read back.

    ``rows`` are the join's K rows per question (sample order) and ``values`` their
    metric values; K > 1 folds each question's samples into one row (means, c of K,
    the majority vote: ``reducers.py``). Built with ``model_construct``: every field
    is already typed here (the join validated the run's rows), and re-validating a
    million rows is a third of the stage's cost; :func:`read_scores` validates every
    row it reads back.
    """
    out: list[QuestionScore] = []
    for start in range(0, len(rows), samples):
        group, scored = rows[start:start + samples], values[start:start + samples]
        means, correct, majority, chosen = question_summary(scored, [r.prediction for r in group],
                                                            list(scored[0]), BINARY_METRICS)
        lead = group[chosen]
        kept = [] if samples == 1 else [
            SampleScore.model_construct(sample=r.sample, outcome=r.outcome, stop_reason=r.stop_reason,
                                        present=r.present, prediction=r.prediction, values=v)
            for r, v in zip(group, scored, strict=True)]
        out.append(QuestionScore.model_construct(
            id=lead.id, source=lead.source, outcome=lead.outcome, stop_reason=lead.stop_reason,
            present=all(r.present for r in group), prediction=lead.prediction, values=means,
            usage=lead.usage if samples == 1 else _summed_usage(group), judge_verdict=None, correct=correct,
            majority=majority, majority_sample=chosen, samples=kept, stated_confidence=lead.confidence,
            confidence_status=lead.confidence_status))
    return out


def question_reductions(scored: list[QuestionScore], metrics: list[str], samples: int) -> QuestionReductions:
    """Per question id: metric -> ``mean@K``, ``pass@1..K`` (0/1 metrics) and ``maj@K`` values."""
    names = {metric: reducer_names(samples, metric in BINARY_METRICS or is_judge_metric(metric)) for metric in metrics}
    return {q.id: {metric: {name: q.reduced(metric, name) for name in names[metric]} for metric in metrics}
            for q in scored}


def searchr1_metrics(scores: Scores) -> dict[str, float | None]:
    """Search-R1's validation keys: ``val/test_score/{source}`` = mean EM of that source."""
    return {SEARCHR1_KEY.format(source=source): entry.metrics["em"].mean
            for source, entry in scores.by_source.items()}


def _error_counts(rows: list[JoinedRow]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        if row.outcome in _ERROR_VALUES:
            counts[row.outcome] = counts.get(row.outcome, 0) + 1
    return dict(sorted(counts.items()))


def _refuse_if_strict(rows: list[JoinedRow], run_dir: Path) -> None:
    errors = _error_counts(rows)
    missing = sum(1 for row in rows if row.outcome == MISSING)
    if not errors and not missing:
        return
    parts = [f"{count} {outcome}" for outcome, count in errors.items()]
    if missing:
        parts.append(f"{missing} missing (no row in the run)")
    raise ScoreRefused(
        f"--strict: {run_dir} has {sum(errors.values()) + missing} of {len(rows)} questions without an answer "
        f"attempt ({', '.join(parts)}); their zeros would be counted as wrong answers",
        errors=errors, missing=missing,
        fix=f"rerun the same `aether run` command on {run_dir} to retry errored and missing questions, "
            "then score again (or score without --strict to see figures with the error counts beside them)")


def score_run(run_dir: Path, release_dir: Path, *, compat: str | None = None,
              judge: JudgeConfig | None = None, resamples: int = DEFAULT_RESAMPLES,
              seed: int = DEFAULT_SEED, strict: bool = False, budget_curve: bool = False,
              judges: Sequence[JudgeConfig] = (), judge_self: bool = False, judge_errors: str = "report",
              prices: Path | None = None) -> Scores:
    """Score a finished (or partial) run against its release and write ``<run_dir>/scores.json`` atomically.

    The release must verify and be the one the run pinned in ``run.json``
    (IntegrityError otherwise, naming file, hashes and fix). The denominator
    is the release's question count: missing questions score 0 and are listed.
    With ``strict`` a run with any error outcome or missing question is refused
    (:class:`ScoreRefused`). ``budget_curve`` adds accuracy at every smaller budget
    (``scoring.budget_curve``; refused for agents whose prompt states the budget).
    The risk–coverage curve (``scoring.risk_coverage``) is always added, on the answers' stated
    confidence when the run's prompt asked for one (``prompt_variant: stated-confidence``). Returns what
    was written, with ``per_question`` attached.

    ``judge`` (one) or ``judges`` (several, the first scored as ``judge``) add LLM-judge metrics
    (``scoring.judges``): a judge on the model under test is refused unless ``judge_self``; judge
    errors are left out of each judge's denominator and counted, and with ``judge_errors="fail"``
    the scores are written and then :class:`JudgeErrors` raised. ``prices`` (a price table) adds the
    tokens and cost of the agent and each judge (``scoring.costs``).
    """
    check_compat(compat)
    if judge_errors not in ("report", "fail"):
        raise ConfigError(f"--judge-errors {judge_errors!r}", fix="use report (count them) or fail (exit non-zero)")
    all_judges = [*([judge] if judge is not None else []), *judges]
    run_dir, release_dir = Path(run_dir), Path(release_dir)
    fingerprint = read_fingerprint(run_dir)
    check_compat_agent(compat, fingerprint.agent if fingerprint is not None else None)
    elicited = fingerprint is not None and elicits_confidence(fingerprint.agent_config)
    run = load_run(run_dir, compat=compat, stated_confidence=elicited)
    gold = bind_gold(release_dir, run_dir, fingerprint, run.path)
    release = load_release(release_dir)
    _check_size(fingerprint, release_dir, len(release))
    samples = run_samples(run, fingerprint.samples if fingerprint is not None else None)
    check_not_self(all_judges, fingerprint, allow_self=judge_self)
    check_judge_names(all_judges)
    joined = join(release, run, samples)
    if strict:
        _refuse_if_strict(joined.rows, run_dir)
    values = [score_row(row, compat=compat) for row in joined.rows]
    scored = per_question_rows(joined.rows, values, samples=samples)
    metrics = list(ALL_METRICS) + (list(AETHERSEARCH_METRICS) if compat == "aethersearch" else [])
    theirs = (aethersearch_summary([(row.source, aethersearch_row(row)) for row in joined.rows])
              if compat == "aethersearch" else None)
    flat = [{"id": row.id, "sample": row.sample, "source": row.source, "outcome": row.outcome,
             "stop_reason": row.stop_reason, "usage": row.usage.model_dump() if row.usage is not None else None,
             **value} for row, value in zip(joined.rows, values, strict=True)]
    summaries: list[dict[str, Any]] = []
    reduced = list(metrics)
    if all_judges:
        judged = judge_rows(joined.rows, all_judges, run_dir)
        scored = apply_to_questions(scored, joined.rows, flat, judged, samples)
        summaries = [{**s, "judge_self": judge_self} for s in judge_summaries(scored, judged)]
        metrics += [s["metric"] for s in summaries]
        reduced += [s["metric"] for s in summaries if reducible(scored, s["metric"])]
    summary = aggregate(flat, metrics, resamples=resamples, seed=seed, samples=samples,
                        reductions=question_reductions(scored, reduced, samples))
    errors = _error_counts(joined.rows)
    # Per-question rows go to their own compact JSONL (a 1M-question run would
    # make an unreadable scores.json); scores.json pins it by sha256 and is
    # written second, so a reader never pairs a summary with other rows.
    curve = budget_curve_section(scored, fingerprint, resamples=resamples, seed=seed) if budget_curve else None
    risk = run_risk_coverage(scored, elicited=elicited).as_dict()
    questions = encode_jsonl(scored)
    atomic_write_bytes(run_dir / QUESTIONS_FILE, questions)
    result = Scores.model_validate({
        "software_version": __version__,
        "run_dir": str(run_dir),
        "run_file": str(run.path),
        "gold": gold,
        "fingerprint": fingerprint,
        "compat": compat,
        "question_count": len(release),
        "denominator": len(release),
        "metrics": metrics,
        "abstention_rule": ABSTENTION_RULE,
        "samples": samples,
        "join": {
            "answered_rows": len(release) * samples - len(joined.missing),
            "missing": joined.missing,
            "duplicates": joined.duplicates,
            "unknown": joined.unknown,
            "retried": joined.retried,
        },
        "errors": {"count": sum(errors.values()), "by_outcome": errors, "missing": len(joined.missing)},
        **summary,
        "searchr1": {},
        "aethersearch": theirs,
        "judge": summaries[0] if summaries else None,
        "judges": summaries,
        "judge_agreement": agreement(scored, summaries, resamples=resamples, seed=seed),
        "cost": run_cost(prices, fingerprint, summaries, scored) if prices is not None else None,
        "per_question_file": {"path": QUESTIONS_FILE, "sha256": sha256_bytes(questions), "rows": len(scored)},
        "risk_coverage": risk,
        "budget_curve": curve,
    })
    result = result.model_copy(update={"searchr1": searchr1_metrics(result), "per_question": tuple(scored)})
    atomic_write_json(run_dir / SCORES_FILE, result)
    failed = {s["name"]: s["error_count"] for s in summaries if s["error_count"]}
    if judge_errors == "fail" and failed:
        raise JudgeErrors(f"judge errors in {run_dir}: " + ", ".join(f"{n}: {c} rows without a verdict"
                                                                      for n, c in failed.items())
                          + " (left out of the judge metric; scores.json written with the counts)",
                          fix="see scores.json judges[].errors for each row's reply or API error; fix the judge "
                              "endpoint or its --judge-parser and score again")
    return result


def check_judge_names(judges: Sequence[JudgeConfig]) -> None:
    """Two judges need two names: each names a metric (``judge:<name>``) and a column of every table."""
    names = [j.label for j in judges]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"two judges are both named {repeated[0]!r}",
                          fix="give each --judge its own --judge-name (or a different --judge-model)")
