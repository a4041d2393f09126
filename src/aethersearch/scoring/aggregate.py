"""Averaging, in one place: per-source and overall (micro and macro) means with bootstrap CIs,
outcome breakdowns and usage totals.

Why one place: every table, chart and comparison reads these numbers, so the
definition of "overall" must not drift between them. Both overall figures are
labelled: *micro* is the mean over all questions (sources weighted by their
size), *macro* is the unweighted mean of the per-source means.

CIs are 95% percentile bootstrap intervals with a fixed seed. Each resample
draws questions with replacement *within* its source; the macro interval is
the mean of the per-source resampled means (a stratified bootstrap). For 0/1
metrics a resampled mean is exactly ``Binomial(n, p) / n`` and for repeated
values (F1 fractions) a multinomial over the distinct values, so those are drawn
directly (same distribution, no n x B index matrix). Seeds derive from the
source *name* (crc32), never from Python's randomised ``hash``, so results do not
depend on ``PYTHONHASHSEED`` or on the order predictions were written.

K samples per question are one cluster: a question's value is the mean over
its samples (mean@K), and every interval resamples *questions* (a clustered
bootstrap), never traces, which would treat K correlated samples as K
independent questions and give too narrow an interval. The reducers of
``reducers.py`` (pass@k, maj@K) are per-question values too, and go through the
same estimators. Outcome, usage and budget counts are of rollouts.

Budget exhaustion is reported next to, not folded into, the outcome breakdown:
when the runner's budget runs out it asks once more for a final answer and
records ``stop_reason="budget"``; if that yields an answer the outcome is
``answered`` (and it is scored like any answer), otherwise ``no_answer_tag`` or
``budget``. ``budget_summary`` counts every question that hit the budget, by its
outcome, so "answered" never hides how many answers were forced.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from aethersearch.records import ERROR_OUTCOMES, Outcome
from aethersearch.scoring.reducers import within_variance_share

__all__ = ["BUDGET_STOP", "Clusters", "DEFAULT_RESAMPLES", "DEFAULT_SEED", "Estimate", "LEVEL", "MACRO_LABEL",
    "MICRO_LABEL", "OUTCOME_LABELS", "QuestionReductions", "UNRECORDED", "USAGE_FIELDS", "aggregate",
    "bootstrap_means", "budget_summary", "error_count", "estimate", "hit_budget", "outcome_counts",
    "percentile_interval", "rng_for", "usage_summary"]

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
LEVEL = 0.95
_CHUNK_ELEMENTS = 4_000_000

MICRO_LABEL = "micro: mean over all questions (each source weighted by its question count)"
MACRO_LABEL = "macro: unweighted mean of the per-source means"
OUTCOME_LABELS: tuple[str, ...] = (*(o.value for o in Outcome), "missing")
USAGE_FIELDS: tuple[str, ...] = ("prompt_tokens", "completion_tokens", "turns", "tool_calls")


class Estimate(NamedTuple):
    """A mean with its bootstrap interval."""

    mean: float
    ci_low: float
    ci_high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        """JSON form used in ``scores.json``."""
        return {"mean": self.mean, "ci_low": self.ci_low, "ci_high": self.ci_high, "n": self.n}


def rng_for(seed: int, name: str) -> np.random.Generator:
    """A generator seeded by ``seed`` and a stable hash of ``name`` (independent of PYTHONHASHSEED)."""
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def bootstrap_means(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``resamples`` means of ``values`` resampled with replacement.

    Resampling n questions with replacement is the same as drawing multinomial
    counts over the *distinct* values, so when values repeat (0/1 metrics, F1
    fractions) the cost is O(distinct x resamples) instead of O(n x resamples),
    with exactly the same distribution; 0/1 data reduce to one binomial draw.
    """
    n = len(values)
    if n == 0:
        return np.full(resamples, np.nan)
    levels, counts = np.unique(values, return_counts=True)
    if len(levels) <= 2 and np.all((levels == 0.0) | (levels == 1.0)):
        return rng.binomial(n, float(values.mean()), size=resamples) / n
    out = np.empty(resamples)
    if len(levels) * 4 <= n:
        probabilities = counts / n
        chunk = max(1, min(resamples, _CHUNK_ELEMENTS // len(levels)))
        for start in range(0, resamples, chunk):
            stop = min(resamples, start + chunk)
            out[start:stop] = rng.multinomial(n, probabilities, size=stop - start) @ levels / n
        return out
    chunk = max(1, min(resamples, _CHUNK_ELEMENTS // n))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = values[idx].mean(axis=1)
    return out


def percentile_interval(point: float, boots: np.ndarray) -> tuple[float, float]:
    """The central ``LEVEL`` interval of bootstrap draws (a point when the data are constant)."""
    if np.isnan(point):
        return (float("nan"), float("nan"))
    low, high = np.quantile(boots, [(1 - LEVEL) / 2, 1 - (1 - LEVEL) / 2])
    return (float(low), float(high))


def estimate(values: Sequence[float] | np.ndarray, *, resamples: int = DEFAULT_RESAMPLES,
             seed: int = DEFAULT_SEED, name: str = "") -> Estimate:
    """Mean of ``values`` with a 95% percentile bootstrap CI."""
    array = np.asarray(values, dtype=float)
    if len(array) == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    point = float(array.mean())
    if np.ptp(array) == 0:
        return Estimate(point, point, point, len(array))
    low, high = percentile_interval(point, bootstrap_means(array, resamples, rng_for(seed, name)))
    return Estimate(point, low, high, len(array))


def _group(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(str(row["source"]), []).append(row)
    return dict(sorted(groups.items()))


class Clusters(NamedTuple):
    """One source's rollouts in (id, sample) order, and where each question's samples start."""

    rows: list[Mapping[str, Any]]
    starts: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of(cls, members: Sequence[Mapping[str, Any]]) -> Clusters:
        """Order ``members`` by (id, sample) and find each question's run of rows."""
        ordered = sorted(members, key=lambda r: (str(r["id"]), int(r.get("sample", 0))))
        ids = [str(r["id"]) for r in ordered]
        starts = np.array([i for i in range(len(ids)) if i == 0 or ids[i] != ids[i - 1]], dtype=np.intp)
        sizes = np.diff(np.append(starts, len(ids)))
        return cls(ordered, starts, sizes)

    def question_means(self, metric: str) -> np.ndarray:
        """One value per question: the mean of ``metric`` over its samples (the value itself when K = 1).

        A row without ``metric`` (a judge that gave no verdict) is left out of its question's mean,
        and a question with no row holding it is left out: it is not in that metric's denominator.
        """
        values = np.array([float(r.get(metric, np.nan)) for r in self.rows], dtype=float)
        if len(self.starts) == len(values):
            kept: np.ndarray = values[~np.isnan(values)]
            return kept
        present = ~np.isnan(values)
        counts = np.add.reduceat(present.astype(float), self.starts)
        sums = np.add.reduceat(np.where(present, values, 0.0), self.starts)
        means: np.ndarray = sums[counts > 0] / counts[counts > 0]
        return means

    def matrix(self, metric: str) -> np.ndarray:
        """Questions x K values of ``metric`` (empty when questions have different sample counts)."""
        if not len(self.sizes) or np.ptp(self.sizes) != 0 or any(metric not in r for r in self.rows):
            return np.empty((0, 0))
        return np.array([float(r[metric]) for r in self.rows], dtype=float).reshape(len(self.sizes), -1)


def _macro(per_source: dict[str, np.ndarray], resamples: int, seed: int, metric: str) -> Estimate:
    means = [float(v.mean()) for v in per_source.values() if len(v)]
    if not means:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    point = float(np.mean(means))
    if all(np.ptp(v) == 0 for v in per_source.values() if len(v)):
        return Estimate(point, point, point, len(means))
    boots = np.mean([bootstrap_means(v, resamples, rng_for(seed, f"{metric}/{source}"))
                     for source, v in per_source.items() if len(v)], axis=0)
    low, high = percentile_interval(point, boots)
    return Estimate(point, low, high, len(means))


_ERROR_LABELS = frozenset(o.value for o in ERROR_OUTCOMES)


def error_count(rows: Sequence[Mapping[str, Any]]) -> int:
    """Questions that ended in an error outcome (no answer was attempted; each scores 0)."""
    return sum(1 for row in rows if str(row["outcome"]) in _ERROR_LABELS)


def outcome_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """How many questions ended in each outcome (every label present, zeros included)."""
    counts = Counter(str(row["outcome"]) for row in rows)
    return {label: counts.get(label, 0) for label in OUTCOME_LABELS}


def usage_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Token, turn and tool-call totals and per-question means over questions that recorded usage."""
    used = [row["usage"] for row in rows if row.get("usage") is not None]
    summary: dict[str, Any] = {"questions_with_usage": len(used)}
    for field in USAGE_FIELDS:
        total = int(sum(int(u.get(field, 0)) for u in used))
        summary[field] = {"total": total, "mean": (total / len(used)) if used else None}
    return summary


BUDGET_STOP = "budget"
UNRECORDED = "unrecorded"


def hit_budget(row: Mapping[str, Any]) -> bool:
    """True when the episode ran out of budget: ``stop_reason`` budget (forced final answer) or outcome budget."""
    return row.get("stop_reason") == BUDGET_STOP or str(row.get("outcome")) == Outcome.BUDGET.value


def budget_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Questions that exhausted the budget, by the outcome they ended in, plus every stop reason's count.

    ``answered_after_budget`` are answers produced by the runner's forced final
    request; they are scored (their outcome is ``answered``) and their mean EM
    is given so a checkpoint that only answers when forced is visible.
    ``stop_reasons`` covers questions with a row (``unrecorded``: a
    ``predictions.jsonl`` run, which keeps no stop reason).
    """
    stopped = [row for row in rows if hit_budget(row)]
    by_outcome = {label: count for label, count in outcome_counts(stopped).items() if count}
    forced = [row for row in stopped if str(row.get("outcome")) == Outcome.ANSWERED.value]
    reasons = Counter(str(row.get("stop_reason") or UNRECORDED) for row in rows
                      if str(row.get("outcome")) != "missing")
    em_values = [float(row["em"]) for row in forced if "em" in row]
    return {
        "exhausted": len(stopped),
        "by_outcome": by_outcome,
        "answered_after_budget": len(forced),
        "answered_after_budget_em": (sum(em_values) / len(em_values)) if em_values else None,
        "stop_reasons": dict(sorted(reasons.items())),
    }


#: per question id: metric -> reducer name -> that question's value (``reducers.py``)
QuestionReductions = Mapping[str, Mapping[str, Mapping[str, float]]]


def _same_as_metric(reducer: str, samples: int) -> bool:
    """mean@K and pass@1 are the metric's own per-question mean (and maj@1 with one sample): same estimate."""
    return reducer in (f"mean@{samples}", "pass@1") or (samples == 1 and reducer == "maj@1")


def _reducer_estimates(columns: dict[tuple[str, str], dict[str, np.ndarray]], own: dict[str, dict[str, Any]],
                       scope: str, samples: int, resamples: int, seed: int) -> dict[str, dict[str, Any]]:
    """Estimates of every (metric, reducer) column of one scope (a source or ``__micro__``)."""
    out: dict[str, dict[str, Any]] = {}
    for (metric, reducer), per_scope in columns.items():
        if _same_as_metric(reducer, samples):
            out.setdefault(metric, {})[reducer] = own[metric]
        else:
            out.setdefault(metric, {})[reducer] = estimate(
                per_scope[scope], resamples=resamples, seed=seed, name=f"{metric}/{reducer}/{scope}").as_dict()
    return out


def aggregate(rows: Sequence[Mapping[str, Any]], metrics: Sequence[str], *,
              resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
              reductions: QuestionReductions | None = None, samples: int = 1) -> dict[str, Any]:
    """Per-source and overall estimates, outcome breakdown, usage and budget stops for scored rows.

    Each row is one rollout and needs ``id``, ``source``, ``outcome``, a float per
    metric name and optional ``sample``, ``usage`` mapping and ``stop_reason``. A
    question's value is the mean over its rows, and CIs resample questions.
    ``reductions`` (per question id: metric -> reducer -> value) adds the K-sample
    reducers under ``reducers``; ``samples`` (K) > 1 adds each metric's
    within-question variance share. The result is independent of row order.
    """
    groups = _group(rows)
    by_source: dict[str, Any] = {}
    arrays: dict[str, dict[str, np.ndarray]] = {m: {} for m in metrics}
    columns: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    matrices: dict[str, list[np.ndarray]] = {m: [] for m in metrics}
    for source, members in groups.items():
        clusters = Clusters.of(members)
        ordered = clusters.rows
        entry: dict[str, Any] = {"n": len(clusters.starts), "errors": error_count(ordered), "metrics": {}}
        for metric in metrics:
            values = clusters.question_means(metric)
            arrays[metric][source] = values
            entry["metrics"][metric] = estimate(values, resamples=resamples, seed=seed,
                                                name=f"{metric}/{source}").as_dict()
        if reductions is not None:
            ids = [str(ordered[i]["id"]) for i in clusters.starts]
            for metric in metrics:
                for reducer in reductions[ids[0]].get(metric, ()) if ids else ():
                    columns.setdefault((metric, reducer), {})[source] = np.array(
                        [reductions[qid][metric][reducer] for qid in ids], dtype=float)
            entry["reducers"] = _reducer_estimates(columns, entry["metrics"], source, samples, resamples, seed)
        if samples > 1:
            entry["variance"] = {}
            for metric in metrics:
                matrix = clusters.matrix(metric)
                matrices[metric].append(matrix)
                entry["variance"][metric] = within_variance_share(matrix)
        entry["outcomes"] = outcome_counts(ordered)
        entry["usage"] = usage_summary(ordered)
        entry["budget"] = budget_summary(ordered)
        by_source[source] = entry
    micro: dict[str, Any] = {}
    macro: dict[str, Any] = {}
    for metric in metrics:
        per_source = arrays[metric]
        everything = np.concatenate(list(per_source.values())) if per_source else np.array([])
        micro[metric] = estimate(everything, resamples=resamples, seed=seed,
                                 name=f"{metric}/__micro__").as_dict()
        macro[metric] = _macro(per_source, resamples, seed, metric).as_dict()
    micro_entry: dict[str, Any] = {"label": MICRO_LABEL, "n": sum(len(v) for v in arrays[metrics[0]].values())
                                   if metrics else 0, "errors": error_count(rows), "metrics": micro}
    macro_entry: dict[str, Any] = {"label": MACRO_LABEL, "sources": len(groups), "errors": error_count(rows),
                                   "metrics": macro}
    if reductions is not None:
        for per_scope in columns.values():
            per_scope["__micro__"] = np.concatenate([per_scope[s] for s in groups if s in per_scope])
        micro_entry["reducers"] = _reducer_estimates(columns, micro, "__micro__", samples, resamples, seed)
        macro_entry["reducers"] = {}
        for (metric, reducer), per_scope in columns.items():
            macro_entry["reducers"].setdefault(metric, {})[reducer] = (
                macro[metric] if _same_as_metric(reducer, samples) else
                _macro({s: v for s, v in per_scope.items() if s != "__micro__"}, resamples, seed,
                       f"{metric}/{reducer}").as_dict())
    if samples > 1:
        micro_entry["variance"] = {metric: within_variance_share(
            np.concatenate([m for m in found if m.size]) if any(m.size for m in found) else np.empty((0, 0)))
            for metric, found in matrices.items()}
    return {
        "bootstrap": {"resamples": resamples, "seed": seed, "level": LEVEL, "method": "percentile",
                      "strata": "source",
                      "clusters": "question" if samples == 1 else f"question (its {samples} samples resampled together)"},
        "by_source": by_source,
        "overall": {"micro": micro_entry, "macro": macro_entry},
        "outcomes": outcome_counts(rows),
        "usage": usage_summary(rows),
        "budget": budget_summary(rows),
    }
