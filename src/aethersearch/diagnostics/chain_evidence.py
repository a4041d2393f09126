"""Which hops of a hint-free chain an agent was *told*, judged from the text it was served.

WebDetective's evidence chain for a path ``v0 -> v1 -> ... -> vn`` is the facts
along the path: hop i is evidenced by the page of ``v(i-1)``, which states the
link to ``v(i)``. So E has one item per hop (``n`` items, named by the page that
states them, ``v0..v(n-1)``); the answer page ``vn`` is not in E -- an agent that
reads the answer on ``v(n-1)`` has the whole chain.

A hop counts as gathered when some text served to the agent states it: the
statement is a sentence of ``v(i-1)``'s page (as the mask serves it) that
mentions ``v(i)`` (:func:`aethersearch.sandbox.serving.hop_statements`). Served
text is rebuilt from the trace with the very functions the sandbox served it
with (``sandbox.serving``): a ``visit`` served the masked page, a ``search`` hit
served a snippet for its query. A snippet that contains the statement counts;
a visit of ``v(i-1)`` always does. A hop whose page states it only by a link
(no sentence names ``v(i)``) is gathered by a visit of ``v(i-1)`` that served
that link. Nothing is credited by page id alone: a search hit on ``v(i-1)``
whose snippet does not contain the statement gathers nothing.

Outside the sandbox (``masked=False``: a plain search environment on a
hint-free release) every tool served the page's stored text in full.

**Routes.** The reference chain is one route from the subject ``v0`` to the
answer ``vn``; the release records the other equal-length ones
(``alternative_paths``). The same rule judges a hop of any route (the sentence
of ``u(j-1)``'s served page that names ``u(j)``,
:func:`aethersearch.sandbox.serving.route_statements`), so Search Score can
credit an agent that reached the answer by another valid path
(``docs/webdetective-metrics.md``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from aethersearch.errors import DataError
from aethersearch.records import DiagnosticsRow, Document, Trace
from aethersearch.sandbox.mask import ChainMask
from aethersearch.sandbox.serving import (
    hop_statements,
    render_page,
    route_statements,
    search_hit,
    states_hop,
)

__all__ = ["ChainEvidence", "Edge", "Route", "SERVING_TOOLS", "Served", "chain_evidence", "chain_mask",
    "edges_served", "hops_gathered", "route_found", "served_pages"]

SERVING_TOOLS = ("search", "visit", "access")


Edge = tuple[str, str]


class Route(NamedTuple):
    """One route ``u0..um`` from the subject to the answer, and per hop the sentences that state it."""

    path: tuple[str, ...]
    statements: tuple[tuple[str, ...], ...]

    @property
    def edges(self) -> tuple[Edge, ...]:
        """The hops ``(u(j-1), u(j))`` in order."""
        return tuple(zip(self.path[:-1], self.path[1:], strict=True))


class ChainEvidence(NamedTuple):
    """A question's chain: its mask, per hop the sentences that state it, and every route it records."""

    path: tuple[str, ...]
    mask: ChainMask
    statements: tuple[tuple[str, ...], ...]
    alternatives: tuple[Route, ...] = ()

    @property
    def evidence(self) -> tuple[str, ...]:
        """E: one item per hop, named by the page that states it (``v0..v(n-1)``)."""
        return self.path[:-1]

    @property
    def routes(self) -> tuple[Route, ...]:
        """The reference chain first, then the recorded alternative paths."""
        return (Route(self.path, self.statements), *self.alternatives)


class Served(NamedTuple):
    """One page as a tool served it to the agent."""

    tool: str
    doc_id: str
    text: str
    links: tuple[str, ...]


def chain_mask(row: DiagnosticsRow, store: Any) -> ChainMask:
    """The release's mask (``extra["mask"]``), else one that hides each chain page's title."""
    if "mask" in row.extra:
        return ChainMask.from_json(row.extra["mask"], origin="diagnostics.jsonl")
    missing = [p for p in row.path[1:] if p not in store]
    if missing:
        raise DataError("diagnostics.jsonl", f"question {row.id!r}: chain pages {missing} are not in the corpus",
                        fix="score against the corpus the release was constructed from")
    return ChainMask(row.path, {p: [store.get(p).title] for p in row.path[1:]})


def chain_evidence(row: DiagnosticsRow, store: Any) -> ChainEvidence:
    """The chain of a hint-free row with each hop's statements, read from ``store``."""
    if len(row.path) < 3:
        raise DataError("diagnostics.jsonl", f"question {row.id!r} has no multi-hop chain path ({row.path})",
                        field="path", fix="factorised chain evidence needs a hint-free release "
                                          "(construct writes paths of at least two hops)")
    missing = [p for p in row.path if p not in store]
    if missing:
        raise DataError("diagnostics.jsonl", f"question {row.id!r}: chain pages {missing} are not in the corpus",
                        fix="score against the corpus the release was constructed from (--corpus)")
    mask = chain_mask(row, store)
    pages = [store.get(p) for p in mask.path]
    alternatives = []
    for alternative in row.alternative_paths:
        if tuple(alternative) == mask.path:
            continue
        absent = [p for p in alternative if p not in store]
        if absent:
            raise DataError("diagnostics.jsonl", f"question {row.id!r}: alternative path pages {absent} are not "
                                                 "in the corpus", field="alternative_paths",
                            fix="score against the corpus the release was constructed from (--corpus)")
        route_pages = [store.get(p) for p in alternative]
        alternatives.append(Route(tuple(alternative), tuple(route_statements(mask, route_pages))))
    return ChainEvidence(mask.path, mask, tuple(hop_statements(mask, pages)), tuple(alternatives))


def served_pages(trace: Trace, store: Any, mask: ChainMask | None,
                 tools: Sequence[str] = SERVING_TOOLS) -> Iterator[Served]:
    """Every page text the agent was served by a successful call, rebuilt as the environment served it.

    A search snippet is rebuilt with the pages visited *before* that search
    (the sandbox quotes no sentence naming a page still locked then).
    """
    visited: set[str] = set()
    for step in trace.steps:
        for call in step.tool_calls:
            if call.error is not None or call.tool not in tools:
                continue
            query = str(call.arguments.get("query", ""))
            for doc_id in call.returned_ids:
                if doc_id in call.suppressed_ids or doc_id not in store:
                    continue
                doc: Document = store.get(doc_id)
                if mask is None:
                    yield Served(call.tool, doc_id, doc.text, tuple(doc.links))
                elif call.tool == "search":
                    hit = search_hit(mask, doc, query.strip(), visited)
                    yield Served(call.tool, doc_id, hit.text, ())
                else:
                    page = render_page(mask, doc)
                    yield Served(call.tool, doc_id, page.text, tuple(page.links))
            if call.tool == "visit":
                visited.update(d for d in call.returned_ids if d not in call.suppressed_ids)


def edges_served(trace: Trace, chain: ChainEvidence, store: Any, *, masked: bool = True,
                 tools: Sequence[str] = SERVING_TOOLS) -> frozenset[Edge]:
    """The hops, of any route of ``chain``, whose statement some served text contains.

    A hop stated only by a link (no sentence names the next page) is served by a
    visit of its page that served that link.
    """
    wanted = {edge: statements for route in chain.routes
              for edge, statements in zip(route.edges, route.statements, strict=True)}
    found: set[Edge] = set()
    for served in served_pages(trace, store, chain.mask if masked else None, tools):
        for (page, target), statements in wanted.items():
            if (page, target) in found:
                continue
            if states_hop(served.text, statements) or (
                    not statements and served.doc_id == page and target in served.links):
                found.add((page, target))
    return frozenset(found)


def hops_gathered(trace: Trace, chain: ChainEvidence, store: Any, *, masked: bool = True,
                  tools: Sequence[str] = SERVING_TOOLS) -> frozenset[str]:
    """The evidence items (hop pages ``v(i-1)``) of the reference chain whose statement some served text contains."""
    reference = set(Route(chain.path, chain.statements).edges)
    return frozenset(page for page, target in edges_served(trace, chain, store, masked=masked, tools=tools)
                     if (page, target) in reference)


def route_found(chain: ChainEvidence, served: frozenset[Edge], parametric: frozenset[str]) -> bool:
    """Search Score of one question: some route's every hop was served or known, at least one served.

    ``parametric`` holds reference evidence items (pages ``v(i-1)``) confirmed
    known without search; each stands for its reference hop ``(v(i-1), v(i))``
    only, so memory never completes a hop that no probe asked about. A question
    held from memory alone (nothing served) is not found by search.
    """
    known = {(page, chain.path[i + 1]) for i, page in enumerate(chain.path[:-1]) if page in parametric}
    for route in chain.routes:
        edges = route.edges
        if all(edge in served or edge in known for edge in edges) and any(edge in served for edge in edges):
            return True
    return False
