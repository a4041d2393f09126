"""Small in-test fakes of the Environment protocol (a few hand-written documents)."""

from __future__ import annotations

import asyncio
import re

from aethersearch.environment import ToolResult
from aethersearch.records import Document, ToolCall

_WORD = re.compile(r"\w+")

DOCS = [
    Document(id="d1", title="Paris", text="Paris is the capital of France.\nIt lies on the Seine."),
    Document(id="d2", title="France", text="France is a country in Europe. Its capital is Paris."),
    Document(id="d3", title="Seine", text="The Seine is a river that flows through Paris."),
    Document(id="d4", title="Berlin", text="Berlin is the capital of Germany."),
    Document(id="d5", title="Amelia Vorn", text="Amelia Vorn was born in Kestrel Bay in 1888. Vorn worked as a pilot."),
    Document(id="d6", title="Kestrel Bay", text="Kestrel Bay is a harbour town in Oskland."),
]


class FakeSearchEnv:
    """Ranks documents by query-word overlap (ties by id order); counts calls."""

    def __init__(self, docs: list[Document] | None = None, tools: tuple[str, ...] = ("search",),
                 delay_s: float = 0.0) -> None:
        self.docs = list(docs or DOCS)
        self._tools = tools
        self.calls: list[tuple[str, str]] = []
        self.delay_s = delay_s
        self.closed = False

    @property
    def tools(self) -> tuple[str, ...]:
        return self._tools

    async def search(self, query: str, k: int) -> ToolResult:
        self.calls.append(("search", query))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        words = {w.lower() for w in _WORD.findall(query)}
        scored = []
        for order, doc in enumerate(self.docs):
            overlap = len(words & {w.lower() for w in _WORD.findall(doc.contents)})
            if overlap:
                scored.append((-overlap, order, doc))
        hits = [doc for _, _, doc in sorted(scored)[:k]]
        return ToolResult(hits, ToolCall(tool="search", arguments={"query": query, "k": k},
                                         returned_ids=[d.id for d in hits]))

    async def visit(self, page: str) -> ToolResult:
        self.calls.append(("visit", page))
        for doc in self.docs:
            if page in (doc.id, doc.title):
                return ToolResult([doc], ToolCall(tool="visit", arguments={"page": page}, returned_ids=[doc.id]))
        return ToolResult([], ToolCall(tool="visit", arguments={"page": page}, error=f"unknown page {page!r}"))

    async def close(self) -> None:
        self.closed = True
