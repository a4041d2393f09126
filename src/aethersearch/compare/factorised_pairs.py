"""Paired deltas of the factorised metrics between two sandbox runs of one release (``aether compare``).

Why a paired bootstrap that recomputes each metric: F1_GR, F1_KU and GenScore
are not means over questions (they are F1s over sets of questions, and GenScore
multiplies two of them by Knowledge Sufficiency), so the per-question paired
bootstrap of ``compare.paired`` does not apply. Instead each draw resamples the
*question ids* with replacement, once for both runs, and recomputes
:func:`~aethersearch.diagnostics.factorised.factorised_metrics` on each run's
rows of those questions (``factorised_questions.jsonl``): the interval belongs
to the same definition as the published point, and the pairing keeps what the
two checkpoints share (the questions' difficulty) out of the delta's spread.
The p-value is the bootstrap's two-sided share of draws on the other side of
0, never reported as 0 ((k + 1) / (B + 1)).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from aethersearch.compare.noise import NoiseFile, serving_noise_mark
from aethersearch.diagnostics.factorised import (
    FACTORISED_ROWS_FILE,
    FactorisedRow,
    episodes_from_rows,
    factorised_metrics,
    read_factorised_rows,
)
from aethersearch.scoring.aggregate import percentile_interval, rng_for

__all__ = ["FACTORISED_COMPARED", "compare_factorised"]

#: The paper's metrics compared between checkpoints (``factorised.json`` keys).
FACTORISED_COMPARED = ("pass_at_1", "knowledge_sufficiency", "search_score", "f1_good_refusal",
                       "f1_knowledge_utilisation", "gen_score")


def _rows(run_dir: Path) -> dict[str, FactorisedRow] | str:
    """A run's factorised rows by question id, or why they cannot be compared."""
    path = Path(run_dir) / FACTORISED_ROWS_FILE
    if not path.is_file():
        return f"{path} is missing: run `aether factorise` (or `aether eval`) on the run first"
    rows = read_factorised_rows(path)
    if any(row.sample is not None for row in rows):
        return f"{path} holds K samples per question; the paired comparison of factorised metrics takes K = 1"
    return {row.id: row for row in rows}


def _value(metrics: dict[str, Any], key: str) -> float:
    value = metrics.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def compare_factorised(run_a: Path, run_b: Path, *, resamples: int = 1000, seed: int = 0, alpha: float = 0.05,
                       noise: NoiseFile | None = None) -> dict[str, Any]:
    """Per metric: both points, the delta (b - a), its paired-bootstrap CI and p-value, and ``n``.

    ``noise`` (a run's ``noise.json`` measured on ``em``) adds the serving-noise
    floor to Pass@1, the one factorised metric that is a 0/1 correctness rate.
    A run without factorised rows, or with other questions, gives ``{"absent": why}``.
    """
    rows_a, rows_b = _rows(run_a), _rows(run_b)
    for rows in (rows_a, rows_b):
        if isinstance(rows, str):
            return {"absent": rows}
    assert isinstance(rows_a, dict) and isinstance(rows_b, dict)
    if set(rows_a) != set(rows_b):
        return {"absent": f"the runs' factorised rows cover different questions ({len(set(rows_a) ^ set(rows_b))} "
                          "differ): factorise both on the same release"}
    ids = sorted(rows_a)
    episodes_a = episodes_from_rows([rows_a[i] for i in ids])
    episodes_b = episodes_from_rows([rows_b[i] for i in ids])
    point_a, point_b = factorised_metrics(episodes_a), factorised_metrics(episodes_b)
    rng = rng_for(seed, "factorised-pairs")
    draws: dict[str, list[float]] = {key: [] for key in FACTORISED_COMPARED}
    for _ in range(resamples):
        picked = rng.integers(0, len(ids), size=len(ids))
        a = factorised_metrics([episodes_a[i] for i in picked])
        b = factorised_metrics([episodes_b[i] for i in picked])
        for key in FACTORISED_COMPARED:
            draws[key].append(_value(b, key) - _value(a, key))
    results: dict[str, Any] = {}
    for key in FACTORISED_COMPARED:
        a_value, b_value = _value(point_a, key), _value(point_b, key)
        delta = b_value - a_value
        boots = np.asarray(draws[key])
        boots = boots[np.isfinite(boots)]
        entry: dict[str, Any] = {"a": a_value, "b": b_value, "delta": delta, "n": len(ids),
                                 "resamples": int(len(boots))}
        if not math.isfinite(delta) or len(boots) == 0:
            entry.update(delta=None, ci_low=None, ci_high=None, p_value=None, significant=None,
                         why="undefined in a run (0/0: no refusal or no answer to score)")
        else:
            low, high = percentile_interval(delta, boots)
            p_value = 1.0 if np.ptp(boots) == 0 and delta == 0 else min(
                1.0, 2.0 * (min(int(np.sum(boots <= 0)), int(np.sum(boots >= 0))) + 1) / (len(boots) + 1))
            entry.update(ci_low=float(low), ci_high=float(high), p_value=p_value, significant=bool(p_value < alpha))
        results[key] = entry
    mark = (serving_noise_mark(results["pass_at_1"]["delta"], noise, None, "em", len(ids))
            if noise is not None and results["pass_at_1"]["delta"] is not None else {})
    if mark.get("noise_floor") is not None:  # Pass@1 is EM over the release: the em flip rate's floor
        results["pass_at_1"].update(mark)
    return {"n": len(ids), "resamples": resamples, "test": "paired bootstrap over question ids, metrics recomputed",
            "results": results}
