"""The one mapping from a metric key on disk to the name a paper prints, shared by the report and the viewer.

Why one place: ``factorised.json``, ``probes.json`` and ``scores.json`` name
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


class PaperMetric(NamedTuple):
    """A metric as a paper prints it: its label, where its value is read, and what it means."""

    label: str
    where: tuple[str, ...]
    meaning: str
    counts: tuple[str, str] | None = None
    """For a probe rate: the keys of its numerator and denominator counts (its CI is drawn from them)."""


#: Runs x metrics table of the report, in WebDetective's column order.
PAPER_METRICS: tuple[PaperMetric, ...] = (
    PaperMetric("Pass@1", ("factorised", "pass_at_1"), "share of questions answered correctly"),
    PaperMetric("Knowledge Sufficiency", ("factorised", "knowledge_sufficiency"),
                "share of questions whose whole evidence chain was gathered or known"),
    PaperMetric("Search Score", ("factorised", "search_score"),
                "search credit, including partial search combined with parametric memory"),
    PaperMetric("F1_GR", ("factorised", "f1_good_refusal"), "Good-Refusal F1: refusing exactly when evidence is absent"),
    PaperMetric("F1_KU", ("factorised", "f1_knowledge_utilisation"),
                "Knowledge-Utilisation F1: answering correctly when evidence is present"),
    PaperMetric("GenScore", ("factorised", "gen_score"), "(F1_GR + F1_KU) / 2 x Knowledge Score"),
    PaperMetric("Forget", ("probes", "forget", "forget_rate"),
                "share of known hops lost in the full search context (Forget probe)",
                ("n_forgotten", "n_known_in_isolation")),
    PaperMetric("Lead-astray", ("probes", "lead_astray", "lead_astray_rate"),
                "share of otherwise solved questions that noise in the trajectory turned wrong",
                ("n_led_astray", "n_eligible")),
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
