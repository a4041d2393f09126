"""``aether mcp``: the frozen corpus, or a hint-free release's masked sandbox, as MCP tools.

Why: more and more agents (MiroThinker, BrowseComp-Plus's searcher, the verifiers library,
inspect_ai and verl's MCP tools) call their search and page tools over the Model Context
Protocol. Served here, over the official SDK (stdio or streamable HTTP), such an agent is
evaluated under the same contract as every shipped agent: each question it starts is an
episode of the one run path (``mcp_bridge.episodes``), with the same budget, mask, refusal
rules and tool-server error handling, written to a run directory that every other command reads.

The tools, for a model:

* ``list_questions``: the release's question ids and texts (only what an agent may see);
* ``start``: begin (or, after a reconnect, continue) the episode of one question;
* ``search``: the corpus's top documents for a query (in the sandbox: only pages the episode
  has unlocked, masked as ``aether sandbox serve`` masks them);
* ``visit`` (sandbox only): read a page the episode has unlocked;
* ``answer``: end the episode with the final answer.

A session's ``start`` binds its later calls to that question; every tool also takes an
explicit ``question_id`` for a client that runs several questions on one connection.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.types import TextContent
from pydantic import Field

from aethersearch.errors import AetherError
from aethersearch.jsonl import dumps, sha256_bytes
from aethersearch.mcp_bridge.episodes import RemoteRun
from aethersearch.mcp_bridge.pipes import MAX_LINE_BYTES, stdio_pipes
from aethersearch.records import Budget
from aethersearch.rollout.session import SearchSetup

__all__ = ["Bridge", "ClosedStreamNoise", "INSTRUCTIONS", "MAX_QUERY", "MAX_TOPK", "QuestionId", "run", "serve"]

#: the longest query the sandbox accepts (``sandbox.tools.MAX_QUERY_CHARS``); the same limit here
MAX_QUERY = 512
MAX_TOPK = 50

QuestionId = Annotated[str | None, Field(description=(
    "The question this call belongs to; default: the one this connection last started."))]

INSTRUCTIONS = """Answer questions by searching a fixed document collection.
For each question: call start with its id (list_questions gives the ids), search (and, when offered,
visit pages) until you can answer, then call answer. Each question has a tool-call budget; when it is
spent, only answer is accepted. Answer with a short span (a name, a date, a number); answer with an
empty string to give no answer."""


#: the SDK's streamable-HTTP logger, and the filter that drops its closed-stream noise (see ClosedStreamNoise)
_SDK_STREAMS = logging.getLogger("mcp.server.streamable_http")


class _PipedFastMCP(FastMCP):
    """FastMCP whose stdio transport reads and writes non-blocking pipes where that is safe (``pipes``)."""

    async def run_stdio_async(self) -> None:
        """The SDK's stdio transport and server, as ``FastMCP.run_stdio_async`` runs them, with the pipes as files."""
        files = await stdio_pipes()
        async with stdio_server(*(files or ())) as (read, write):
            await self._mcp_server.run(read, write, self._mcp_server.create_initialization_options())
        if files is not None and files[0].overrun:
            raise AetherError(f"a message line on standard input was longer than {MAX_LINE_BYTES >> 20} MiB; "
                              "the session ended there", fix="send tool arguments under that size (a query or a "
                                                             f"page name is at most {MAX_QUERY} characters)")


class Bridge:
    """The MCP tools of one run: an MCP server whose tools drive :class:`RemoteRun` episodes."""

    def __init__(self, release_dir: Path, run_dir: Path, search: SearchSetup, *, budget: Budget,
                 sandbox: bool, question_timeout_s: float | None = None) -> None:
        self.release_dir, self.run_dir, self.search = Path(release_dir), Path(run_dir), search
        self.budget, self.sandbox, self.question_timeout_s = budget, sandbox, question_timeout_s
        # WARNING: at INFO the SDK renders a rich log line per request, most of the server CPU of a call
        self.server = _PipedFastMCP("aethersearch", instructions=INSTRUCTIONS, json_response=True, log_level="WARNING")
        _SDK_STREAMS.addFilter(_CLOSED_STREAM_NOISE)  # once: a logger keeps one filter object only once
        self.tools: tuple[str, ...] = ("search", "visit") if sandbox else ("search",)
        self._register()
        self._run: RemoteRun | None = None
        self._bound: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()

    async def schema_sha256(self) -> str:
        """sha256 of the tools' MCP listing (names, descriptions, input schemas): part of the run's contract."""
        listed = await self.server.list_tools()
        return sha256_bytes(dumps([tool.model_dump(mode="json", exclude_none=True) for tool in listed]))

    async def open(self) -> RemoteRun:
        """Open the run directory (``run.json`` written, its lock held) in the serving event loop."""
        if self._run is None:
            self._run = RemoteRun(self.release_dir, self.run_dir, self.search, budget=self.budget,
                                  tool_schema_sha256=await self.schema_sha256(), tools=self.tools,
                                  question_timeout_s=self.question_timeout_s)
        return self._run

    async def close(self) -> None:
        """Close the run directory; open episodes are left without a trace (they can be started again)."""
        if self._run is not None:
            await self._run.close()
            self._run = None

    def _question_of(self, context: Any, question_id: str | None) -> str:
        if question_id:
            return question_id
        bound = self._bound.get(context.session)
        if bound is None:
            raise _tool_error(AetherError("no question started on this connection",
                                          fix="call start with a question id first"))
        return bound

    def _register(self) -> None:  # noqa: C901 -- one closure per tool, each a few lines
        """The tools. Their results are compact JSON text (``structured_output=False``, :func:`_text`): a model
        reads text anyway, and an output schema made the SDK validate every result with jsonschema on both
        sides, about a millisecond of CPU per call on each."""
        server, bridge = self.server, self

        @server.tool(structured_output=False, description="List the questions of this evaluation: their ids and texts.")
        async def list_questions(
                offset: Annotated[int, Field(ge=0, description="Skip this many questions.")] = 0,
                limit: Annotated[int, Field(ge=1, le=500, description="Return at most this many.")] = 50,
        ) -> TextContent:
            run = await bridge.open()
            rows = list(run.questions.values())[offset:offset + limit]
            return _text({"total": len(run.questions), "questions": [{"id": q.id, "question": q.question} for q in rows],
                          "finished": [q.id for q in rows if run.finished(q.id)]})

        @server.tool(structured_output=False, description="Start the episode of one question (or continue it after a reconnect). "
                                 "Returns the question and the tool calls left.")
        async def start(question_id: Annotated[str, Field(min_length=1, description="A question id.")],
                        ctx: Context) -> TextContent:  # type: ignore[type-arg]
            run = await bridge.open()
            try:
                question = await run.start(question_id)
            except AetherError as exc:
                raise _tool_error(exc) from None
            bridge._bound[ctx.session] = question_id
            return _text({"id": question.id, "question": question.question, "tools": [*bridge.tools, "answer"],
                          "tool_call_budget": run.budget.max_tool_calls})

        @server.tool(structured_output=False, description="Search the document collection. Returns the top documents (id, title, text); "
                                 "each call spends one tool call of the question's budget.")
        async def search(query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY,
                                                     description="What to look for, in words.")],
                         ctx: Context,  # type: ignore[type-arg]
                         topk: Annotated[int, Field(ge=1, le=MAX_TOPK, description="How many documents.")] = 3,
                         question_id: QuestionId = None) -> TextContent:
            return await bridge._call(ctx, question_id, "search", {"query": query, "topk": topk})

        if self.sandbox:
            @server.tool(structured_output=False, description="Read one page by its id or title (a page appears in search results or links "
                                     "once the episode has reached it). Spends one tool call.")
            async def visit(page: Annotated[str, Field(min_length=1, max_length=512,
                                                       description="A page id or title.")],
                            ctx: Context,  # type: ignore[type-arg]
                            question_id: QuestionId = None) -> TextContent:
                return await bridge._call(ctx, question_id, "visit", {"page": page})

        @server.tool(structured_output=False, description="Give the final answer and end the question's episode (an empty answer gives "
                                 "none). Short answers score best: a name, a date, a number.")
        async def answer(answer: Annotated[str, Field(max_length=2048, description="The final answer.")],
                         ctx: Context,  # type: ignore[type-arg]
                         question_id: QuestionId = None) -> TextContent:
            run = await bridge.open()
            qid = bridge._question_of(ctx, question_id)
            try:
                trace = await run.answer(qid, answer or None)
            except AetherError as exc:
                raise _tool_error(exc) from None
            return _text({"id": qid, "outcome": trace.outcome.value, "recorded": str(run.run_dir / "traces.jsonl")})

    async def _call(self, context: Any, question_id: str | None, tool: str, arguments: dict[str, Any]) -> TextContent:
        run = await self.open()
        qid = self._question_of(context, question_id)
        try:
            reply = await run.call(qid, tool, arguments)
        except AetherError as exc:
            raise _tool_error(exc) from None
        return _text({"documents": [hit._asdict() for hit in reply.documents], "tool_calls_left": reply.calls_left})


def run(bridge: Bridge, *, transport: str, host: str = "127.0.0.1", port: int = 8200) -> None:
    """:func:`serve` in a new event loop: uvloop when it is installed, as ``aether serve`` runs (uvicorn's ``auto``).

    Why: most of the server's CPU per tool call is the event loop's own (a call crosses the
    SDK's memory streams and tasks about twenty times); uvloop runs those iterations in C.
    """
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(serve(bridge, transport=transport, host=host, port=port))


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def _text(payload: dict[str, Any]) -> TextContent:
    """A tool's result as one compact, canonical JSON text block, encoded once (orjson).

    Why not the dict: the SDK would encode it again through pydantic with an indent of
    two, a large share of the server's CPU per call for a text no model needs indented.
    """
    return TextContent(type="text", text=dumps(payload).decode())


def _tool_error(exc: AetherError) -> Exception:
    """An MCP tool error (``isError`` to the client, never a crash) carrying the message and the fix."""
    return ToolError(str(exc))


async def serve(bridge: Bridge, *, transport: str, host: str = "127.0.0.1", port: int = 8200) -> None:
    """Serve ``bridge`` over stdio or streamable HTTP until the client or a signal ends it."""
    await bridge.open()
    try:
        if transport == "stdio":
            await bridge.server.run_stdio_async()
        else:
            config = uvicorn.Config(bridge.server.streamable_http_app(), host=host, port=port, log_level="warning")
            await uvicorn.Server(config).serve()
    finally:
        await bridge.close()


class ClosedStreamNoise(logging.Filter):
    """Drops the SDK's error log of a client's event stream that ended because its session ended.

    Why: over streamable HTTP a client keeps a stream of server-sent events open while
    its session lives; when the client closes the session (or the server stops), the
    SDK's writer of that stream finds it closed and logs "Error in standalone SSE
    writer" with a framed traceback, though nothing went wrong. Only that record with
    anyio's ``ClosedResourceError`` is dropped; every other error is logged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """False for the closed-stream record, True for everything else."""
        error = record.exc_info[1] if record.exc_info else None
        return not (isinstance(error, anyio.ClosedResourceError) and "SSE writer" in record.getMessage())


_CLOSED_STREAM_NOISE = ClosedStreamNoise()
