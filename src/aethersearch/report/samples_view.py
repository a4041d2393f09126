"""The report's view of a K-sample run: reducers with CIs, the variance share, and c of K per question.

Why its own module: the per-source table shows mean@K (a run's ``metrics``); a
sampled run also needs pass@k and maj@K beside it, how much of the CI is
sampling noise, and the distribution of c (how many of K samples were right) —
a checkpoint that is right 1 time in 5 on many questions is not the same as one
right 5 times in 5 on a few, even at the same mean@K.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aethersearch.report import charts
from aethersearch.scoring.scores_file import Scores

__all__ = ["HISTOGRAM_METRIC", "correct_histogram", "samples_view"]

#: the 0/1 metric whose c of K the histogram counts (Search-R1's EM)
HISTOGRAM_METRIC = "em"


def correct_histogram(scores: Scores, metric: str = HISTOGRAM_METRIC) -> dict[int, list[str]]:
    """Question ids by c, the number of the K samples right on ``metric`` (every c in 0..K present)."""
    by_c: dict[int, list[str]] = {c: [] for c in range(scores.samples + 1)}
    for row in scores.per_question:
        by_c[row.correct.get(metric, 0)].append(row.id)
    return by_c


def samples_view(scores: Scores, fmt: Callable[[Any], str], metric: str = HISTOGRAM_METRIC) -> dict[str, Any] | None:
    """Everything the report shows of a run's K samples (None for a one-sample run); ``fmt`` formats numbers."""
    if scores.samples <= 1 or metric not in scores.overall.micro.reducers:
        return None
    reducers = list(scores.overall.micro.reducers[metric])
    order = sorted(reducers, key=lambda name: (not name.startswith("mean"), name.startswith("maj"), name))

    def row(label: str, n: Any, block: Any, variance: Any) -> dict[str, Any]:
        cells = [{"mean": fmt(block[name].mean), "low": fmt(block[name].ci_low), "high": fmt(block[name].ci_high)}
                 for name in order]
        share = variance.get(metric) if variance else None
        return {"label": label, "n": n, "cells": cells,
                "share": fmt(share.share) if share is not None and share.share is not None else "—"}

    rows = [row(source, entry.n, entry.reducers[metric], entry.variance) for source, entry in scores.by_source.items()]
    micro = scores.overall.micro
    rows.append(row("overall (micro)", micro.n, micro.reducers[metric], micro.variance))
    by_c = correct_histogram(scores, metric)
    counts = {c: len(ids) for c, ids in by_c.items()}
    return {"k": scores.samples, "metric": metric, "reducers": order, "rows": rows,
            "histogram": [{"c": c, "count": counts[c], "ids": ids} for c, ids in by_c.items()],
            "chart": charts.correct_histogram_chart(counts, scores.samples, metric)}
