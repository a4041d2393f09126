"""Risk–coverage of a run: how accuracy on the answered questions trades against how many are answered.

Why: a refusal rate alone says nothing about *which* questions a model refuses.
Selective-prediction work (Geifman & El-Yaniv 2017) ranks answers by a
confidence signal and draws the selective risk (error rate among the covered
answers) against coverage; the area under that curve (AURC) is low when the
model's wrong answers are the ones it is least confident about.

Conventions of this project (named ``aethersearch`` conventions, not a paper's):

* **Who is counted.** Error outcomes (endpoint, tool, rejected request) and
  missing rows are *neither* covered nor uncovered: they are left out, since
  nothing was decided. Every other question is in the denominator ``N``.
  Only ``answered`` questions can be covered; refusals (and no-answer, budget or
  truncated endings) are uncovered at every threshold, so the curve ends at
  coverage ``m / N`` with ``m`` the answered count.
* **AURC** is the mean selective risk over the ``m`` coverage levels the run can
  reach, ``(1/m) * sum_k risk(k)`` with ``risk(k)`` the error rate among the
  ``k`` most confident answers; ``coverage_max = m / N`` is reported beside it
  (a run cannot lower its AURC by refusing without that figure showing it).
* **Ties** in confidence are averaged over every order of the tied answers: within
  a tie group the expected number of errors after taking ``j`` of its ``g`` answers
  is ``j * errors_in_group / g``, so the curve does not depend on file order.
* **Signals**, in order of preference: the model's own stated confidence where its
  final reply carries one (``Confidence: 85%`` as BrowseComp-Plus elicits it, or
  ``<confidence>0.85</confidence>``; an answer without one counts as confidence 0);
  else the agreement of the question's K samples with this answer (when a run has
  K > 1 samples); else search effort (fewer tool calls = more confident).
* **ECE** (expected calibration error, 10 equal-width bins over the covered
  answers) is reported only for stated confidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from aethersearch.records import ERROR_OUTCOMES, Outcome

__all__ = ["RiskCoverage", "aurc_bootstrap_difference", "expected_calibration_error", "risk_coverage",
           "stated_confidence"]

SIGNALS = ("stated", "samples", "effort")
_ERRORS = frozenset({*(o.value for o in ERROR_OUTCOMES), "missing"})
_STATED = re.compile(r"(?:confidence\s*(?:score)?\s*[:=]\s*(\d{1,3}(?:\.\d+)?)\s*(%)?)"
                     r"|(?:<confidence>\s*(\d{1,3}(?:\.\d+)?)\s*(%)?\s*</confidence>)", re.IGNORECASE)


class RiskCoverage(NamedTuple):
    """A run's risk–coverage curve (one point per covered answer, most confident first) and its summary."""

    signal: str
    n: int  # questions counted (errors and missing rows left out)
    covered: int
    excluded_errors: int
    coverage: list[float]
    risk: list[float]
    aurc: float | None
    coverage_max: float
    ece: float | None

    def as_dict(self) -> dict[str, Any]:
        """The ``risk_coverage`` section of ``scores.json``."""
        return {"signal": self.signal, "n": self.n, "covered": self.covered,
                "excluded_errors": self.excluded_errors, "aurc": self.aurc, "coverage_max": self.coverage_max,
                "ece": self.ece, "curve": {"coverage": self.coverage, "risk": self.risk}}


def stated_confidence(text: str | None) -> float | None:
    """The last confidence the reply states, in [0, 1] (``85%``, ``85`` and ``0.85`` all read as 0.85)."""
    if not text:
        return None
    found = _STATED.findall(text)
    if not found:
        return None
    a, a_pct, b, b_pct = found[-1]
    value, percent = (a, a_pct) if a else (b, b_pct)
    number = float(value)
    if percent or number > 1.0:
        number /= 100.0
    return min(max(number, 0.0), 1.0)


def _expected_errors(confidence: np.ndarray, wrong: np.ndarray) -> np.ndarray:
    """Expected errors among the k most confident answers, k = 1..m, averaged over orders of ties."""
    order = np.argsort(-confidence, kind="stable")
    conf, wrong = confidence[order], wrong[order]
    out = np.empty(len(conf))
    start = 0
    done = 0.0
    while start < len(conf):
        end = start
        while end < len(conf) and conf[end] == conf[start]:
            end += 1
        group = end - start
        rate = float(wrong[start:end].sum()) / group
        out[start:end] = done + rate * np.arange(1, group + 1)
        done += float(wrong[start:end].sum())
        start = end
    return out


def _aurc(confidence: np.ndarray, correct: np.ndarray) -> float | None:
    if len(confidence) == 0:
        return None
    errors = _expected_errors(confidence, 1.0 - correct)
    return float(np.mean(errors / np.arange(1, len(errors) + 1)))


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[float], bins: int = 10) -> float | None:
    """Sum over equal-width bins of |accuracy - mean confidence| weighted by the bin's share of answers."""
    conf, corr = np.asarray(confidence, dtype=float), np.asarray(correct, dtype=float)
    if len(conf) == 0:
        return None
    index = np.minimum((conf * bins).astype(int), bins - 1)
    total = 0.0
    for b in range(bins):
        mask = index == b
        if mask.any():
            total += mask.sum() / len(conf) * abs(float(corr[mask].mean()) - float(conf[mask].mean()))
    return total


def risk_coverage(outcomes: Sequence[str], correct: Sequence[float], confidence: Sequence[float | None], *,
                  signal: str) -> RiskCoverage:
    """The curve over one run's questions: ``outcomes``, 0/1 ``correct`` and a ``confidence`` per question.

    ``confidence`` may be None for questions that are not covered (refusals, errors).
    """
    counted = [i for i, o in enumerate(outcomes) if o not in _ERRORS]
    covered = [i for i in counted if outcomes[i] == Outcome.ANSWERED.value]
    conf = np.array([confidence[i] if confidence[i] is not None else 0.0 for i in covered], dtype=float)
    corr = np.array([correct[i] for i in covered], dtype=float)
    errors = _expected_errors(conf, 1.0 - corr) if len(covered) else np.empty(0)
    k = np.arange(1, len(covered) + 1)
    n = len(counted)
    return RiskCoverage(
        signal=signal, n=n, covered=len(covered), excluded_errors=len(outcomes) - n,
        coverage=[float(x) for x in k / n] if n else [], risk=[float(x) for x in errors / k] if len(k) else [],
        aurc=_aurc(conf, corr), coverage_max=len(covered) / n if n else 0.0,
        ece=expected_calibration_error(conf.tolist(), corr.tolist()) if signal == "stated" else None)


def aurc_bootstrap_difference(a: RiskInputs, b: RiskInputs, *, resamples: int = 1000,
                              seed: int = 0) -> dict[str, float | None]:
    """Paired difference AURC(b) - AURC(a) with a 95% bootstrap interval over questions (same draw for both runs)."""
    point_a, point_b = _aurc_of(a, None), _aurc_of(b, None)
    if point_a is None or point_b is None:
        return {"delta": None, "ci_low": None, "ci_high": None, "resamples": 0}
    rng = np.random.default_rng(seed)
    n = len(a.outcomes)
    deltas = []
    for _ in range(resamples):
        draw = rng.integers(0, n, n)
        da, db = _aurc_of(a, draw), _aurc_of(b, draw)
        if da is not None and db is not None:
            deltas.append(db - da)
    low, high = (float(np.percentile(deltas, 2.5)), float(np.percentile(deltas, 97.5))) if deltas else (None, None)
    return {"delta": point_b - point_a, "ci_low": low, "ci_high": high, "resamples": len(deltas)}


class RiskInputs(NamedTuple):
    """One run's per-question inputs, in release order (paired runs share the order)."""

    outcomes: list[str]
    correct: list[float]
    confidence: list[float | None]


def _aurc_of(inputs: RiskInputs, draw: np.ndarray | None) -> float | None:
    rows = range(len(inputs.outcomes)) if draw is None else draw.tolist()
    covered = [i for i in rows if inputs.outcomes[i] == Outcome.ANSWERED.value]
    conf = np.array([inputs.confidence[i] or 0.0 for i in covered], dtype=float)
    corr = np.array([inputs.correct[i] for i in covered], dtype=float)
    return _aurc(conf, corr)
