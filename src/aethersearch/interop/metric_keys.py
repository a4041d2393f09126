"""Validation metric keys as the trainers log them, so an ``evaluate()`` dict drops into their loggers.

* Search-R1's verl fork: ``val/test_score/{data_source}`` (mean reward = EM per source).
* current verl: ``val-core/{data_source}/reward/mean@N`` (N = ``val_kwargs.n`` samples per prompt;
  here N is the run's K, ``--samples``, and the value is its mean@K).
* plus one overall key in each style, under the pseudo-source ``all`` (micro mean
  over every question, the same "overall" ``aether score`` reports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from aethersearch.errors import ConfigError

if TYPE_CHECKING:
    from aethersearch.scoring.scores_file import MetricEstimate, Scores

__all__ = ["OVERALL", "SEARCHR1_KEY", "STYLES", "Style", "VERL_KEY", "check_style", "validation_metrics"]

Style = Literal["searchr1", "verl", "both"]
STYLES: tuple[str, ...] = ("searchr1", "verl", "both")
OVERALL = "all"
SEARCHR1_KEY = "val/test_score/{source}"
VERL_KEY = "val-core/{source}/reward/mean@{samples}"


def check_style(style: str) -> None:
    """``ConfigError`` for an unknown key style, naming the valid ones."""
    if style not in STYLES:
        raise ConfigError(f"unknown metric key style {style!r}", fix=f"use one of: {', '.join(STYLES)}")


def _mean(estimate: MetricEstimate) -> float:
    return float("nan") if estimate.mean is None else float(estimate.mean)


def validation_metrics(scores: Scores, style: str = "both", metric: str = "em") -> dict[str, float]:
    """The per-source and overall mean of ``metric`` from a run's typed scores, keyed in ``style``."""
    check_style(style)
    means = {source: _mean(entry.metrics[metric]) for source, entry in scores.by_source.items()}
    means[OVERALL] = _mean(scores.overall.micro.metrics[metric])
    templates = {"searchr1": (SEARCHR1_KEY,), "verl": (VERL_KEY,), "both": (SEARCHR1_KEY, VERL_KEY)}[style]
    samples = scores.fingerprint.samples if scores.fingerprint is not None else 1
    return {template.format(source=source, samples=samples): value
            for template in templates for source, value in means.items()}
