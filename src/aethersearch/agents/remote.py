"""``mcp-client``: the agent of an episode whose every decision is an outside client's tool call.

Why an agent: an MCP client (``aether mcp``) must be held to the same contract as a shipped agent,
so its episodes run through the same runner; this agent is the runner's side of that. Its
``solve`` waits for the client's next call on a :class:`Channel`, performs it through the
episode's budgeted environment and hands the result back; the client's ``answer`` ends the
episode. It sees only what the tools return, never the release or its gold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

from aethersearch.agents.base import Agent, AgentOutput, Episode, finish
from aethersearch.errors import BudgetExhausted, ToolError

__all__ = ["Channel", "Hit", "RemoteAgent", "ToolReply", "ToolRequest"]


class ToolRequest(NamedTuple):
    """One call from the client: the tool, its arguments, and where its result goes."""

    tool: str
    arguments: dict[str, Any]
    reply: asyncio.Future[Any]


class Hit(NamedTuple):
    """One document a tool returned, as the client sees it."""

    id: str
    title: str
    contents: str
    url: str | None


class ToolReply(NamedTuple):
    """What a search or visit gave back: the documents (or the page) and the calls left in the budget."""

    documents: list[Hit]
    calls_left: int | None


class Channel:
    """The queue between the client's tool calls and its episode's agent loop."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[ToolRequest] = asyncio.Queue()

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """Send one call to the episode and wait for its result (raises what the tool raised)."""
        reply: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        await self.requests.put(ToolRequest(tool, arguments, reply))
        return await reply


def _hits(documents: Sequence[Any]) -> list[Hit]:
    return [Hit(d.id, d.title, d.source_contents or f'"{d.title}"\n{d.text}', d.url) for d in documents]


class RemoteAgent(Agent):
    """The agent of an episode whose decisions come from an MCP client's tool calls."""

    name: ClassVar[str] = "mcp-client"
    needs_llm: ClassVar[bool] = False
    can_sample: ClassVar[bool] = False

    def __init__(self, tool_schema_sha256: str, tools: Sequence[str]) -> None:
        self.tool_schema_sha256 = tool_schema_sha256
        self.tools = tuple(tools)
        self.channels: dict[str, Channel] = {}

    def config(self) -> dict[str, Any]:
        """The tools offered and the sha256 of their MCP schemas: what the client was given."""
        return {"tools": list(self.tools), "tool_schema_sha256": self.tool_schema_sha256}

    async def solve(self, episode: Episode) -> AgentOutput:
        """Serve the client's calls until it answers; a spent budget is raised to the runner.

        A refusal under the contract (a locked or unknown page, an over-long query) is recorded as
        the call it was, charged, and shown to the client as a tool error; the episode goes on.
        """
        channel = self.channels[episode.question.id]
        while True:
            request = await channel.requests.get()
            if request.tool == "answer":
                return _answer(request, "answer")
            try:
                result = await (episode.env.search(str(request.arguments["query"]), int(request.arguments["topk"]))
                                if request.tool == "search" else episode.env.visit(str(request.arguments["page"])))
            except Exception as exc:  # budget spent, or a failed tool server: the runner decides
                request.reply.set_exception(exc)
                raise
            episode.add_step(tool_calls=[result.call])
            if result.call.error:
                request.reply.set_exception(ToolError(result.call.error))
                continue
            limit = self.budget_of(episode)
            request.reply.set_result(ToolReply(_hits(result.documents), limit))

    @staticmethod
    def budget_of(episode: Episode) -> int | None:
        """Tool calls the episode has left (None: no limit)."""
        return episode.tool_calls_left()

    async def final_answer(self, episode: Episode) -> AgentOutput:
        """The budget is spent: every further tool call is refused until the client answers."""
        channel = self.channels[episode.question.id]
        while True:
            request = await channel.requests.get()
            if request.tool == "answer":
                return _answer(request, "budget")
            request.reply.set_exception(BudgetExhausted("tool calls", 0, fix="call answer now"))


def _answer(request: ToolRequest, stop_reason: str) -> AgentOutput:
    """Acknowledge the client's ``answer`` call and classify its text (empty: no answer)."""
    request.reply.set_result(None)
    text = request.arguments.get("answer")
    answer = None if text is None else str(text)
    return finish(answer or "", answer, stop_reason)
