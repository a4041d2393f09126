"""A run's confidence signal per question, read from its files, and its risk–coverage curve.

Why separate from ``risk_coverage``: the curve is pure arithmetic on (outcome,
correct, confidence); *which* confidence a run has depends on what it recorded.
The stated confidence lives in the final reply of ``traces.jsonl``; search effort in
the usage the scorer already joined; the agreement of a K-sample run's samples
with their majority answer in the scored rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aethersearch.jsonl import iter_jsonl
from aethersearch.records import Outcome
from aethersearch.scoring.join import TRACES_FILE
from aethersearch.text import normalize_answer
from aethersearch.scoring.risk_coverage import RiskCoverage, RiskInputs, risk_coverage, stated_confidence
from aethersearch.scoring.scores_file import QuestionScore, Scores

__all__ = ["confidence_inputs", "run_inputs", "run_risk_coverage"]

CORRECT_METRIC = "em"


def _responses(run_dir: Path, kind: str) -> dict[str, str]:
    """Each question's final response (its highest attempt) from ``traces.jsonl``; empty for prediction files."""
    if kind != "traces":
        return {}
    found: dict[str, tuple[int, str]] = {}
    for _line, value in iter_jsonl(run_dir / TRACES_FILE):  # already validated by the join
        attempt = int(value.get("attempt", 1))
        if value["id"] not in found or attempt >= found[value["id"]][0]:
            found[value["id"]] = (attempt, str(value.get("response") or ""))
    return {qid: text for qid, (_attempt, text) in found.items()}


def agreement(row: QuestionScore) -> float:
    """The share of a question's K samples whose normalised answer is the majority sample's (``samples`` signal)."""
    lead = row.samples[row.majority_sample].prediction
    key = None if lead is None else normalize_answer(lead)
    return sum((None if s.prediction is None else normalize_answer(s.prediction)) == key
               for s in row.samples) / len(row.samples)


def confidence_inputs(rows: Sequence[QuestionScore], responses: dict[str, str]) -> tuple[str, RiskInputs]:
    """The signal and the per-question inputs: ``stated`` when any answer states a confidence, else ``samples``
    for a K-sample run (the majority answer is the covered one, scored by its maj@K value), else ``effort``."""
    if any(r.k > 1 for r in rows):
        return "samples", RiskInputs(
            [r.outcome for r in rows], [r.majority.get(CORRECT_METRIC, 0.0) for r in rows],
            [agreement(r) if r.outcome == Outcome.ANSWERED.value else None for r in rows])
    answered = [r for r in rows if r.outcome == Outcome.ANSWERED.value]
    stated = {r.id: stated_confidence(responses.get(r.id)) for r in answered}
    signal = "stated" if any(v is not None for v in stated.values()) else "effort"
    confidence: list[float | None] = []
    for row in rows:
        if row.outcome != Outcome.ANSWERED.value:
            confidence.append(None)
        elif signal == "stated":
            confidence.append(stated[row.id] or 0.0)
        else:  # fewer tool calls = more confident
            confidence.append(-float(row.usage.tool_calls) if row.usage is not None else 0.0)
    return signal, RiskInputs([r.outcome for r in rows], [r.values.get(CORRECT_METRIC, 0.0) for r in rows],
                              confidence)


def run_inputs(run_dir: Path, scores: Scores) -> tuple[str, RiskInputs]:
    """The signal and per-question inputs of a scored run (what ``compare`` pairs)."""
    kind = "traces" if Path(scores.run_file).name == TRACES_FILE else "predictions"
    return confidence_inputs(scores.per_question, _responses(Path(run_dir), kind))


def run_risk_coverage(run_dir: Path, kind: str, rows: Sequence[QuestionScore]) -> RiskCoverage:
    """The run's risk–coverage curve on exact match, with the best confidence signal it recorded."""
    signal, inputs = confidence_inputs(rows, _responses(Path(run_dir), kind))
    return risk_coverage(inputs.outcomes, inputs.correct, inputs.confidence, signal=signal)
