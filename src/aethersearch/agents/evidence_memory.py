"""EvidenceLoop's persistent evidence memory: every retrieved document and fact gets an Evidence ID.

Why: WebDetective's EvidenceLoop lets sub-agents reason over short summaries
(so N parallel solvers and R rounds do not blow up the context) while any agent
can still pull the *full* document back by its EID, and every claim of a
proposed answer must cite one. The memory is per episode and append-only: an
EID, once given, always denotes the same thing, and the same document
retrieved twice keeps its first EID.

Two levels of EID: a retrieved document gets ``E3``; each fact the extractor
distils from it gets its own fact EID ``E3.1``, ``E3.2``... (the issue's "each
retrieved fact an Evidence ID"). A fact EID resolves to its document, so
``get``/``full_text``/``<fetch>`` on ``E3.2`` return the whole of ``E3`` and a
claim citing a fact is verified against the full document it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from aethersearch.errors import ToolError
from aethersearch.records import Document

__all__ = ["EID_PREFIX", "EvidenceItem", "EvidenceMemory"]

EID_PREFIX = "E"


class EvidenceItem(NamedTuple):
    """One remembered document: its EID, where it came from and what was distilled from it."""

    eid: str
    document: Document
    source: str
    round: int
    finding: str | None


def _snippet(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


@dataclass
class EvidenceMemory:
    """Append-only EID → document store of one episode, with findings attached by the extractor."""

    snippet_chars: int = 240
    _items: dict[str, EvidenceItem] = field(default_factory=dict)
    _by_doc: dict[str, str] = field(default_factory=dict)
    #: fact EID -> (document EID, fact text), in the order facts were given
    _facts: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, eid: object) -> bool:
        return eid in self._items or eid in self._facts

    def add(self, document: Document, *, source: str, round: int) -> tuple[str, bool]:
        """Remember ``document``; returns ``(eid, is_new)`` (a known document keeps its EID).

        If a document comes back longer than remembered (a search snippet, then the
        visited page), the fuller text replaces it under the same EID.
        """
        known = self._by_doc.get(document.id)
        if known is not None:
            item = self._items[known]
            if len(document.text) > len(item.document.text):
                self._items[known] = item._replace(document=document)
            return known, False
        eid = f"{EID_PREFIX}{len(self._items) + 1}"
        self._items[eid] = EvidenceItem(eid, document, source, round, None)
        self._by_doc[document.id] = eid
        return eid, True

    def get(self, eid: str) -> EvidenceItem:
        """The item with this EID; an unknown EID is a ToolError the agent is told about."""
        eid = eid.strip()
        if eid in self._facts:
            eid = self._facts[eid][0]
        try:
            return self._items[eid]
        except KeyError:
            known = ", ".join([*self._items, *self._facts]) or "none yet"
            raise ToolError(f"unknown evidence id {eid!r}", fix=f"use one of: {known}") from None

    def add_fact(self, eid: str, fact: str) -> str:
        """Give one distilled fact of document ``eid`` its own EID (``E3.1``); a repeated fact keeps its EID.

        The document's summary finding becomes its first fact, so agents reading
        summaries see what was distilled, and can cite the fact precisely.
        """
        item = self.get(eid)
        fact = " ".join(fact.split())
        if not fact:
            raise ToolError(f"empty fact for evidence id {item.eid!r}", fix="give the fact's text")
        mine = [fid for fid, (doc, _) in self._facts.items() if doc == item.eid]
        for fid in mine:
            if self._facts[fid][1] == fact:
                return fid
        fid = f"{item.eid}.{len(mine) + 1}"
        self._facts[fid] = (item.eid, fact)
        if item.finding is None:
            self._items[item.eid] = item._replace(finding=fact)
        return fid

    def facts(self, eid: str | None = None) -> dict[str, str]:
        """Fact EID → fact text (of document ``eid`` only, when given), in the order given."""
        doc = None if eid is None else self.get(eid).eid
        return {fid: text for fid, (owner, text) in self._facts.items() if doc is None or owner == doc}

    def document_eid(self, eid: str) -> str:
        """The document EID behind a document or fact EID."""
        return self.get(eid).eid

    def eid_of(self, doc_id: str) -> str | None:
        """The EID of a document id, if it was retrieved."""
        return self._by_doc.get(doc_id)

    def record_finding(self, eid: str, finding: str) -> None:
        """Attach the extractor's distilled finding to an EID (later findings replace earlier ones)."""
        item = self.get(eid)
        self._items[item.eid] = item._replace(finding=finding.strip())

    def summary_line(self, eid: str) -> str:
        """``[E3] Title: finding-or-snippet`` — what agents see instead of the full text."""
        item = self.get(eid)
        body = item.finding or _snippet(item.document.text, self.snippet_chars)
        return f"[{item.eid}] {item.document.title}: {body}"

    def full_text(self, eid: str) -> str:
        """The whole document behind an EID (for claim verification and fetch requests)."""
        item = self.get(eid)
        return f"[{item.eid}] {item.document.title}\n{item.document.text}"

    def eids(self) -> list[str]:
        """All EIDs in the order they were given."""
        return list(self._items)

    def summaries(self, eids: list[str] | None = None) -> str:
        """Summary lines of ``eids`` (default: all), each followed by its facts' ``  - [E3.1] fact`` lines."""
        lines: list[str] = []
        for eid in (self._items if eids is None else eids):
            lines.append(self.summary_line(eid))
            lines += [f"  - [{fid}] {text}" for fid, text in self.facts(eid).items()]
        return "\n".join(lines)

    def doc_ids(self) -> dict[str, str]:
        """EID (document and fact) → document id (in the trace, so diagnostics can map claims to pages)."""
        out = {eid: item.document.id for eid, item in self._items.items()}
        out.update({fid: self._items[doc].document.id for fid, (doc, _) in self._facts.items()})
        return out
