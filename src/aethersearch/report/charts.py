"""Report charts as inline SVG strings (matplotlib, Agg backend, no files, no fonts fetched).

Why SVG inline: the report must be one self-contained file that opens offline
years later; an SVG is text, scales, and keeps its labels searchable. Text is
kept as ``<text>`` (``svg.fonttype = none``), ids are salted with a fixed string
and the date metadata is dropped, so the same scores give the same bytes.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from aethersearch.scoring.scores_file import MetricEstimate, Scores

_PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
_OUTCOME_COLOURS = {"answered": "#55A868", "abstained": "#8172B3", "no_answer_tag": "#DD8452",
                    "budget": "#C44E52", "endpoint_error": "#8C8C8C", "tool_error": "#937860",
                    "request_rejected": "#B07AA1", "missing": "#222222"}


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "aethersearch"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def _finite(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def bars_by_source(runs: Mapping[str, Scores], metric: str) -> str:
    """Grouped bars: one group per source (plus micro/macro overall), one bar per run, 95% CI whiskers."""
    sources = sorted({s for scores in runs.values() for s in scores.by_source})
    groups = [*sources, "overall (micro)", "overall (macro)"]
    width = 0.8 / max(1, len(runs))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) * max(1, len(runs)) ** 0.5), 3.4))
    for index, (name, scores) in enumerate(runs.items()):
        means, lows, highs = [], [], []
        for group in groups:
            est: MetricEstimate | None
            if group.startswith("overall"):
                block = scores.overall.micro if "micro" in group else scores.overall.macro
                est = block.metrics.get(metric)
            else:
                source = scores.by_source.get(group)
                est = source.metrics.get(metric) if source is not None else None
            mean = _finite(est.mean if est is not None else None)
            means.append(mean)
            lows.append(max(0.0, mean - _finite(est.ci_low if est is not None else mean)))
            highs.append(max(0.0, _finite(est.ci_high if est is not None else mean) - mean))
        positions = [g + (index - (len(runs) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(positions, means, width, yerr=[lows, highs], capsize=2, label=name,
               color=_PALETTE[index % len(_PALETTE)])
    ax.set_xticks(range(len(groups)), groups, rotation=20, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} by source (95% bootstrap CI)")
    ax.legend(fontsize=8, ncols=min(4, len(runs)))
    ax.grid(axis="y", alpha=0.3)
    return _svg(fig)


def outcome_chart(runs: Mapping[str, Scores]) -> str:
    """Stacked horizontal bars: the share of questions ending in each outcome, per run."""
    labels = list(_OUTCOME_COLOURS)
    fig, ax = plt.subplots(figsize=(7.0, 0.6 + 0.45 * len(runs)))
    names = list(runs)
    left = [0.0] * len(names)
    for label in labels:
        shares = []
        for name in names:
            counts = runs[name].outcomes
            total = sum(counts.values()) or 1
            shares.append(counts.get(label, 0) / total)
        if any(shares):
            ax.barh(names, shares, left=left, label=label, color=_OUTCOME_COLOURS[label])
            left = [a + b for a, b in zip(left, shares, strict=True)]
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of release questions")
    ax.set_title("Outcomes")
    ax.invert_yaxis()
    ax.legend(fontsize=8, ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    return _svg(fig)


def _budget_share(scores: Scores) -> float:
    """Fraction of the release's questions whose episode ran out of budget."""
    total = scores.denominator
    return _finite(scores.budget.exhausted / total) if total else 0.0


def usage_chart(runs: Mapping[str, Scores]) -> str:
    """Mean tool calls, turns and tokens per question for each run, and the share that hit the budget."""
    fields = (("tool_calls", "mean tool calls"), ("turns", "mean turns"), ("prompt_tokens", "mean prompt tokens"),
              ("completion_tokens", "mean completion tokens"), ("budget", "% hit budget"))
    fig, axes = plt.subplots(1, len(fields), figsize=(11.0, 2.6))
    names = list(runs)
    for ax, (field, title) in zip(axes, fields, strict=True):
        if field == "budget":
            values = [100 * _budget_share(runs[n]) for n in names]
        else:
            values = [_finite(getattr(runs[n].usage, field).mean) for n in names]
        ax.bar(range(len(names)), values, color=[_PALETTE[i % len(_PALETTE)] for i in range(len(names))])
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return _svg(fig)


def delta_chart(pair: Mapping[str, Any], metric: str) -> str:
    """Paired delta (b - a) per source with its significance mark after Holm correction."""
    results = pair["results"]
    scopes = [s for s in results if metric in results[s]]
    deltas = [_finite(results[s][metric]["delta"]) for s in scopes]
    colours = ["#55A868" if results[s][metric]["significant"] and d > 0 else
               "#C44E52" if results[s][metric]["significant"] else "#8C8C8C" for s, d in zip(scopes, deltas,
                                                                                               strict=True)]
    fig, ax = plt.subplots(figsize=(6.5, 0.6 + 0.4 * len(scopes)))
    ax.barh(scopes, deltas, color=colours)
    ax.axvline(0, color="black", linewidth=0.8)
    for y, (scope, delta) in enumerate(zip(scopes, deltas, strict=True)):
        mark = "*" if results[scope][metric]["significant"] else ""
        ax.text(delta, y, f" {delta:+.3f}{mark}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"delta {metric} ({pair['b']} - {pair['a']}); * = significant after Holm")
    return _svg(fig)


def training_curve(history: Sequence[Mapping[str, Any]], metric_keys: Sequence[str]) -> str:
    """One line per metric key over checkpoint steps (the periodic-evaluation curve)."""
    fig, ax = plt.subplots(figsize=(7.0, 3.2))
    steps = [_finite(row.get("step")) for row in history]
    for index, key in enumerate(metric_keys):
        values = [_finite(row.get("metrics", {}).get(key)) for row in history]
        ax.plot(steps, values, marker="o", label=key, color=_PALETTE[index % len(_PALETTE)])
    ax.set_xlabel("checkpoint step")
    ax.set_ylabel("score")
    ax.set_ylim(0, 1)
    ax.set_title("Training-time evaluation on the frozen split")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncols=2)
    return _svg(fig)


def correct_histogram_chart(counts: Mapping[int, int], samples: int, metric: str) -> str:
    """Bars of how many questions had c of K samples right (c = 0..K)."""
    fig, ax = plt.subplots(figsize=(max(4.0, 0.5 * (samples + 1) + 2), 2.8))
    values = [counts.get(c, 0) for c in range(samples + 1)]
    ax.bar(range(samples + 1), values, color=_PALETTE[0])
    ax.set_xticks(range(samples + 1), [str(c) for c in range(samples + 1)])
    ax.set_xlabel(f"c: samples right of {samples} ({metric})")
    ax.set_ylabel("questions")
    ax.set_title(f"c of {samples} correct per question")
    ax.grid(axis="y", alpha=0.3)
    return _svg(fig)
