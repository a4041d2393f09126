"""Lead-astray, as WebDetective describes it: the agent's own noisy trajectory derails it.

WebDetective (arXiv:2510.05137) separates two ways an agent loses knowledge it
had: Forget (``forget.py``) and Lead-astray, failures where the noise of
the model's *own* trajectory (irrelevant pages, failed attempts) derails it
although the clean evidence it gathered would have sufficed. So:

* eligible(q)    = q's evidence was sufficient (Knowledge Sufficiency) AND the
  run failed q (answered wrongly or refused; endpoint/tool errors excluded):
  the same failures Forget is a rate over;
* clean(q)       = the hop statements the run was served (any route's, see
  ``diagnostics.chain_evidence``), and nothing else;
* led_astray(q)  = eligible(q) AND the agent, re-asked with only clean(q),
  answers q correctly (the noise was what stood in the way).

lead_astray_rate = |led_astray| / |eligible| (``None`` when nothing is eligible).

*Re-asked* means the run's own agent, model, budget and decoding, through the
ordinary runner, in a :class:`CleanEvidenceEnvironment`: its tools serve only
clean(q), one page per hop page, whatever the query. So the re-ask follows the
agent's own protocol (a Search-R1 model still searches once; a no-LLM reader
still reads) and the one thing removed is the trajectory's noise. Which
sentence is "the hop statement" is this project's rule (the sentence of the
served page naming the next node; docs/webdetective-metrics.md).

The injected-distractor test is a probe of its own, the distractor robustness
probe (``distractors.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aethersearch.diagnostics.chain_evidence import ChainEvidence, edges_served
from aethersearch.diagnostics.factorised import EpisodeEvidence
from aethersearch.environment import ToolResult
from aethersearch.records import ERROR_OUTCOMES, Document, ToolCall, Trace

__all__ = ["CleanEvidenceEnvironment", "NO_PAGE", "clean_evidence", "lead_astray_summary", "sufficient_failures"]

NO_PAGE = "no such page: only the evidence served earlier in this question is available"


def clean_evidence(trace: Trace, chain: ChainEvidence, store: Any, *, masked: bool = True) -> list[Document]:
    """The hop statements ``trace`` was served, one document per stating page, in route order.

    A hop stated only by a link becomes the sentence "<page> links to <next>.",
    which is what the served link told the agent.
    """
    served = edges_served(trace, chain, store, masked=masked)
    texts: dict[str, list[str]] = {}
    links: dict[str, list[str]] = {}
    for route in chain.routes:
        for (page, target), statements in zip(route.edges, route.statements, strict=True):
            if (page, target) not in served:
                continue
            said = list(statements) or [f"{store.get(page).title} links to {store.get(target).title}."]
            bucket = texts.setdefault(page, [])
            bucket += [s for s in said if s not in bucket]
            if target not in links.setdefault(page, []):
                links[page].append(target)
    return [Document(id=page, title=store.get(page).title, text=" ".join(lines), links=links[page])
            for page, lines in texts.items()]


class CleanEvidenceEnvironment:
    """Tools that serve only a question's clean evidence: every search returns all of it, a visit one page."""

    def __init__(self, documents: Sequence[Document], tools: tuple[str, ...] = ("search", "visit")) -> None:
        self._documents = list(documents)
        self._tools = tools

    @property
    def tools(self) -> tuple[str, ...]:
        """The tools of the run being re-asked."""
        return self._tools

    async def search(self, query: str, k: int) -> ToolResult:
        """All of the clean evidence, whatever the query (it is at most one page per hop)."""
        call = ToolCall(tool="search", arguments={"query": query, "k": k},
                        returned_ids=[doc.id for doc in self._documents])
        return ToolResult(list(self._documents), call)

    async def visit(self, page: str) -> ToolResult:
        """The clean page with that id or title; any other page is refused."""
        wanted = page.strip().casefold()
        for doc in self._documents:
            if wanted in (doc.id.casefold(), doc.title.casefold()):
                return ToolResult([doc], ToolCall(tool="visit", arguments={"page": page}, returned_ids=[doc.id]))
        return ToolResult([], ToolCall(tool="visit", arguments={"page": page}, error=NO_PAGE))

    async def close(self) -> None:
        """Nothing to release."""


def sufficient_failures(episodes: Sequence[EpisodeEvidence]) -> list[str]:
    """Ids of the failures with sufficient evidence (S \\ C, errors excluded): Forget's and Lead-astray's denominator."""
    return sorted(ep.id for ep in episodes if ep.sufficient and not ep.correct and ep.outcome not in ERROR_OUTCOMES)


def lead_astray_summary(eligible: Sequence[str], reasked_correct: Mapping[str, bool],
                        served: Mapping[str, int]) -> dict[str, Any]:
    """``probes.json["lead_astray"]``: the rate over sufficient-evidence failures, its parts and ids.

    ``reasked_correct``: question id -> the clean re-ask answered correctly (a
    question the re-ask did not finish counts as not fixed); ``served``: the
    number of clean pages each eligible question was re-asked with.
    """
    led = [qid for qid in eligible if reasked_correct.get(qid, False)]
    return {
        "applicable": True,
        "n_eligible": len(eligible),
        "n_led_astray": len(led),
        "lead_astray_rate": len(led) / len(eligible) if eligible else None,
        "eligible_ids": list(eligible),
        "led_astray_ids": led,
        "clean_pages": {qid: served.get(qid, 0) for qid in eligible},
        "definition": "eligible = sufficient-evidence failures (|S \\ C|, errors excluded); led astray = eligible "
                      "and answered correctly when the run's agent is re-asked with only the hop statements its "
                      "own trajectory was served; rate = led astray / eligible",
    }
