"""Async HTTP client of the sandbox server, and its per-episode ``Environment``.

Why a client-side Environment: an agent written against
``aethersearch.environment.Environment`` must run unchanged whether the
sandbox is in-process (``SandboxEpisode``) or behind HTTP
(:class:`HttpSandboxEpisode`). Refusals (404 unknown/masked page, 422 invalid
input) come back as ``ToolResult``s whose ``call.error`` is set, exactly like
in-process; transport failures, 5xx and timeouts are ``EndpointError``.

Connection failures are retried with jittered backoff, bounded by a total
deadline (long enough to ride out a sandbox restart). A search or visit carries
``seq``, the number of actions this client has had answered in the episode, so
one whose reply was lost (the connection broke mid-request, the sandbox was
killed) is sent again with the same ``seq``: the server answers it from its
action log instead of running and logging it twice. A restarted sandbox
recovers open episodes from that log, so the episode simply continues.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import httpx

from aethersearch.environment import ToolResult
from aethersearch.errors import EndpointError, ToolUnavailable
from aethersearch.records import Document, ErrorKind, ToolCall


class SandboxClient:
    """Talks to one sandbox server; ``transport`` lets tests use ``httpx.ASGITransport``.

    The retry defaults (40 attempts, backoff capped at 2 s, 90 s in all) ride out a
    sandbox restart, whose start-up includes the index's warm-up.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8100", *, transport: httpx.AsyncBaseTransport | None = None,
                 timeout_s: float = 30.0, retries: int = 40, deadline_s: float = 90.0) -> None:
        self._client = httpx.AsyncClient(base_url=base_url, transport=transport, timeout=timeout_s)
        self.retries = retries
        self.deadline_s = deadline_s

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None, *,
                      idempotent: bool = False) -> httpx.Response:
        """One request; connection errors retried, 5xx/timeouts raised as EndpointError.

        ``idempotent``: the request may be sent again after the connection broke
        mid-request (an action carrying its ``seq``), not only when it never left.
        """
        started = time.monotonic()
        attempt = 0
        retried = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) if idempotent else (
            httpx.ConnectError,)
        while True:
            try:
                response = await self._client.request(method, path, json=body)
            except retried as exc:
                attempt += 1
                if attempt > self.retries or time.monotonic() - started > self.deadline_s:
                    raise EndpointError(f"sandbox server unreachable at {self._client.base_url}: {exc}",
                                        transient=True, fix="start it with `aether sandbox serve`") from None
                await asyncio.sleep(min(2.0, 0.1 * 2 ** attempt) * (0.5 + random.random()))
                continue
            except httpx.HTTPError as exc:
                raise EndpointError(f"sandbox request {method} {path} failed: {exc!r}", transient=True) from None
            if response.status_code >= 500:
                raise EndpointError(f"sandbox server error {response.status_code} on {path}: {response.text[:300]}",
                                    status=response.status_code, transient=True)
            return response

    async def create_episode(self, question_id: str, *, run_id: str = "run",
                             replace: bool = False) -> HttpSandboxEpisode:
        """Open an episode for ``question_id`` in run ``run_id``."""
        response = await self.request("POST", "/episodes",
                                      {"question_id": question_id, "run_id": run_id, "replace": replace})
        if response.status_code != 200:
            raise EndpointError(f"cannot open episode for {question_id!r}: {_detail(response)}",
                                status=response.status_code)
        data = response.json()
        return HttpSandboxEpisode(self, data["episode_id"], question_id, tuple(data["tools"]))

    async def health(self) -> dict[str, Any]:
        """The server's ``/health`` answer."""
        health: dict[str, Any] = (await self.request("GET", "/health")).json()
        return health

    async def aclose(self) -> None:
        """Close the underlying connection pool."""
        await self._client.aclose()


def _detail(response: httpx.Response) -> str:
    try:
        return str(response.json().get("detail"))
    except ValueError:
        return response.text[:300]


class HttpSandboxEpisode:
    """An ``Environment`` for one episode held by a sandbox server."""

    def __init__(self, client: SandboxClient, episode_id: str, question_id: str, tools: tuple[str, ...]) -> None:
        self._client = client
        self.episode_id = episode_id
        self.question_id = question_id
        self._tools = tools
        self.closed = False
        self.answered = 0  # actions the server answered in this episode: the next action's seq

    @property
    def tools(self) -> tuple[str, ...]:
        """The tools the server offers for this episode."""
        return self._tools

    async def _tool(self, tool: str, body: dict[str, Any]) -> ToolResult:
        started = time.perf_counter()
        response = await self._client.request("POST", f"/episodes/{self.episode_id}/{tool}",
                                              {**body, "seq": self.answered}, idempotent=True)
        data = response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        if "call" in data:
            self.answered += 1
        if response.status_code == 200:
            return ToolResult([Document.model_validate(d) for d in data["documents"]],
                              ToolCall.model_validate(data["call"]))
        if "call" in data:
            return ToolResult([], ToolCall.model_validate(data["call"]))
        detail = data.get("detail") if isinstance(data, dict) else None
        if response.status_code in (404, 409):  # the episode is unknown, closed or not recoverable: not a page
            raise ToolUnavailable(f"sandbox episode {self.episode_id} is gone: {detail}", tool=tool,
                                  kind=ErrorKind.TOOL_SERVER_ERROR.value, status=response.status_code,
                                  fix="was the sandbox restarted without its --action-log? rerun the same "
                                      "command against a sandbox started with one")
        return ToolResult([], ToolCall(tool=tool, arguments=body, error=str(detail or response.text[:300]),
                                       elapsed_s=time.perf_counter() - started))

    async def search(self, query: str, k: int) -> ToolResult:
        """Search the sandbox corpus (masked pages withheld)."""
        return await self._tool("search", {"query": query, "k": k})

    async def visit(self, page: str) -> ToolResult:
        """Open a page by id or title (refused if unknown or still masked)."""
        return await self._tool("visit", {"page": page})

    async def trace(self) -> list[ToolCall]:
        """The server-side action log of this episode."""
        response = await self._client.request("GET", f"/episodes/{self.episode_id}/trace")
        if response.status_code != 200:
            raise EndpointError(f"cannot read the trace of sandbox episode {self.episode_id}: {_detail(response)}",
                                status=response.status_code,
                                fix="is this the sandbox (and --action-log) the episode was opened on?")
        return [ToolCall.model_validate(c) for c in response.json()["trace"]]

    async def close(self) -> None:
        """Close the episode on the server (idempotent here)."""
        if not self.closed:
            self.closed = True
            await self._client.request("POST", f"/episodes/{self.episode_id}/close")
