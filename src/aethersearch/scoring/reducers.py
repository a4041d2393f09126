"""Reducers over the K samples of a question: mean@K, pass@k (k = 1..K) and maj@K.

Why here, apart from the metrics: a metric scores one answer; a reducer turns a
question's K scored samples into one number, the same way for every metric
(answer metrics, factorised metrics, probes), so they live in one place and are
applied at the aggregation level, never inside a metric.

* ``mean@K``: the mean of the K sample values: the unbiased estimate of the
  expected single-sample score (what WebDetective's Pass@1 means for a sampled
  policy, and what verl logs as ``reward/mean@N``). Equal to ``pass@1`` for a 0/1 metric.
* ``pass@k``: the probability that at least one of k samples drawn without
  replacement from the K is correct, with the unbiased estimator of Chen et al.
  (2021, "Evaluating Large Language Models Trained on Code", eq. 1 and its
  numerically stable product form): ``1 - C(K-c, k) / C(K, k)`` for c correct of
  K. Defined for the 0/1 metrics only (``BINARY_METRICS``); a continuous metric
  (F1) has no "correct" and gets mean@K and maj@K.
* ``maj@K``: the metric's value on the majority answer. Samples vote with their
  answer normalised as Search-R1's ``qa_em`` does (:func:`aethersearch.text.normalize_answer`);
  a sample with no extracted answer (an error, no answer tag, budget) votes for
  "no answer", which scores 0. **Ties** go to the tied answer whose first vote
  came earliest (lowest sample index): deterministic, and it depends on the
  sample order only, never on the answers' text or on gold.

Set-level figures (WebDetective's F1_GR, F1_KU, GenScore, Knowledge Sufficiency,
Search Score; the probes' rates) are not per-question values, so they are
reduced one level up: each sample index k is one replicate of the whole
evaluation (sample k of every question), the figure is computed on each
replicate as for a one-sample run, and the K results are averaged
(:func:`mean_over_samples`): Pass@1 becomes mean@K, and F1_GR, F1_KU and
GenScore become their mean over the K replicates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aethersearch.errors import ConfigError
from aethersearch.text import normalize_answer

__all__ = [
    "MEAN",
    "MAJ",
    "PASS",
    "SAMPLE_MEAN_RULE",
    "majority_index",
    "mean_over_samples",
    "parse_reducer",
    "pass_at_k",
    "question_summary",
    "reducer_names",
    "reducer_value",
    "within_variance_share",
]

MEAN = "mean"
PASS = "pass"
MAJ = "maj"
_REDUCER = re.compile(r"^(mean|pass|maj)@([1-9][0-9]*)$")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s unbiased pass@k for ``c`` correct of ``n`` samples: ``1 - C(n-c, k) / C(n, k)``.

    Computed as ``1 - prod_{i=n-c+1..n} (1 - k / i)`` (their stable form: no huge binomials).
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def majority_index(predictions: Sequence[str | None]) -> int:
    """The index of the sample that carries the majority answer (first vote of the winner; ties: earliest).

    ``None`` (no extracted answer) is a vote for "no answer" like any other.
    """
    if not predictions:
        raise ValueError("majority vote over no samples")
    votes: dict[str | None, int] = {}
    first: dict[str | None, int] = {}
    for index, prediction in enumerate(predictions):
        key = None if prediction is None else normalize_answer(prediction)
        votes[key] = votes.get(key, 0) + 1
        first.setdefault(key, index)
    winner = min(votes, key=lambda answer: (-votes[answer], first[answer]))
    return first[winner]


def reducer_names(samples: int, binary: bool) -> list[str]:
    """The reducer keys of a metric in a run of K samples, in table order: ``mean@K``, ``pass@1..K``, ``maj@K``."""
    passes = [f"pass@{k}" for k in range(1, samples + 1)] if binary else []
    return [f"mean@{samples}", *passes, f"maj@{samples}"]


def parse_reducer(name: str) -> tuple[str, int]:
    """``"pass@3"`` -> ``("pass", 3)``; a clear error for anything else."""
    match = _REDUCER.match(name)
    if match is None:
        raise ConfigError(f"unknown reducer {name!r}",
                          fix="use mean@K, pass@k or maj@K (e.g. pass@1, mean@5, maj@5), as scores.json names them")
    return match.group(1), int(match.group(2))


def reducer_value(name: str, *, samples: int, mean: float, correct: int | None, majority: float) -> float:
    """One question's value of reducer ``name`` from its K-sample summary (mean, c of K, majority's value)."""
    kind, k = parse_reducer(name)
    if kind == PASS:
        if correct is None:
            raise ConfigError(f"{name} needs a 0/1 metric (it counts correct samples)",
                              fix="use mean@K or maj@K for a continuous metric such as f1")
        if k > samples:
            raise ConfigError(f"{name} needs at least {k} samples per question; this run has {samples}",
                              fix=f"use pass@1..pass@{samples}")
        return pass_at_k(samples, correct, k)
    if k != samples:
        raise ConfigError(f"{name}: this run has K = {samples} samples per question",
                          fix=f"use {kind}@{samples}")
    return mean if kind == MEAN else majority


def question_summary(values: Sequence[Mapping[str, float]], predictions: Sequence[str | None],
                     metrics: Sequence[str], binary: frozenset[str]) -> tuple[dict[str, float], dict[str, int],
                                                                                dict[str, float], int]:
    """A question's K scored samples -> (mean per metric, c of K per 0/1 metric, maj@K per metric, majority index)."""
    k = len(values)
    means = {m: math.fsum(v[m] for v in values) / k for m in metrics}
    correct = {m: int(sum(v[m] >= 0.5 for v in values)) for m in metrics if m in binary}
    chosen = majority_index(predictions)
    no_answer = predictions[chosen] is None
    majority = {m: 0.0 if no_answer else values[chosen][m] for m in metrics}
    return means, correct, majority, chosen


def within_variance_share(values: np.ndarray) -> dict[str, float | None]:
    """How much of the variance of the mean@K estimate is sampling noise within questions.

    ``values`` is questions x K. With ``s_w`` the mean within-question variance
    (ddof 1) and ``v`` the variance of the question means (ddof 1), the variance of
    the overall mean is ``v / n`` and its within-question part is ``s_w / K / n``; the
    share is ``(s_w / K) / v`` (clipped to [0, 1]). Near 1: more samples per question
    narrow the CI; near 0: only more questions do. None with K = 1 or < 2 questions.
    """
    n, k = values.shape if values.ndim == 2 else (0, 0)
    if n < 2 or k < 2:
        return {"share": None, "within_variance": None, "between_variance": None}
    within = float(values.var(axis=1, ddof=1).mean())
    means_variance = float(values.mean(axis=1).var(ddof=1))
    between = max(0.0, means_variance - within / k)
    share = 0.0 if means_variance == 0 else min(1.0, (within / k) / means_variance)
    return {"share": share, "within_variance": within, "between_variance": between}


SAMPLE_MEAN_RULE = ("each figure computed on every sample index's episodes (one replicate of the evaluation per "
                    "sample k) and averaged over the K replicates; counts are per replicate (their mean); a figure "
                    "undefined (null) in some replicates is the mean of the others; pass_at_1 is mean@K")


def mean_over_samples(results: Sequence[Any]) -> Any:
    """The mean over K same-shaped results (nested dicts of figures) of every number in them.

    Numbers (bools excluded) average over the replicates where they are defined
    (not None); a value None in every replicate stays None; anything else (text,
    lists, definitions) is taken from the first replicate.
    """
    first = results[0]
    if isinstance(first, Mapping):
        keys = list(first)
        return {key: mean_over_samples([r.get(key) if isinstance(r, Mapping) else None for r in results])
                for key in keys}
    if isinstance(first, (int, float)) and not isinstance(first, bool) or first is None:
        numbers = [float(v) for v in results if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if not numbers:
            return first
        return math.fsum(numbers) / len(numbers)
    return first
