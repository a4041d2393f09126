"""Search environments for agents: the index in-process, or the retrieval server over HTTP.

Both satisfy ``aethersearch.environment.Environment`` and behave the same way, so
an agent (and its trace) cannot tell them apart: ``search`` returns the top-``k``
documents in rank order, ``visit`` (when offered) returns one page by id. Every
call returns a ``ToolCall`` record (arguments, returned ids, elapsed time, error).
A request the server refuses under its contract (400/413/422: an over-long query)
becomes ``call.error``, shown to the agent; a server that failed or is not a
retrieval server raises ``EndpointError``, which the runner's budgeted
environment turns into a tool error of the episode (``environment.tool_failure``).
"""

from __future__ import annotations

import asyncio
import time

from aethersearch.corpus.base import DocumentStore
from aethersearch.environment import REFUSAL_STATUS, ToolResult
from aethersearch.errors import AetherError, ConfigError, EndpointError
from aethersearch.records import Document, ToolCall
from aethersearch.search.base import SearchIndex
from aethersearch.search.client import SearchClient

__all__ = ["IndexEnvironment", "KNOWN_TOOLS", "RetrievalServerEnvironment", "refused_call", "served_call"]

KNOWN_TOOLS = ("search", "visit")


def _check_tools(tools: tuple[str, ...]) -> tuple[str, ...]:
    unknown = [t for t in tools if t not in KNOWN_TOOLS]
    if unknown or "search" not in tools:
        raise ConfigError(f"search environment tools {tools!r} invalid", fix=f"use ('search',) or {KNOWN_TOOLS}")
    return tools


def refused_call(tool: str, arguments: dict[str, object], message: str, started: float) -> ToolResult:
    """A refused call: no documents, the reason in ``call.error``."""
    return _result(tool, arguments, [], message, started)


def served_call(tool: str, arguments: dict[str, object], documents: list[Document], started: float) -> ToolResult:
    """A successful call: the documents in rank order and their ids in the trace."""
    return _result(tool, arguments, documents, None, started)


def _result(tool: str, arguments: dict[str, object], documents: list[Document], error: str | None,
            started: float) -> ToolResult:
    """The call's record, not validated again (:meth:`Record.trusted`): every field is built here, typed.

    Why: a search is made every turn of an episode; validating the record of values
    this module just made cost ~1 µs a call on the rollout hot path (issue 16).
    """
    call = ToolCall.trusted(tool=tool, arguments=arguments, returned_ids=[d.id for d in documents],
                            suppressed_ids=[], error=error, elapsed_s=time.perf_counter() - started,
                            started_at=None)
    return ToolResult(documents, call)


class IndexEnvironment:
    """In-process search over a loaded index and its store (no HTTP)."""

    def __init__(self, index: SearchIndex, store: DocumentStore, *, tools: tuple[str, ...] = ("search",)) -> None:
        self.index = index
        self.store = store
        self._tools = _check_tools(tools)

    @property
    def tools(self) -> tuple[str, ...]:
        return self._tools

    async def search(self, query: str, k: int) -> ToolResult:
        """Search the corpus. Returns the ``k`` best-matching passages for ``query``, best first."""
        started = time.perf_counter()
        arguments: dict[str, object] = {"query": query, "k": k}
        try:
            hits = (await asyncio.to_thread(self.index.search, [query], k))[0]
            documents = [self.store.get(doc_id) for doc_id, _ in hits if doc_id in self.store]
        except (AetherError, OSError, ValueError) as exc:
            return refused_call("search", arguments, f"search failed: {exc}", started)
        return served_call("search", arguments, documents, started)

    async def visit(self, page: str) -> ToolResult:
        """Open one page by its id and read its full text."""
        started = time.perf_counter()
        arguments: dict[str, object] = {"page": page}
        if "visit" not in self._tools:
            return refused_call("visit", arguments, "this environment offers only search", started)
        if page not in self.store:
            return refused_call("visit", arguments, f"unknown page {page!r}", started)
        doc = self.store.get(page)
        return served_call("visit", arguments, [doc], started)

    async def close(self) -> None:
        """Nothing to release: the index and store outlive the episode."""


class RetrievalServerEnvironment:
    """Search through a running retrieval server (``aether serve``), as Search-R1 does."""

    def __init__(self, client: SearchClient, *, tools: tuple[str, ...] = ("search",),
                 close_client: bool = False) -> None:
        self.client = client
        self._tools = _check_tools(tools)
        self._close_client = close_client

    @property
    def tools(self) -> tuple[str, ...]:
        return self._tools

    async def search(self, query: str, k: int) -> ToolResult:
        """Search the corpus. Returns the ``k`` best-matching passages for ``query``, best first."""
        started = time.perf_counter()
        arguments: dict[str, object] = {"query": query, "k": k}
        try:
            hits = (await self.client.retrieve([query], k))[0]
        except EndpointError as exc:
            if exc.status not in REFUSAL_STATUS:
                raise  # no answer at all: the runner ends the episode as a tool error (environment.tool_failure)
            return refused_call("search", arguments, f"search refused: {exc.message}", started)
        documents = [hit.document for hit in hits]
        return served_call("search", arguments, documents, started)

    async def visit(self, page: str) -> ToolResult:
        """Open one page by its id and read its full text."""
        started = time.perf_counter()
        arguments: dict[str, object] = {"page": page}
        if "visit" not in self._tools:
            return refused_call("visit", arguments, "this environment offers only search", started)
        try:
            found: Document | None = (await self.client.access([page]))[0]
        except EndpointError as exc:
            if exc.status not in REFUSAL_STATUS:
                raise  # as for search
            return refused_call("visit", arguments, f"visit refused: {exc.message}", started)
        if found is None:
            return refused_call("visit", arguments, f"unknown page {page!r}", started)
        return served_call("visit", arguments, [found], started)

    async def close(self) -> None:
        """Close the HTTP client if this environment owns it."""
        if self._close_client:
            await self.client.aclose()
