"""A run's confidence signal per question, read from its scored rows, and its risk–coverage curve.

Why separate from ``risk_coverage``: the curve is pure arithmetic on (outcome,
correct, confidence); *which* confidence a run has depends on what it recorded.
The stated confidence is read off each answer by the scorer's extraction when the
run's prompt asked for one (``QuestionScore.stated_confidence``, bound to
``run.json``'s ``prompt_variant``); search effort is the usage the scorer already
joined; the agreement of a K-sample run's samples with their majority answer is in
the scored rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from aethersearch.records import Outcome
from aethersearch.scoring.risk_coverage import RiskCoverage, RiskInputs, risk_coverage
from aethersearch.scoring.scores_file import QuestionScore, Scores
from aethersearch.stated_confidence import STATUSES, elicits_confidence
from aethersearch.text import normalize_answer

__all__ = ["confidence_inputs", "run_inputs", "run_risk_coverage", "stated_counts"]

CORRECT_METRIC = "em"


def agreement(row: QuestionScore) -> float:
    """The share of a question's K samples whose normalised answer is the majority sample's (``samples`` signal)."""
    lead = row.samples[row.majority_sample].prediction
    key = None if lead is None else normalize_answer(lead)
    return sum((None if s.prediction is None else normalize_answer(s.prediction)) == key
               for s in row.samples) / len(row.samples)


def stated_counts(rows: Sequence[QuestionScore]) -> dict[str, int]:
    """Answered questions of a stated-confidence run by how their confidence was read (``answered`` = the sum)."""
    answered = [r for r in rows if r.outcome == Outcome.ANSWERED.value]
    counts = {status: sum(1 for r in answered if (r.confidence_status or "missing") == status) for status in STATUSES}
    return {"answered": len(answered), **counts}


def confidence_inputs(rows: Sequence[QuestionScore], *, elicited: bool) -> tuple[str, RiskInputs]:
    """The signal and the per-question inputs: ``stated`` when the run's prompt asked for a confidence
    (a missing one stays None), else ``samples`` for a K-sample run (the majority answer is the covered
    one, scored by its maj@K value), else ``effort``."""
    outcomes = [r.outcome for r in rows]
    if any(r.k > 1 for r in rows):
        return "samples", RiskInputs(
            outcomes, [r.majority.get(CORRECT_METRIC, 0.0) for r in rows],
            [agreement(r) if r.outcome == Outcome.ANSWERED.value else None for r in rows])
    correct = [r.values.get(CORRECT_METRIC, 0.0) for r in rows]
    if elicited:
        return "stated", RiskInputs(outcomes, correct, [
            r.stated_confidence if r.outcome == Outcome.ANSWERED.value else None for r in rows])
    confidence: list[float | None] = []
    for row in rows:
        if row.outcome != Outcome.ANSWERED.value:
            confidence.append(None)
        else:  # fewer tool calls = more confident
            confidence.append(-float(row.usage.tool_calls) if row.usage is not None else 0.0)
    return "effort", RiskInputs(outcomes, correct, confidence)


def run_inputs(scores: Scores) -> tuple[str, RiskInputs]:
    """The signal and per-question inputs of a scored run (what ``compare`` pairs)."""
    fingerprint = scores.fingerprint
    elicited = fingerprint is not None and elicits_confidence(fingerprint.agent_config)
    return confidence_inputs(scores.per_question, elicited=elicited)


def run_risk_coverage(rows: Sequence[QuestionScore], *, elicited: bool) -> RiskCoverage:
    """The run's risk–coverage curve on exact match, with the best confidence signal it recorded."""
    signal, inputs = confidence_inputs(rows, elicited=elicited)
    return risk_coverage(inputs.outcomes, inputs.correct, inputs.confidence, signal=signal,
                         stated=stated_counts(rows) if signal == "stated" else None)
