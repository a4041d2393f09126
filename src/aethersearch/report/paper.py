"""The report's opening, laid out as the papers do: runs x metrics under the paper's names with CIs,
Search Score against GenScore, and per-hop curves.

Why here and not in the template: every value is read through the one
key -> label map (:mod:`aethersearch.report.metric_names`), so when the
metric set changes the table, the figures and the viewer follow together. The
point estimates are the published ones (``scores.json``, ``factorised.json``,
``probes.json`` exactly as written); the intervals are 95% percentile
bootstraps over questions: for the factorised metrics by recomputing
:func:`aethersearch.diagnostics.factorised.factorised_metrics` on resampled
``factorised_questions.jsonl`` rows (so the interval belongs to the same
definition as the point), for the probe rates over their 0/1 outcomes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from aethersearch.diagnostics.factorised import (
    FACTORISED_ROWS_FILE,
    episodes_from_rows,
    factorised_metrics,
    read_factorised_rows,
)
from aethersearch.diagnostics.probes_file import FACTORISED_FILE, PROBES_FILE, read_factorised, read_probes
from aethersearch.report.metric_names import PAPER_METRICS, PER_HOP_METRICS, QA_METRICS, PaperMetric, paper_metric
from aethersearch.scoring.aggregate import DEFAULT_SEED, estimate, percentile_interval, rng_for
from aethersearch.scoring.scores_file import Scores

__all__ = ["Cell", "FACTORISED_FILE", "FACTORISED_RESAMPLES", "PROBES_FILE", "RAW_TITLES",
    "RunMetrics", "run_metrics", "shown_columns"]

RAW_TITLES = {FACTORISED_FILE: "Factorised metrics", PROBES_FILE: "Probes (Forget / Lead-astray)"}
"""What each diagnostics file is called where the report shows it raw."""
FACTORISED_RESAMPLES = 200
"""Bootstrap draws for the factorised metrics' CIs: each draw recomputes every metric over all questions
(about 80 ms at 1,400 questions on these machines), so fewer draws than ``scores.json``'s 1,000."""


class Cell(NamedTuple):
    """A metric of one run: the published point and its 95% CI (``None`` where it cannot be drawn)."""

    mean: float
    low: float | None
    high: float | None


class RunMetrics(NamedTuple):
    """One run's row of the paper table and its per-hop values."""

    label: str
    n: int
    cells: dict[str, Cell | None]
    by_hops: dict[str, dict[str, float | None]]
    raw: dict[str, Any]
    """``factorised.json`` and ``probes.json`` as written, for the disclosure under the table."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _factorised_boots(run_dir: Path, keys: Sequence[str], resamples: int, seed: int) -> dict[str, np.ndarray]:
    """Bootstrap draws of each factorised metric, recomputed on questions resampled with replacement."""
    path = run_dir / FACTORISED_ROWS_FILE
    if not path.is_file():
        return {}
    episodes = episodes_from_rows(read_factorised_rows(path))
    if not episodes:
        return {}
    rng = rng_for(seed, "factorised")
    draws: dict[str, list[float]] = {key: [] for key in keys}
    for _ in range(resamples):
        sample = [episodes[i] for i in rng.integers(0, len(episodes), size=len(episodes))]
        values = factorised_metrics(sample)
        for key in keys:
            number = _number(values.get(key))
            draws[key].append(number if number is not None else math.nan)
    return {key: np.asarray(values) for key, values in draws.items()}


def _probe_cell(metric: PaperMetric, block: Mapping[str, Any], seed: int) -> Cell | None:
    point = _number(block.get(metric.where[-1]))
    if point is None:
        return None
    if metric.counts is None:
        return Cell(point, None, None)
    hits, total = (block.get(k) for k in metric.counts)
    if not isinstance(hits, int) or not isinstance(total, int) or total <= 0:
        return Cell(point, None, None)
    found = estimate([1.0] * hits + [0.0] * (total - hits), seed=seed, name=metric.label)
    return Cell(point, found.ci_low, found.ci_high)


def run_metrics(run_dir: Path, label: str, scores: Scores, *, resamples: int = FACTORISED_RESAMPLES,
                seed: int = DEFAULT_SEED) -> RunMetrics:
    """The paper-table row of one run: QA metrics from ``scores.json``, factorised metrics and probes when written."""
    run_dir = Path(run_dir)
    cells: dict[str, Cell | None] = {}
    for metric in QA_METRICS:
        found = scores.overall.micro.metrics.get(metric.where[-1])
        cells[metric.label] = (Cell(found.mean, found.ci_low, found.ci_high)
                               if found is not None and found.mean is not None else None)
    read = read_factorised(run_dir)  # through its record: a malformed file is refused, naming the field
    factorised = read.line() if read is not None else None
    # read through its record (a malformed file is refused, naming the field); the table looks metrics up by name
    probes = read_probes(run_dir).line() if (run_dir / PROBES_FILE).is_file() else None
    overall = factorised.get("overall", {}) if isinstance(factorised, dict) else {}
    wanted = [m.where[-1] for m in PAPER_METRICS if m.where[0] == "factorised"]
    boots = _factorised_boots(run_dir, wanted, resamples, seed) if overall else {}
    for metric in PAPER_METRICS:
        if metric.where[0] == "factorised":
            point = _number(overall.get(metric.where[-1]))
            draws = boots.get(metric.where[-1])
            if point is None:
                cells[metric.label] = None
            elif draws is not None and not np.all(np.isnan(draws)):
                low, high = percentile_interval(point, draws[~np.isnan(draws)])
                cells[metric.label] = Cell(point, low, high)
            else:
                cells[metric.label] = Cell(point, None, None)
        else:
            block = probes.get(metric.where[1], {}) if isinstance(probes, dict) else {}
            cells[metric.label] = _probe_cell(metric, block, seed) if isinstance(block, dict) else None
    by_hops: dict[str, dict[str, float | None]] = {}
    hops = factorised.get("by_hops", {}) if isinstance(factorised, dict) else {}
    for hop, block in hops.items():
        if isinstance(block, dict):
            by_hops[str(hop)] = {label: _number(block.get(paper_metric(label).where[-1])) for label in PER_HOP_METRICS}
    raw = {name: value for name, value in ((FACTORISED_FILE, factorised), (PROBES_FILE, probes)) if value is not None}
    return RunMetrics(label, scores.denominator, cells, by_hops, raw)


def shown_columns(rows: Sequence[RunMetrics]) -> list[PaperMetric]:
    """The QA metrics, then each paper metric at least one run has (a column of dashes helps no reader)."""
    return [*QA_METRICS, *(m for m in PAPER_METRICS if any(row.cells.get(m.label) is not None for row in rows))]
