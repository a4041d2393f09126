"""``scores.json`` and ``scores_questions.jsonl`` as typed, versioned records: the one reader of both.

Why: about ten modules (compare, report, the CLI, the Python API, watch,
diagnostics) read scores. With string keys, a renamed or missing key turned
into a ``KeyError`` far from its cause, or worse a silent ``.get(..., 0)``.
Every reader now goes through :func:`read_scores` (or the :class:`Scores`
returned by ``score_run``) and uses attributes; a file of another
``schema_version`` is refused with the fix (rescore), never half-read.

Layout on disk (unchanged in spirit from version 1): ``scores.json`` holds the
summary and pins ``scores_questions.jsonl`` (one :class:`QuestionScore` per
release question) by sha256; ``Scores.per_question`` carries those rows in
memory and is never written into ``scores.json`` itself.

With K samples per question (``samples``), a question's ``values`` are the means
over its K samples (so every ``metrics`` figure is mean@K), each sample is kept in
``samples``, ``correct`` is c of K per 0/1 metric, and ``reducers`` holds
``mean@K``, ``pass@1..K`` and ``maj@K`` per metric (``scoring/reducers.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from aethersearch.errors import DataError, IntegrityError
from aethersearch.jsonl import iter_jsonl, loads, sha256_file, validate_row
from aethersearch.records import Record, RunFingerprint, Usage
from aethersearch.scoring.binding import GoldBinding

__all__ = [
    "QUESTIONS_FILE",
    "SCORES_FILE",
    "SCORES_SCHEMA_VERSION",
    "BootstrapSettings",
    "BudgetSummary",
    "SampleScore",
    "VarianceShare",
    "Disagreement",
    "ErrorSummary",
    "JoinSummary",
    "JudgeSummary",
    "MacroScores",
    "MetricEstimate",
    "MicroScores",
    "Overall",
    "PerQuestionFile",
    "QuestionScore",
    "Scores",
    "SourceScores",
    "UsageSummary",
    "UsageTotal",
    "read_scores",
]

SCORES_SCHEMA_VERSION = 3
"""3: K samples per question (reducers, c of K, variance share); 2: gold binding, error counts,
abstention-aware metrics, nested per-question values (1 was untyped)."""

SCORES_FILE = "scores.json"
QUESTIONS_FILE = "scores_questions.jsonl"


class MetricEstimate(Record):
    """A mean with its 95% bootstrap interval (None where there was nothing to average)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


class UsageTotal(Record):
    """One usage field summed over the questions that recorded usage, and its per-question mean."""

    total: int
    mean: float | None


class UsageSummary(Record):
    """Token, turn and tool-call totals over questions that recorded usage."""

    questions_with_usage: int
    prompt_tokens: UsageTotal
    completion_tokens: UsageTotal
    turns: UsageTotal
    tool_calls: UsageTotal


class BudgetSummary(Record):
    """Questions that exhausted the tool budget, by outcome, and every stop reason's count."""

    exhausted: int
    by_outcome: dict[str, int]
    answered_after_budget: int
    answered_after_budget_em: float | None
    stop_reasons: dict[str, int]


class VarianceShare(Record):
    """The share of the mean@K estimate's variance that is sampling noise within questions (K > 1)."""

    share: float | None
    within_variance: float | None
    between_variance: float | None


#: metric -> reducer (``mean@K``, ``pass@k``, ``maj@K``) -> estimate, each CI clustered by question
Reducers = dict[str, dict[str, MetricEstimate]]


class SourceScores(Record):
    """One source's estimates; ``errors`` rollouts of it ended in an error outcome (scored 0).

    ``n`` counts questions; outcome, usage and budget counts are of rollouts (questions x K).
    """

    n: int
    errors: int
    metrics: dict[str, MetricEstimate]
    outcomes: dict[str, int]
    usage: UsageSummary
    budget: BudgetSummary
    reducers: Reducers = Field(default_factory=dict)
    variance: dict[str, VarianceShare] = Field(default_factory=dict)


class MicroScores(Record):
    """Mean over all questions (each source weighted by its size)."""

    label: str
    n: int
    errors: int
    metrics: dict[str, MetricEstimate]
    reducers: Reducers = Field(default_factory=dict)
    variance: dict[str, VarianceShare] = Field(default_factory=dict)


class MacroScores(Record):
    """Unweighted mean of the per-source means."""

    label: str
    sources: int
    errors: int
    metrics: dict[str, MetricEstimate]
    reducers: Reducers = Field(default_factory=dict)


class Overall(Record):
    """Both overall figures, each labelled."""

    micro: MicroScores
    macro: MacroScores


class BootstrapSettings(Record):
    """How the intervals were drawn."""

    resamples: int
    seed: int
    level: float
    method: str
    strata: str
    #: what one bootstrap draw resamples: questions, with all K samples of a question together
    clusters: str = "question"


class JoinSummary(Record):
    """Id problems found while joining the run to the release."""

    answered_rows: int
    missing: list[str]
    duplicates: list[str]
    unknown: list[str]
    retried: list[str]


class ErrorSummary(Record):
    """Questions that were not really attempted: error outcomes (by outcome) and missing rows."""

    count: int
    by_outcome: dict[str, int]
    missing: int

    @property
    def unscored(self) -> int:
        """Questions scored 0 without an answer attempt: errors plus missing rows."""
        return self.count + self.missing


class Disagreement(Record):
    """EM (0/1) x judge verdict counts and the ids where the two disagree."""

    em_vs_verdict: dict[str, dict[str, int]]
    em_correct_judge_not: list[str]
    judge_correct_em_not: list[str]
    agreement: float | None
    judged: int


class JudgeSummary(Record):
    """One LLM judge's contract and results (``scoring.judges``).

    ``errors`` (rollout row key -> what went wrong) are judge errors, never grades: those rows are
    out of the judge metric, and a question with no verdict at all is out of its denominator
    (``questions_without_verdict``).
    """

    model: str
    base_url: str
    prompt_sha256: str
    temperature: float
    judged: int
    cached: int
    errors: dict[str, str]
    disagreement: Disagreement
    name: str = ""
    metric: str = "judge"
    prompt_source: str = "aethersearch default"
    parser: str = "three-way"
    seed: int | None = None
    max_tokens: int | None = None
    error_count: int = 0
    tokens: dict[str, int] = Field(default_factory=dict)
    kappa_vs_em: float | None = None
    questions_scored: int | None = None
    questions_without_verdict: int = 0
    judge_self: bool = False


class JudgeAgreement(Record):
    """Two judges on the same questions: Cohen's kappa, the paired delta of their scores and where they differ."""

    a: str
    b: str
    n: int
    kappa: float | None
    a_mean: float | None
    b_mean: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    disagree: list[str]


class PerQuestionFile(Record):
    """``scores_questions.jsonl`` pinned by sha256 and row count."""

    path: str
    sha256: str
    rows: int


class SampleScore(Record):
    """One of a question's K samples: what that rollout produced and its metric values."""

    sample: int
    outcome: str
    stop_reason: str | None
    present: bool
    prediction: str | None
    values: dict[str, float]


class QuestionScore(Record):
    """One row of ``scores_questions.jsonl``: a release question, what the run produced, its metric values.

    With K > 1 samples: ``values`` are the means over the samples (mean@K),
    ``outcome``/``prediction``/``stop_reason`` are those of the majority sample
    (``majority_sample``), ``present`` says every sample has a row, ``usage`` is
    summed over the samples and ``samples`` holds each one. ``correct`` is c of K
    for each 0/1 metric and ``majority`` each metric's maj@K value (K = 1: the
    question's own values).
    """

    id: str
    source: str
    outcome: str
    stop_reason: str | None
    present: bool
    prediction: str | None
    values: dict[str, float]
    usage: Usage | None = None
    judge_verdict: str | None = None
    judge_verdicts: dict[str, str] = Field(default_factory=dict)
    """Each judge's verdict (by judge name) of the question's lead sample; ``error`` where it gave none."""
    judge_replies: dict[str, str] = Field(default_factory=dict)
    """Each judge's raw reply (by judge name), for the viewer."""
    correct: dict[str, int] = Field(default_factory=dict)
    majority: dict[str, float] = Field(default_factory=dict)
    majority_sample: int = 0
    samples: list[SampleScore] = Field(default_factory=list)
    stated_confidence: float | None = None
    """The confidence the answer states, in [0, 1] (runs with the stated-confidence prompt only)."""
    confidence_status: str | None = None
    """``stated``, ``missing``, ``unparseable`` or ``out_of_range``; None when the prompt asked for none."""

    @property
    def k(self) -> int:
        """How many samples the question has (1 when ``samples`` is empty)."""
        return len(self.samples) or 1

    def reduced(self, metric: str, reducer: str) -> float:
        """This question's value of ``reducer`` (``mean@K``, ``pass@k``, ``maj@K``) for ``metric``."""
        from aethersearch.scoring.reducers import reducer_value

        return reducer_value(reducer, samples=self.k, mean=self.values[metric], correct=self.correct.get(metric),
                             majority=self.majority.get(metric, self.values[metric]))


class Scores(Record):
    """``scores.json`` (``per_question`` is attached in memory, never written into this file)."""

    schema_version: int = SCORES_SCHEMA_VERSION
    software_version: str
    run_dir: str
    run_file: str
    gold: GoldBinding
    fingerprint: RunFingerprint | None
    compat: str | None
    question_count: int
    denominator: int
    metrics: list[str]
    abstention_rule: str
    join: JoinSummary
    errors: ErrorSummary
    bootstrap: BootstrapSettings
    by_source: dict[str, SourceScores]
    overall: Overall
    outcomes: dict[str, int]
    usage: UsageSummary
    budget: BudgetSummary
    searchr1: dict[str, float | None]
    #: ``--compat aethersearch``: their ``_aggregate`` keys per source, ``overall`` and ``overall_macro``.
    aethersearch: dict[str, dict[str, float]] | None = None
    judge: JudgeSummary | None
    #: every judge, in ``--judge`` order (the first is ``judge`` above), and every two judges' agreement
    judges: list[JudgeSummary] = Field(default_factory=list)
    judge_agreement: list[JudgeAgreement] = Field(default_factory=list)
    #: ``--prices FILE``: tokens and cost of the agent and each judge (``scoring.costs``)
    cost: dict[str, Any] | None = None
    per_question_file: PerQuestionFile
    #: ``scoring.risk_coverage``: accuracy among answered questions against coverage, AURC, ECE (stated confidence)
    risk_coverage: dict[str, Any] | None = None
    #: ``scoring.budget_curve`` (``aether score --budget-curve``): accuracy at every smaller tool-call/token budget
    budget_curve: dict[str, Any] | None = None
    #: K: samples per question (every ``metrics`` figure is then mean@K)
    samples: int = 1
    per_question: tuple[QuestionScore, ...] = Field(default=(), exclude=True)

    def per_question_values(self, metric: str, reducer: str | None = None) -> dict[str, tuple[str, float]]:
        """``{id: (source, value)}`` of one metric (refused, naming the valid ones, when it was not scored).

        ``reducer`` (``mean@K``, ``pass@k``, ``maj@K``) picks a K-sample reducer; None is the
        question's mean over its samples (mean@K; with one sample, the value itself).
        """
        from aethersearch.errors import ConfigError

        if metric not in self.metrics:
            raise ConfigError(f"{self.run_dir} has no {metric!r} scores",
                              fix=f"use one of: {', '.join(self.metrics)}, or rescore the run")
        # a question without a value (a judge metric where the judge gave no verdict) is left out
        if reducer is None:
            return {row.id: (row.source, row.values[metric]) for row in self.per_question if metric in row.values}
        return {row.id: (row.source, row.reduced(metric, reducer)) for row in self.per_question
                if metric in row.values}


def _rescore(run_dir: Path) -> str:
    return f"re-run `aether score {run_dir} --release <release dir>`"


def read_scores(run_dir: str | Path) -> Scores:
    """A run's ``scores.json`` with its per-question rows, checked by sha256 and against the run's files.

    Refused (with the fix, rescoring) when the file is missing, of another
    schema version, when the per-question file does not match its pin, or when
    ``run.json``/the traces changed since scoring (the scores would describe
    another run).
    """
    run_dir = Path(run_dir)
    path = run_dir / SCORES_FILE
    if not run_dir.is_dir():
        raise DataError(run_dir, "no such run directory",
                        fix="check the path; a run directory is what `aether run --out DIR` wrote")
    if not path.is_file():
        raise DataError(path, "run has not been scored", fix=f"run `aether score {run_dir} --release <release dir>` first")
    try:
        raw: Any = loads(path.read_bytes())
    except ValueError as exc:
        raise DataError(path, f"invalid JSON: {exc}", fix=_rescore(run_dir)) from None
    version = raw.get("schema_version") if isinstance(raw, dict) else None
    if version != SCORES_SCHEMA_VERSION:
        raise DataError(path, f"schema_version {version!r}, this version reads {SCORES_SCHEMA_VERSION}",
                        field="schema_version", fix=_rescore(run_dir))
    try:
        scores = Scores.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise DataError(path, f"{first['msg']}", field=where, fix=_rescore(run_dir)) from None
    pinned = scores.per_question_file
    questions = run_dir / pinned.path
    if not questions.is_file() or sha256_file(questions) != pinned.sha256:
        raise IntegrityError(f"{questions} is missing or does not match the sha256 pinned in {path}",
                             fix=_rescore(run_dir))
    _check_run_unchanged(scores, run_dir, path)
    rows = tuple(validate_row(questions, line, value, QuestionScore) for line, value in iter_jsonl(questions))
    return scores.model_copy(update={"per_question": rows})


def _check_run_unchanged(scores: Scores, run_dir: Path, path: Path) -> None:
    """The run files must still be the ones scored (a resumed or edited run needs a rescore)."""
    checks = [(run_dir / scores.gold.run_file, scores.gold.run_file_sha256)]
    if scores.gold.run_json_sha256 is not None:
        checks.append((run_dir / "run.json", scores.gold.run_json_sha256))
    for file, expected in checks:
        found = sha256_file(file) if file.is_file() else "missing"
        if found != expected:
            raise IntegrityError(f"{file}: sha256 {found} differs from {expected} recorded in {path} when the run "
                                 "was scored; these scores describe an earlier state of the run",
                                 fix=_rescore(run_dir))
