"""Async httpx client for the retrieval server: timeouts, retries on transient errors, a total deadline.

Why (docs/design/conventions.md, code convention 5): a rollout of thousands of episodes must survive a
server restart or a burst of 503s, but must not hang forever nor retry a request
that can never succeed. Transient = HTTP 429, any 5xx, connection errors and
timeouts; those are retried with full-jitter exponential backoff up to
``max_retries`` times and never past ``deadline_s`` in total. Anything else (a
422 saying ``topk`` is over the limit, say) raises ``EndpointError`` at once,
carrying the server's message.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, NamedTuple

import httpx
import orjson

from aethersearch.corpus.importers import parse_contents
from aethersearch.errors import EndpointError
from aethersearch.records import Document

__all__ = [
    "RetrievedDocument",
    "SearchClient",
    "TRANSIENT_STATUS",
]

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


class RetrievedDocument(NamedTuple):
    """One hit from ``/retrieve``: the document (title/text split from ``contents``) and its score."""

    document: Document
    score: float | None


class SearchClient:
    """Client of ``/retrieve``, ``/access`` and ``/health``; use as ``async with SearchClient(url) as c``."""

    def __init__(self, base_url: str, *, timeout_s: float = 30.0, max_retries: int = 4,
                 backoff_s: float = 0.1, backoff_cap_s: float = 5.0, deadline_s: float = 120.0,
                 transport: httpx.AsyncBaseTransport | None = None, max_connections: int = 256,
                 seed: int | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_cap_s = backoff_cap_s
        self.deadline_s = deadline_s
        self._rng = random.Random(seed)
        self._client = httpx.AsyncClient(
            base_url=self.base_url, timeout=httpx.Timeout(timeout_s), transport=transport,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            headers={"content-type": "application/json"},
        )
        self.retries = 0  # how many retries this client has made (for traces and tests)

    async def __aenter__(self) -> SearchClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    # ------------------------------------------------------------------ transport
    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request with retries; the parsed JSON response, or ``EndpointError``."""
        started = time.monotonic()
        content = orjson.dumps(body) if body is not None else None
        attempt = 0
        while True:
            error: str
            status: int | None = None
            try:
                response = await self._client.request(method, path, content=content)
                if response.status_code < 400:
                    return orjson.loads(response.content)
                status = response.status_code
                error = _detail(response)
                if status not in TRANSIENT_STATUS:
                    raise EndpointError(f"{method} {self.base_url}{path} -> HTTP {status}: {error}",
                                        status=status, fix="the request was refused; see the message for the limit")
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            attempt += 1
            elapsed = time.monotonic() - started
            delay = self._rng.uniform(0, min(self.backoff_cap_s, self.backoff_s * 2 ** (attempt - 1)))
            if attempt > self.max_retries or elapsed + delay > self.deadline_s:
                raise EndpointError(
                    f"{method} {self.base_url}{path} failed after {attempt} attempt(s) in {elapsed:.1f}s: {error}",
                    status=status, transient=True, fix="check that the search server is running (aether serve ...)")
            self.retries += 1
            await asyncio.sleep(delay)

    # ------------------------------------------------------------------ API
    async def retrieve_raw(self, queries: list[str], topk: int | None = None, return_scores: bool = True) -> Any:
        """The server's ``/retrieve`` JSON exactly as Search-R1 receives it."""
        return await self.request("POST", "/retrieve",
                                  {"queries": queries, "topk": topk, "return_scores": return_scores})

    async def retrieve(self, queries: list[str], topk: int | None = None) -> list[list[RetrievedDocument]]:
        """Hits per query, with documents parsed from ``contents``."""
        body = await self.retrieve_raw(queries, topk, return_scores=True)
        return [[RetrievedDocument(_document(hit["document"]), float(hit["score"])) for hit in hits]
                for hits in body["result"]]

    async def access(self, urls: list[str]) -> list[Document | None]:
        """Pages by id or url (None for unknown ones)."""
        body = await self.request("POST", "/access", {"urls": urls})
        return [None if page is None else _document(page) for page in body["result"]]

    async def health(self) -> dict[str, Any]:
        """The server's ``/health`` report (index and corpus hashes, sizes, limits)."""
        result: dict[str, Any] = await self.request("GET", "/health")
        return result


def _detail(response: httpx.Response) -> str:
    try:
        return str(orjson.loads(response.content).get("detail", response.text))
    except (orjson.JSONDecodeError, AttributeError):
        return response.text[:500]


def _document(raw: dict[str, Any]) -> Document:
    title, text = parse_contents(str(raw.get("contents", "")))
    return Document(id=str(raw["id"]), title=title, text=text)
