"""Async HTTP client of the sandbox server, and its per-episode ``Environment``.

Why a client-side Environment: an agent written against
``aethersearch.environment.Environment`` must run unchanged whether the
sandbox is in-process (``SandboxEpisode``) or behind HTTP
(:class:`HttpSandboxEpisode`). Refusals (404 unknown/masked page, 422 invalid
input) come back as ``ToolResult``s whose ``call.error`` is set, exactly like
in-process; transport failures, 5xx and timeouts are ``EndpointError``.

The transport is aiohttp with orjson, as for the model endpoints: with 1,024
episodes in flight httpx's pool cost 30x the CPU per action of a plain aiohttp
loop (``benchmarks/sandbox_eval.py``), and its pool timed waiting requests out.
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
from typing import Any, NamedTuple

import aiohttp
import orjson

from aethersearch.environment import ToolResult
from aethersearch.errors import EndpointError, ToolUnavailable
from aethersearch.records import Document, ErrorKind, ToolCall

__all__ = ["HttpSandboxEpisode", "Reply", "SandboxClient"]

_JSON = {"content-type": "application/json"}
#: failures before a byte of the request reached the server (refused, not accepted in time): any request may go again
_NEVER_SENT: tuple[type[BaseException], ...] = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
#: a connection that broke mid-request: only an action carrying its ``seq`` may be sent again
_BROKEN: tuple[type[BaseException], ...] = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError,
                                            aiohttp.ClientPayloadError)


class Reply(NamedTuple):
    """A sandbox answer: status, the JSON body (``{}`` when not JSON) and the raw text."""

    status: int
    data: Any
    text: str


class SandboxClient:
    """Talks to one sandbox server over aiohttp (one session, made lazily in the running event loop).

    The retry defaults (40 attempts, backoff capped at 2 s, 90 s in all) ride out a
    sandbox restart, whose start-up includes the index's warm-up. Waiting for one of
    the ``max_connections`` connections is not a failure: the question's deadline bounds it.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:8100", *, timeout_s: float = 30.0, retries: int = 40,
                 deadline_s: float = 90.0, max_connections: int = 1024, close_when_idle: bool = False) -> None:
        self.base_url = base_url.rstrip("/")
        #: close the session once no episode it opened is open (a run's factory owns it: nobody else closes it)
        self.close_when_idle = close_when_idle
        self.open_episodes = 0
        self.retries = retries
        self.deadline_s = deadline_s
        self.max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(total=None, connect=timeout_s, sock_read=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=self.max_connections)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        return self._session

    async def _send(self, method: str, path: str, body: dict[str, Any] | None) -> Reply:
        data = orjson.dumps(body) if body is not None else None
        async with self._ensure_session().request(method, self.base_url + path, data=data,
                                                  headers=_JSON if data is not None else None) as response:
            raw = await response.read()
        if response.content_type == "application/json":
            try:
                return Reply(response.status, orjson.loads(raw), raw.decode("utf-8", "replace"))
            except orjson.JSONDecodeError:
                pass
        return Reply(response.status, {}, raw.decode("utf-8", "replace"))

    async def request(self, method: str, path: str, body: dict[str, Any] | None = None, *,
                      idempotent: bool = False) -> Reply:
        """One request; connection errors retried, 5xx/timeouts raised as EndpointError.

        ``idempotent``: the request may be sent again after the connection broke
        mid-request (an action carrying its ``seq``), not only when it never left.
        """
        started = time.monotonic()
        attempt = 0
        retried = _NEVER_SENT + _BROKEN if idempotent else _NEVER_SENT
        while True:
            try:
                reply = await self._send(method, path, body)
            except retried as exc:
                attempt += 1
                if attempt > self.retries or time.monotonic() - started > self.deadline_s:
                    raise EndpointError(f"sandbox server unreachable at {self.base_url}: {exc!r}",
                                        transient=True, fix="start it with `aether sandbox serve`") from None
                await asyncio.sleep(min(2.0, 0.1 * 2 ** attempt) * (0.5 + random.random()))
                continue
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                raise EndpointError(f"sandbox request {method} {path} failed: {exc!r}", transient=True) from None
            if reply.status >= 500:
                raise EndpointError(f"sandbox server error {reply.status} on {path}: {reply.text[:300]}",
                                    status=reply.status, transient=True)
            return reply

    async def create_episode(self, question_id: str, *, run_id: str = "run", replace: bool = False,
                             owner: str | None = None) -> HttpSandboxEpisode:
        """Open an episode for ``question_id`` in run ``run_id``; ``replace`` takes over one this ``owner`` opened."""
        self.open_episodes += 1  # counted from the request on, so an idle close cannot cut it off
        body: dict[str, Any] = {"question_id": question_id, "run_id": run_id, "replace": replace}
        if owner is not None:
            body["owner"] = owner
        try:
            reply = await self.request("POST", "/episodes", body)
            if reply.status != 200:
                raise EndpointError(f"cannot open episode for {question_id!r}: {_detail(reply)}",
                                    status=reply.status)
        except BaseException:
            self.open_episodes -= 1
            raise
        return HttpSandboxEpisode(self, reply.data["episode_id"], question_id, tuple(reply.data["tools"]))

    async def health(self) -> dict[str, Any]:
        """The server's ``/health`` answer."""
        health: dict[str, Any] = (await self.request("GET", "/health")).data
        return health

    async def aclose(self) -> None:
        """Close the connection pool (safe to call twice)."""
        if self._session is not None:
            await self._session.close()
            self._session = None


def _detail(reply: Reply) -> str:
    detail = reply.data.get("detail") if isinstance(reply.data, dict) else None
    return str(detail) if detail is not None else reply.text[:300]


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
        reply = await self._client.request("POST", f"/episodes/{self.episode_id}/{tool}",
                                           {**body, "seq": self.answered}, idempotent=True)
        data = reply.data if isinstance(reply.data, dict) else {}
        if "call" in data:
            self.answered += 1
        if reply.status == 200:
            return ToolResult([Document.model_validate(d) for d in data["documents"]],
                              ToolCall.model_validate(data["call"]))
        if "call" in data:
            return ToolResult([], ToolCall.model_validate(data["call"]))
        detail = data.get("detail")
        if reply.status in (404, 409):  # the episode is unknown, closed or not recoverable: not a page
            raise ToolUnavailable(f"sandbox episode {self.episode_id} is gone: {detail}", tool=tool,
                                  kind=ErrorKind.TOOL_SERVER_ERROR.value, status=reply.status,
                                  fix="was the sandbox restarted without its --action-log? rerun the same "
                                      "command against a sandbox started with one")
        return ToolResult([], ToolCall(tool=tool, arguments=body, error=str(detail or reply.text[:300]),
                                       elapsed_s=time.perf_counter() - started))

    async def search(self, query: str, k: int) -> ToolResult:
        """Search the sandbox corpus (masked pages withheld)."""
        return await self._tool("search", {"query": query, "k": k})

    async def visit(self, page: str) -> ToolResult:
        """Open a page by id or title (refused if unknown or still masked)."""
        return await self._tool("visit", {"page": page})

    async def trace(self) -> list[ToolCall]:
        """The server-side action log of this episode."""
        reply = await self._client.request("GET", f"/episodes/{self.episode_id}/trace")
        if reply.status != 200:
            raise EndpointError(f"cannot read the trace of sandbox episode {self.episode_id}: {_detail(reply)}",
                                status=reply.status,
                                fix="is this the sandbox (and --action-log) the episode was opened on?")
        return [ToolCall.model_validate(c) for c in reply.data["trace"]]

    async def close(self) -> None:
        """Close the episode on the server (idempotent here)."""
        if not self.closed:
            self.closed = True
            client = self._client
            try:
                await client.request("POST", f"/episodes/{self.episode_id}/close")
            finally:
                client.open_episodes -= 1
                if client.close_when_idle and client.open_episodes == 0:  # the next episode opens a new session
                    await client.aclose()
