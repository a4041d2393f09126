"""What an agent can act on: the tools of one episode (a base-layer protocol, so search/, sandbox/ and agents/ can all use it).

An agent never talks to a search server or sandbox directly; it gets an
``Environment`` for its episode. Implementations: the Search-R1 search server
(``search`` only), the masked sandbox (``search`` + ``visit``), and none (the
``direct`` baseline). Every call returns a ``ToolCall`` record for the trace,
so the runner can charge the budget and diagnostics can see what was returned.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

from aethersearch.records import Document, ToolCall

__all__ = [
    "Environment",
    "ToolResult",
]


class ToolResult(NamedTuple):
    """Documents a tool returned (in rank order) and the trace record of the call."""

    documents: list[Document]
    call: ToolCall


@runtime_checkable
class Environment(Protocol):
    """The tools available to one episode (one question of one run)."""

    @property
    def tools(self) -> tuple[str, ...]:
        """Names of the tools this environment offers, e.g. ``("search",)`` or ``("search", "visit")``."""
        ...

    async def search(self, query: str, k: int) -> ToolResult:
        """Retrieve the top ``k`` documents for ``query``."""
        ...

    async def visit(self, page: str) -> ToolResult:
        """Open a page by id or title; refused (``call.error``) if unknown or masked."""
        ...

    async def close(self) -> None:
        """Release episode resources (e.g. close the sandbox episode)."""
        ...
