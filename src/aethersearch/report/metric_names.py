"""The one mapping from a metric key on disk to the name a paper prints, shared by the report and the viewer.

Why here: labels and formulas come from ``scoring.metric_names`` (the one definition of
each key); this module adds only where the report reads each value. ``factorised.json``, ``probes.json`` and ``scores.json`` name
metrics by code keys (``f1_knowledge_utilisation``, ``lead_astray_rate``); a
reader expects the paper's names (F1_KU, Lead-astray). When the metric set
changes (a new key for the 0/1 Search Score, evidence coverage, c of K), the
change is one line here and every table, chart and trace page follows.

Each entry says where the value is read: ``("factorised", key)`` from a run's
``factorised.json`` overall block, ``("probes", "forget" | "lead_astray", key)``
from ``probes.json``, ``("scores", key)`` from ``scores.json`` (micro overall).
"""

from __future__ import annotations

from typing import NamedTuple

from aethersearch.scoring.metric_names import FACTORISED, PROBES

__all__ = ["ANSWER_METRICS", "DECOUPLING_AXES", "PAPER_METRICS", "PER_HOP_METRICS", "PaperMetric", "QA_METRICS",
    "paper_metric"]


class PaperMetric(NamedTuple):
    """A metric as a paper prints it: its label, where its value is read, and what it means."""

    label: str
    where: tuple[str, ...]
    meaning: str
    counts: tuple[str, str] | None = None
    """For a probe rate: the keys of its numerator and denominator counts (its CI is drawn from them)."""


_DEFINED = {m.key: m for m in (*FACTORISED, *PROBES)}


def _defined(key: str, where: tuple[str, ...], counts: tuple[str, str] | None = None) -> PaperMetric:
    """A metric as ``scoring.metric_names`` defines it (its paper name and formula), read from ``where``."""
    metric = _DEFINED[key]
    return PaperMetric(metric.paper or metric.label, where, metric.formula, counts)


#: Runs x metrics table of the report, in WebDetective's column order (names and formulas from
#: ``scoring.metric_names``, the one definition; only where each value is read lives here).
PAPER_METRICS: tuple[PaperMetric, ...] = (
    _defined("pass_at_1", ("factorised", "pass_at_1")),
    _defined("knowledge_sufficiency", ("factorised", "knowledge_sufficiency")),
    _defined("search_score", ("factorised", "search_score")),
    _defined("f1_good_refusal", ("factorised", "f1_good_refusal")),
    _defined("f1_knowledge_utilisation", ("factorised", "f1_knowledge_utilisation")),
    _defined("gen_score", ("factorised", "gen_score")),
    _defined("forget_rate", ("probes", "forget", "forget_rate"), ("n_forget", "n_eligible")),
    _defined("lead_astray_rate", ("probes", "lead_astray", "lead_astray_rate"), ("n_led_astray", "n_eligible")),
)

#: Answer metrics every scored run has (``scores.json``, micro overall): the table's first columns.
QA_METRICS: tuple[PaperMetric, ...] = (
    PaperMetric("EM", ("scores", "em"), "exact match after Search-R1's normalisation (its qa_em)"),
    PaperMetric("F1", ("scores", "f1"), "SQuAD token F1, max over gold aliases"),
)

#: Per-question metrics of ``scores.json`` as ``(key, label)``, the columns the viewer's question list shows.
ANSWER_METRICS: tuple[tuple[str, str], ...] = tuple((m.where[-1], m.label) for m in QA_METRICS)

#: The two axes of the decoupling figure (WebDetective: "search and synthesis are decoupled").
DECOUPLING_AXES: tuple[str, str] = ("Search Score", "GenScore")

#: Per-hop curves: these metrics of ``factorised.json``'s ``by_hops`` blocks.
PER_HOP_METRICS: tuple[str, ...] = ("Pass@1", "Knowledge Sufficiency", "Search Score", "GenScore")


def paper_metric(label: str) -> PaperMetric:
    """The entry for a paper label (a KeyError naming the labels when it is not one)."""
    for metric in (*QA_METRICS, *PAPER_METRICS):
        if metric.label == label:
            return metric
    raise KeyError(f"{label!r} is not a paper metric; known: {', '.join(m.label for m in (*QA_METRICS, *PAPER_METRICS))}")
