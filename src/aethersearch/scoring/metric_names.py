"""The one list of WebDetective diagnostic keys: their display label, the paper's name and formula.

Why one module: ``factorised.json``, ``probes.json``, the CLI table, the HTML
report and the docs page (``docs/webdetective-metrics.md``) all name these
metrics, and a key that meant one thing in the scorer and another in the
viewer would print a wrong number under a published name. Readers (the report,
other tools) take labels and definitions from here, never from their own copy.

``paper`` is the name WebDetective (arXiv:2510.05137) prints for the figure
when our formula is the paper's (as its results table pins it, see the docs
page); ``None`` marks a convention of this project, reported under its own
name and never under the paper's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["DOCS_PAGE", "FACTORISED", "MetricName", "PROBES", "SETS", "definitions", "label"]


class MetricName(NamedTuple):
    """One reported key: what it is called on screen, in the paper (or ``None``), and its formula."""

    key: str
    label: str
    paper: str | None
    formula: str


#: Factorised metrics (``factorised.json``), in display order.
FACTORISED: tuple[MetricName, ...] = (
    MetricName("pass_at_1", "Pass@1", "Pass@1", "|C| / |Q| (exact match, or the LLM judge's verdict)"),
    MetricName("knowledge_sufficiency", "Knowledge Sufficiency", "Knowledge Sufficiency",
               "|S| / |Q|; S = questions whose reference-chain hops were all served by tools or confirmed "
               "parametric"),
    MetricName("search_score", "Search Score", "Search Score",
               "mean over Q of a 0/1 score: 1 when served hops plus confirmed parametric hops connect the "
               "subject to the answer by some route (reference chain or a recorded alternative path), at least "
               "one hop served by a tool"),
    MetricName("evidence_coverage", "Evidence coverage", None,
               "mean over Q of |E ∩ (served ∪ parametric)| / |E| on the reference chain (partial credit; "
               "never below Knowledge Sufficiency)"),
    MetricName("search_only_sufficiency", "Sufficiency by tools alone", None,
               "share of Q whose reference chain was all served by tools"),
    MetricName("f1_good_refusal", "Good-Refusal F1 (F1_GR)", "F1_GR",
               "2|R ∩ I| / (|R| + |I|); undefined (null) when |R| + |I| = 0 (project convention)"),
    MetricName("f1_knowledge_utilisation", "Knowledge-Utilisation F1 (F1_KU)", "F1_KU",
               "2|C ∩ S| / (|A| + |S|): precision over every answered question, recall over S"),
    MetricName("f1_knowledge_utilisation_on_sufficient", "F1_KU with precision on S only", None,
               "2|C ∩ S| / (|A ∩ S| + |S|) (this project's earlier variant; does not penalise confident "
               "answers without the evidence)"),
    MetricName("gen_score", "GenScore", "GenScore",
               "(F1_GR + F1_KU) / 2 × Knowledge Sufficiency; F1_KU × Knowledge Sufficiency when F1_GR is "
               "undefined (project convention)"),
    MetricName("knowledge_score", "KnowledgeScore", None, "= Knowledge Sufficiency (the factor in GenScore)"),
    MetricName("refusal_rate", "Refusal rate", None, "|R| / |Q|"),
)

#: Knowledge-degradation probes (``probes.json``), in display order.
PROBES: tuple[MetricName, ...] = (
    MetricName("forget_rate", "Forget", "Forget",
               "|F| / |S \\ C|; F = sufficient-evidence failures whose failing hop the model answers correctly "
               "without search"),
    MetricName("lead_astray_rate", "Lead-astray", "Lead-astray",
               "|L| / |S \\ C|; L = sufficient-evidence failures answered correctly when re-asked with only the "
               "hop statements served in their own trajectory"),
    MetricName("forget_minus_lead_astray", "Forget − Lead-astray", None,
               "forget_rate − lead_astray_rate (both over the same failures)"),
    MetricName("known_hop_forget_rate", "Known-hop forget rate", None,
               "forgotten hops / hops known in isolation (every known hop, also of questions answered "
               "correctly; this project's earlier Forget rate)"),
    MetricName("distractor_rate", "Distractor robustness", None,
               "questions answered correctly clean but wrongly with seeded corpus distractors injected, among "
               "those whose evidence the noisy run still gathered (this project's robustness probe)"),
)

#: Sets used in the formulas.
SETS: Mapping[str, str] = {
    "Q": "scored questions (endpoint/tool error outcomes excluded, counted as n_errors)",
    "S": "evidence sufficient on the reference chain; I = Q \\ S",
    "R": "refused (outcome abstained)",
    "A": "answered (outcome answered; Q = A ∪ R)",
    "C": "answered correctly",
    "E": "one item per reference hop, named by the page v(i-1) that states the link to v(i)",
}

DOCS_PAGE = "docs/webdetective-metrics.md"


def definitions() -> dict[str, str]:
    """Key -> formula, with the sets and the docs page: what ``factorised.json`` carries as ``definitions``."""
    out = {m.key: m.formula + ("" if m.paper else " [project convention]") for m in FACTORISED}
    out.update({f"set {name}": text for name, text in SETS.items()})
    out["docs"] = DOCS_PAGE
    return out


def label(key: str) -> str:
    """The display label of a key (the key itself when it is not listed)."""
    for metric in (*FACTORISED, *PROBES):
        if metric.key == key:
            return metric.label
    return key
