"""Validation metric keys as the trainers log them, so an ``evaluate()`` dict drops into their loggers.

* Search-R1's verl fork: ``val/test_score/{data_source}`` (mean reward = EM per source).
* current verl: ``val-core/{data_source}/reward/mean@1`` (one sample per prompt).
* plus one overall key in each style, under the pseudo-source ``all`` (micro mean
  over every question, the same "overall" ``aether score`` reports).
"""

from __future__ import annotations

from typing import Any, Literal

from aethersearch.errors import ConfigError

Style = Literal["searchr1", "verl", "both"]
STYLES: tuple[str, ...] = ("searchr1", "verl", "both")
OVERALL = "all"
SEARCHR1_KEY = "val/test_score/{source}"
VERL_KEY = "val-core/{source}/reward/mean@1"


def check_style(style: str) -> None:
    """``ConfigError`` for an unknown key style, naming the valid ones."""
    if style not in STYLES:
        raise ConfigError(f"unknown metric key style {style!r}", fix=f"use one of: {', '.join(STYLES)}")


def validation_metrics(scores: dict[str, Any], style: str = "both", metric: str = "em") -> dict[str, float]:
    """The per-source and overall mean of ``metric`` from a ``scores.json`` dict, keyed in ``style``."""
    check_style(style)
    means = {source: float(entry["metrics"][metric]["mean"]) for source, entry in scores["by_source"].items()}
    means[OVERALL] = float(scores["overall"]["micro"]["metrics"][metric]["mean"])
    templates = {"searchr1": (SEARCHR1_KEY,), "verl": (VERL_KEY,), "both": (SEARCHR1_KEY, VERL_KEY)}[style]
    return {template.format(source=source): value for template in templates for source, value in means.items()}
