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
* **Signals**, in order of preference: the model's own stated confidence when the
  run's prompt asked for one (the ``stated-confidence`` prompt variant, read off each
  answer by ``aethersearch.stated_confidence``); else the agreement of the question's
  K samples with this answer (when a run has K > 1 samples); else search effort
  (fewer tool calls = more confident). A stated confidence is never guessed: an
  answer whose confidence is missing or unreadable keeps ``None`` and is ranked
  *after* every answer that stated one (one tie group, averaged as above); how many
  there are is reported (``stated``).
* **ECE** (expected calibration error, Naeini et al. 2015 / Guo et al. 2017: the
  answer-weighted mean of |accuracy - mean confidence| over bins) uses ``ECE_BINS`` = 10
  equal-width bins, bin ``b`` = [b/10, (b+1)/10) with the last closed at 1.0, over the
  covered answers that stated a confidence (``ece_answers``); reported only for the
  stated signal. BrowseComp-Plus reports a different figure, "calibration error":
  the root-mean-square version over bins of 100 answers sorted by confidence, with a
  missing confidence read as 100% (``scripts_evaluation/evaluate_run.py``); ``ece``
  is not that figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from aethersearch.records import ERROR_OUTCOMES, Outcome

__all__ = ["ECE_BINS", "RiskCoverage", "RiskInputs", "aurc_bootstrap_difference", "ece_bootstrap_difference",
           "expected_calibration_error", "risk_coverage"]

SIGNALS = ("stated", "samples", "effort")
ECE_BINS = 10
_ERRORS = frozenset({*(o.value for o in ERROR_OUTCOMES), "missing"})


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
    ece_answers: int | None = None
    stated: dict[str, int] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``risk_coverage`` section of ``scores.json``."""
        return {"signal": self.signal, "n": self.n, "covered": self.covered,
                "excluded_errors": self.excluded_errors, "aurc": self.aurc, "coverage_max": self.coverage_max,
                "ece": self.ece, "ece_bins": ECE_BINS if self.ece is not None else None,
                "ece_answers": self.ece_answers, "stated": self.stated,
                "curve": {"coverage": self.coverage, "risk": self.risk}}


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


def expected_calibration_error(confidence: Sequence[float], correct: Sequence[float],
                               bins: int = ECE_BINS) -> float | None:
    """Sum over equal-width bins of |accuracy - mean confidence| weighted by the bin's share of answers.

    Bin ``b`` holds confidences in [b/bins, (b+1)/bins); a confidence of exactly 1.0 joins the last bin.
    """
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


def rank_keys(values: Sequence[float | None]) -> np.ndarray:
    """Confidences as sort keys: a missing one (None) below every stated one (-inf: one tie group, last)."""
    return np.array([-np.inf if v is None else v for v in values], dtype=float)


def risk_coverage(outcomes: Sequence[str], correct: Sequence[float], confidence: Sequence[float | None], *,
                  signal: str, stated: dict[str, int] | None = None) -> RiskCoverage:
    """The curve over one run's questions: ``outcomes``, 0/1 ``correct`` and a ``confidence`` per question.

    ``confidence`` is None for questions that are not covered (refusals, errors) and, with
    the stated signal, for answers whose confidence is missing: those rank last and stay out
    of the ECE. ``stated`` is the count of answers per confidence status, reported as given.
    """
    counted = [i for i, o in enumerate(outcomes) if o not in _ERRORS]
    covered = [i for i in counted if outcomes[i] == Outcome.ANSWERED.value]
    conf = rank_keys([confidence[i] for i in covered])
    corr = np.array([correct[i] for i in covered], dtype=float)
    given = [i for i in covered if confidence[i] is not None]
    ece = None
    if signal == "stated":
        ece = expected_calibration_error([float(confidence[i]) for i in given],  # type: ignore[arg-type]
                                         [correct[i] for i in given])
    errors = _expected_errors(conf, 1.0 - corr) if len(covered) else np.empty(0)
    k = np.arange(1, len(covered) + 1)
    n = len(counted)
    return RiskCoverage(
        signal=signal, n=n, covered=len(covered), excluded_errors=len(outcomes) - n,
        coverage=[float(x) for x in k / n] if n else [], risk=[float(x) for x in errors / k] if len(k) else [],
        aurc=_aurc(conf, corr), coverage_max=len(covered) / n if n else 0.0,
        ece=ece, ece_answers=len(given) if signal == "stated" else None, stated=stated)


def aurc_bootstrap_difference(a: RiskInputs, b: RiskInputs, *, resamples: int = 1000,
                              seed: int = 0) -> dict[str, float | None]:
    """Paired difference AURC(b) - AURC(a) with a 95% bootstrap interval over questions (same draw for both runs)."""
    return _paired_bootstrap(a, b, _aurc_of, resamples=resamples, seed=seed)


def ece_bootstrap_difference(a: RiskInputs, b: RiskInputs, *, resamples: int = 1000,
                             seed: int = 0) -> dict[str, float | None]:
    """Paired difference ECE(b) - ECE(a), both on stated confidence, with its 95% bootstrap interval."""
    return {"a": _ece_of(a, None), "b": _ece_of(b, None),
            **_paired_bootstrap(a, b, _ece_of, resamples=resamples, seed=seed)}


def _paired_bootstrap(a: RiskInputs, b: RiskInputs, statistic: Any, *, resamples: int,
                      seed: int) -> dict[str, float | None]:
    point_a, point_b = statistic(a, None), statistic(b, None)
    if point_a is None or point_b is None:
        return {"delta": None, "ci_low": None, "ci_high": None, "resamples": 0}
    rng = np.random.default_rng(seed)
    n = len(a.outcomes)
    deltas = []
    for _ in range(resamples):
        draw = rng.integers(0, n, n)
        da, db = statistic(a, draw), statistic(b, draw)
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
    corr = np.array([inputs.correct[i] for i in covered], dtype=float)
    return _aurc(rank_keys([inputs.confidence[i] for i in covered]), corr)


def _ece_of(inputs: RiskInputs, draw: np.ndarray | None) -> float | None:
    rows = range(len(inputs.outcomes)) if draw is None else draw.tolist()
    given = [i for i in rows if inputs.outcomes[i] == Outcome.ANSWERED.value and inputs.confidence[i] is not None]
    return expected_calibration_error([float(inputs.confidence[i]) for i in given],  # type: ignore[arg-type]
                                      [inputs.correct[i] for i in given])
