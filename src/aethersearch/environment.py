"""What an agent can act on: the tools of one episode (a base-layer protocol, so search/, sandbox/ and agents/ can all use it).

An agent never talks to a search server or sandbox directly; it gets an
``Environment`` for its episode. Implementations: the Search-R1 search server
(``search`` only), the masked sandbox (``search`` + ``visit``), and none (the
``direct`` baseline). Every call returns a ``ToolCall`` record for the trace,
so the runner can charge the budget and diagnostics can see what was returned.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

from aethersearch.errors import EndpointError, ToolUnavailable
from aethersearch.records import Document, ErrorKind, ToolCall

__all__ = [
    "REFUSAL_STATUS",
    "Environment",
    "ToolResult",
    "tool_failure",
]

#: HTTP statuses a tool server answers to refuse *this request* under its contract (a malformed or over-long
#: query, a body over the limit): the agent is shown the reason and goes on. Every other failure is no answer.
REFUSAL_STATUS = frozenset({400, 413, 422})
_WRONG_API = frozenset({401, 403, 404, 405})
_FIXES = {
    ErrorKind.TOOL_UNREACHABLE: "start the tool's server (`aether serve` or `aether sandbox serve`) or correct its "
                                "URL, then rerun the same command",
    ErrorKind.TOOL_WRONG_API: "the URL answers, but not with the API the tool speaks: --search-url takes a retrieval "
                              "server (`aether serve`, POST /retrieve); a masked sandbox (`aether sandbox serve`) "
                              "takes --sandbox-url",
    ErrorKind.TOOL_SERVER_ERROR: "the tool's server failed (see its log and `error` in traces.jsonl); fix it, then "
                                 "rerun the same command",
}


def tool_failure(tool: str, exc: EndpointError) -> ToolUnavailable:
    """The :class:`ToolUnavailable` for a tool call whose server failed with ``exc`` (kind by HTTP status).

    One classification for every tool and agent: the runner's budgeted environment
    raises what this returns, so no agent can turn a dead server into observations.
    """
    status = exc.status
    kind = (ErrorKind.TOOL_UNREACHABLE if status is None else
            ErrorKind.TOOL_WRONG_API if status in _WRONG_API else ErrorKind.TOOL_SERVER_ERROR)
    return ToolUnavailable(f"{tool} tool failed ({kind.value}): {exc.message}", kind=kind.value, tool=tool,
                           status=status, fix=_FIXES[kind])


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
