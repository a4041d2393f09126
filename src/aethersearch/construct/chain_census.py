"""What a corpus's link graph allows before any seed: every short path, and why it cannot entail an answer.

A build that finds no seed, or no entailing chain, would otherwise only say
"nothing found". The census answers the question a user then asks (could *any*
question be built on these pages?) from the same typed graph the construction
uses (:class:`~aethersearch.construct.typed_facts.TypedGraph`): it walks every
simple path of ``min_hops..max_hops`` hops between the corpus's pages and
counts, per path, the first reason it cannot be a chain whose typed hops
compose to an answer (the only entailment available without an LLM judge):

* ``untyped_hop`` -- some hop's link carries no typed fact on its page (the
  hop sentence only mentions the next page, or none of the relation patterns
  matches it);
* ``relations_do_not_compose`` -- every hop is typed, but no rule of
  ``chain_semantics.DEFAULT_RULES`` composes them;
* ``composes`` -- the hops compose (such a path is a candidate chain).

It also says how many of the graph's links are typed at all, and per relation
how many pattern matches named something that is not a page of the corpus
(``FactSet.object_not_a_page``): for a small excerpt of a wiki this is where the
facts went. Paths are enumerated up to :data:`PATH_LIMIT` (then ``truncated``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from aethersearch.construct.chain_semantics import compose
from aethersearch.construct.typed_facts import FactSet, TypedGraph

#: paths enumerated at most (a dense corpus has far more; the census then says it stopped)
PATH_LIMIT = 200_000


class ChainCensus(NamedTuple):
    """Counts over the graph's short simple paths (see the module docstring)."""

    links: int
    typed_links: int
    paths_by_hops: dict[int, int]
    reasons: dict[str, int]
    object_not_a_page: dict[str, int]
    truncated: bool

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready record (for the manifest and the shortage message)."""
        return {"links": self.links, "typed_links": self.typed_links,
                "paths_by_hops": {str(k): v for k, v in self.paths_by_hops.items()}, "reasons": self.reasons,
                "pattern_matches_object_not_a_page": self.object_not_a_page, "truncated": self.truncated}

    def summary(self) -> str:
        """One sentence for an error message."""
        paths = ", ".join(f"{n:,} of {h} hops" for h, n in self.paths_by_hops.items()) or "none"
        outside = ", ".join(f"{r} {n}" for r, n in self.object_not_a_page.items()) or "none"
        return (f"the link graph has {self.links:,} links between its pages, {self.typed_links:,} of them typed; "
                f"its simple paths ({paths}{', truncated' if self.truncated else ''}) by reason: {self.reasons}; "
                f"relation patterns that matched a sentence but named no page of the corpus: {outside}")


def chain_census(links: Mapping[str, Sequence[str]], typed: TypedGraph, facts: FactSet, *, min_hops: int = 2,
                 max_hops: int = 4) -> ChainCensus:
    """Count every simple path of ``min_hops..max_hops`` hops over ``links`` (page id -> linked page ids)."""
    reasons: Counter[str] = Counter()
    by_hops: Counter[int] = Counter()
    total = sum(len(targets) for targets in links.values())
    typed_links = sum(1 for a, targets in links.items() for b in targets if typed.relations(a, b))
    seen = 0
    truncated = False
    for start in sorted(links):
        stack: list[list[str]] = [[start]]
        while stack and not truncated:
            path = stack.pop()
            for nxt in links.get(path[-1], ()):
                if nxt in path:
                    continue
                longer = [*path, nxt]
                hops = len(longer) - 1
                if hops >= min_hops:
                    seen += 1
                    by_hops[hops] += 1
                    reasons[_reason(typed, longer)] += 1
                    if seen >= PATH_LIMIT:
                        truncated = True
                        break
                if hops < max_hops:
                    stack.append(longer)
        if truncated:
            break
    return ChainCensus(total, typed_links, dict(sorted(by_hops.items())), dict(sorted(reasons.items())),
                       dict(facts.object_not_a_page), truncated)


def _reason(typed: TypedGraph, path: Sequence[str]) -> str:
    hops = typed.hop_relations(path)
    if any(not relations for relations in hops):
        return "untyped_hop"
    _, failed = compose(hops, typed.rules)
    return "relations_do_not_compose" if failed is not None else "composes"


__all__ = ["PATH_LIMIT", "ChainCensus", "chain_census"]
