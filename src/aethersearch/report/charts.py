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
from typing import Any, Protocol

import matplotlib

__all__ = ["CurvePoint", "bars_by_source", "budget_curve_chart", "correct_histogram_chart", "decoupling_chart",
    "delta_chart", "outcome_chart", "per_hop_chart", "risk_coverage_chart", "risk_label", "training_curve",
    "usage_chart"]

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from aethersearch.scoring.scores_file import MetricEstimate, Scores

#: Okabe & Ito's palette, which readers with any common colour-vision deficiency can tell apart; points
#: and lines also differ by marker, so no figure depends on colour alone.
_PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_OUTCOME_COLOURS = {"answered": "#009E73", "abstained": "#CC79A7", "no_answer_tag": "#E69F00",
                    "budget": "#D55E00", "endpoint_error": "#999999", "tool_error": "#56B4E9",
                    "request_rejected": "#F0E442", "missing": "#000000"}


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "aethersearch"}):
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def _legend(ax: Any, *, fontsize: int = 8, below: bool = False, ncols: int = 4) -> None:
    """Place ``ax``'s legend outside its plotting area (right of it, or ``below`` it), never over the data.

    Why one place: matplotlib's default ``loc="best"`` overlaps bars or lines whenever no corner is free,
    and a legend over a bar hides the figure it explains. The report's render check fails on any
    legend that intersects its axes (``tests/report/test_report.py``).
    """
    if below:
        ax.legend(fontsize=fontsize, ncols=ncols, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    else:
        ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


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
    _legend(ax)
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
    _legend(ax, below=True)
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
    colours = ["#0072B2" if results[s][metric]["significant"] and d > 0 else
               "#D55E00" if results[s][metric]["significant"] else "#999999" for s, d in zip(scopes, deltas,
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


def risk_label(name: str, risk: Mapping[str, Any]) -> str:
    """A run's legend entry: AURC, the signal and, for stated confidence, ECE and how many answers stated one."""
    label = f"{name} (AURC {_finite(risk['aurc']):.3f}, {risk['signal']}"
    if risk.get("ece") is not None:
        label += f", ECE {risk['ece']:.3f}"
    stated = risk.get("stated")
    if stated:
        label += f", {stated['stated']}/{stated['answered']} stated"
    return label + ")"


def risk_coverage_chart(runs: Mapping[str, Scores]) -> str:
    """Selective risk against coverage, one line per run (``scores.json`` ``risk_coverage``), AURC in the legend."""
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for index, (name, scores) in enumerate(runs.items()):
        risk = scores.risk_coverage
        if not risk or not risk["curve"]["coverage"]:
            continue
        ax.step(risk["curve"]["coverage"], risk["curve"]["risk"], where="post",
                color=_PALETTE[index % len(_PALETTE)], label=risk_label(name, risk))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("coverage (share of questions answered, most confident first)")
    ax.set_ylabel("risk (error rate among answered)")
    ax.set_title("Risk–coverage (lower is better)")
    if ax.get_legend_handles_labels()[0]:  # no run answered anything: an empty chart, not an empty legend
        _legend(ax, fontsize=7)
    ax.grid(alpha=0.3)
    return _svg(fig)


def budget_curve_chart(runs: Mapping[str, Scores]) -> str:
    """Accuracy at each tool-call budget read off each run (``--budget-curve``), with 95% CI bands."""
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for index, (name, scores) in enumerate(runs.items()):
        curve = scores.budget_curve
        if not curve:
            continue
        metric = curve["metrics"][0]
        points = curve["axes"]["tool_calls"]["points"]
        x = [p["budget"] for p in points]
        colour = _PALETTE[index % len(_PALETTE)]
        ax.plot(x, [_finite(p[metric]["mean"]) for p in points], marker="o", color=colour, label=name)
        ax.fill_between(x, [_finite(p[metric]["ci_low"]) for p in points],
                        [_finite(p[metric]["ci_high"]) for p in points], color=colour, alpha=0.15)
    ax.set_xlabel("tool-call budget")
    ax.set_ylabel("accuracy (exhausted = not answered)")
    ax.set_title("Accuracy against budget")
    ax.set_ylim(0, 1)
    _legend(ax, fontsize=7)
    ax.grid(alpha=0.3)
    return _svg(fig)


class CurvePoint(Protocol):
    """A point of a training curve: a ``watch`` history row (:class:`~aethersearch.compare.watch.HistoryRow`)."""

    @property
    def step(self) -> int | None:
        """The checkpoint's training step."""
        ...

    @property
    def metrics(self) -> dict[str, Any] | None:
        """The checkpoint's figures by name."""
        ...


def training_curve(history: Sequence[CurvePoint], metric_keys: Sequence[str]) -> str:
    """One line per metric key over checkpoint steps (the periodic-evaluation curve)."""
    fig, ax = plt.subplots(figsize=(7.0, 3.2))
    steps = [_finite(row.step) for row in history]
    for index, key in enumerate(metric_keys):
        values = [_finite((row.metrics or {}).get(key)) for row in history]
        ax.plot(steps, values, marker="o", label=key, color=_PALETTE[index % len(_PALETTE)])
    ax.set_xlabel("checkpoint step")
    ax.set_ylabel("score")
    ax.set_ylim(0, 1)
    ax.set_title("Training-time evaluation on the frozen split")
    ax.grid(alpha=0.3)
    _legend(ax)
    return _svg(fig)


def _whiskers(cell: Any) -> tuple[float, float]:
    if cell is None or cell.low is None or cell.high is None:
        return (0.0, 0.0)
    return (max(0.0, cell.mean - cell.low), max(0.0, cell.high - cell.mean))


def decoupling_chart(points: Mapping[str, tuple[Any, Any]], x_label: str, y_label: str) -> str:
    """One point per run, ``x_label`` against ``y_label`` with 95% CI whiskers and the diagonal.

    WebDetective's reading: a run far below the diagonal searches well but
    does not turn what it found into answers (search and synthesis decoupled).
    ``points`` maps a run label to its two cells (each ``mean``/``low``/``high``).
    """
    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    ax.plot([0, 1], [0, 1], linestyle="--", color="#999999", linewidth=0.8, label="x = y")
    for index, (label, (x, y)) in enumerate(points.items()):
        xerr, yerr = _whiskers(x), _whiskers(y)
        ax.errorbar([x.mean], [y.mean], xerr=[[xerr[0]], [xerr[1]]], yerr=[[yerr[0]], [yerr[1]]],
                    fmt=_MARKERS[index % len(_MARKERS)], markersize=8, capsize=3,
                    color=_PALETTE[index % len(_PALETTE)], label=label)
        ax.annotate(label, (x.mean, y.mean), textcoords="offset points", xytext=(6, 6), fontsize=8)
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title(f"{x_label} vs {y_label} (95% CI)")
    ax.grid(alpha=0.3)
    _legend(ax)
    return _svg(fig)


def per_hop_chart(curves: Mapping[str, Mapping[str, Mapping[str, float | None]]], metrics: Sequence[str]) -> str:
    """One panel per metric: its value at each hop count, one line (and marker) per run.

    ``curves`` maps a run label to ``{hop: {metric: value}}``; hops are drawn in numeric order.
    """
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.0 * len(metrics), 2.9), sharey=True, squeeze=False)
    hops = sorted({h for by_hop in curves.values() for h in by_hop}, key=lambda h: (not h.isdigit(), int(h) if
                                                                                   h.isdigit() else 0, h))
    for ax, metric in zip(axes[0], metrics, strict=True):
        for index, (label, by_hop) in enumerate(curves.items()):
            xs = [h for h in hops if by_hop.get(h, {}).get(metric) is not None]
            ax.plot(xs, [_finite(by_hop[h][metric]) for h in xs], marker=_MARKERS[index % len(_MARKERS)],
                    color=_PALETTE[index % len(_PALETTE)], label=label)
        ax.set_title(metric, fontsize=9)
        ax.set_xlabel("hops")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    _legend(axes[0][-1], fontsize=7)
    fig.tight_layout()
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
