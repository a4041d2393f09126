"""The Search-R1-compatible retrieval server (FastAPI + uvicorn), with ASearcher's ``/access``.

Wire format (docs/design/conventions.md, "The Search-R1 retrieval API"), so Search-R1's own training
and eval client works unmodified:

* ``POST /retrieve`` ``{"queries": [str], "topk": int|null, "return_scores": bool}`` ->
  ``{"result": [[{"document": {"id", "contents", "url"}, "score"}, ...] per query]}`` when
  ``return_scores`` is true, else ``{"result": [[{"id", "contents", "url"}, ...]]}``; a null
  or 0 ``topk`` means the default (3). ``contents`` and ``id`` are the corpus row's own,
  byte for byte (``"Title"\\nText`` when the corpus gave title and text separately);
  ``url`` is the row's own url, else ``url_prefix`` + the quoted page id (ASearcher's
  client reads ``url`` from every hit and later hands it to ``/access``).
* ``POST /access`` ``{"urls": [str]}`` -> ``{"result": [page or null per url]}`` where a
  page is ``{"url", "id", "title", "contents"}``. A url is a page id, a passage id
  (``Ancient_Rome#1`` opens page ``Ancient_Rome``) or a full URL: the whole path after
  ``url_prefix`` or ``/wiki/`` is the id, so titles containing ``/`` (``AC/DC``) resolve.
* ``GET /health`` -> backend, index and corpus hashes and sizes, and the limits.

Limits are set for Search-R1's shipped training scripts: it sends every active
episode's query of a turn in one request (2,560 with ``train_grpo.sh``, 1,312 with
verl's default validation batch) and crashes on any non-200, so the default batch
limit is far above that. What is bounded instead is what a request can cost: the
body size (413, checked before the body is read), topk, query length and url count
(422), the **hits** of one request (queries x topk over ``max_hits``: 413 at once,
before any search, so a refused request never holds the index worker) and the
**response size** (413 as soon as the documents fetched for one request pass
``max_response_bytes``, a backstop for unusually long documents). Header/body read
timeouts, the idle keep-alive limit and the logging and counting of refusals are
``search.http_guard``'s, shared with the sandbox. It binds 127.0.0.1 by default and
never returns a document that is not in the store.

Concurrency: the index call runs in a thread executor, never on the event loop.
Requests that arrive while the index is busy are **micro-batched**: the next index
call takes every waiting request with the same ``topk`` in one batched
``search()``, which amortises per-call overhead (the whole point of a batched
index) without adding latency when the server is idle. A request of more than
``max_micro_batch`` queries is searched slice by slice, so requests arriving
meanwhile are served between its slices.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError, create_model

from aethersearch.corpus.base import DocumentStore
from aethersearch.corpus.chunking import passage_page
from aethersearch.corpus.importers import row_contents
from aethersearch.errors import ConfigError
from aethersearch.records import Record
from aethersearch.search.base import SearchIndex, StoreRowsIndex
from aethersearch.search.http_guard import (
    CONNECTION_EVENTS,
    GuardMiddleware,
    HTTPProblem,
    HttpTimeouts,
    RefusalLog,
    install_problem_handlers,
    json_body,
    json_int,
    json_integer,
    problem_body,
    problem_responses,
    read_body,
    record_from_options,
    uvicorn_options,
)
from aethersearch.search.modes import RETRIEVAL_MODES, health_facts, resolve_mode_aliases, retrieval_modes
from aethersearch.search.wire import DEFAULT_URL_PREFIX, WireRows, wire_hit, wire_id

__all__ = ["AccessPage", "AccessRequest", "AccessResponse", "HealthResponse", "JSON", "LIMIT_OPTIONS",
    "MicroBatcher", "RETRIEVAL_SERVICE", "ResponseBudget", "ResponseTooLarge", "RetrieveFastPath", "RetrieveRequest",
    "RetrieveResponse", "Retriever", "SERVE_ENV", "ScoredHit", "ServerLimits", "WireDocument", "announce_when_ready",
    "app_from_env", "check_bindable", "create_app", "declared_requests", "id_candidates", "limits_from_options",
    "serve", "too_large"]

JSON = "application/json"
#: What ``aether serve`` calls itself in ``/health`` (so a client can tell it from the masked sandbox).
RETRIEVAL_SERVICE = "aethersearch-retrieval"


class ServerLimits(Record):
    """Input bounds and batching settings of the server (reported by ``/health``)."""

    default_topk: int = Field(default=3, ge=1)
    max_topk: int = Field(default=100, ge=1)
    max_batch: int = Field(default=16384, ge=1, description="queries per /retrieve request (Search-R1 "
                                                             "sends 2,560 per turn with train_grpo.sh)")
    max_query_chars: int = Field(default=4096, ge=1)
    max_body_bytes: int = Field(default=16 << 20, ge=64)
    max_response_bytes: int = Field(default=64 << 20, ge=1024, description="documents fetched for one request")
    max_urls: int = Field(default=64, ge=1, description="urls per /access request")
    url_prefix: str = Field(default=DEFAULT_URL_PREFIX, min_length=1,
                            description="url of a hit without its own url: this + the quoted page id")
    micro_batch: bool = True
    max_micro_batch: int = Field(default=2048, ge=1, description="queries per batched index call; a larger "
                                                                 "request is searched in slices of this size")
    max_hits: int = Field(default=65536, ge=1, description="queries x topk of one /retrieve request, refused "
                                                           "(413) before searching")
    timeouts: HttpTimeouts = Field(default_factory=HttpTimeouts)
    workers: int = Field(default=1, ge=1, description="index calls running at once (executor threads)")


class RetrieveRequest(BaseModel):
    """Search-R1's ``QueryRequest`` with strict types (``"topk": true`` is a 422, never topk 1), plus
    AetherSearch's ``mode`` (absent: the served index as built)."""

    model_config = ConfigDict(extra="ignore")

    queries: list[StrictStr]
    topk: Annotated[StrictInt, BeforeValidator(json_integer)] | None = Field(default=None, description="hits per query; null or 0 means the server "
                                                              "default; at most the server's max_topk")
    return_scores: StrictBool = False
    mode: StrictStr | None = Field(default=None, description="AetherSearch's retrieval mode: hybrid, dense or "
                                                             "sparse, as this server offers (absent: the index as "
                                                             "built)")


class AccessRequest(BaseModel):
    """ASearcher's ``AccessRequest``."""

    model_config = ConfigDict(extra="ignore")

    urls: list[StrictStr]


def declared_requests(limits: ServerLimits, modes: Sequence[str]) -> tuple[type[BaseModel], type[BaseModel]]:
    """``RetrieveRequest`` and ``AccessRequest`` as this server's OpenAPI declares them: with its limits.

    Why per app: the limits are the server's options (``--max-topk``, ``--max-batch``,
    ``--max-query-chars``, ``--max-urls``) and the modes are what its index offers, so
    a client or fuzzer reading ``/openapi.json`` is told exactly what is refused
    (schemathesis's "schema-valid request rejected" found every undeclared one). The
    checks themselves stay in :func:`_validate_retrieve` (their messages name the
    option to raise); both read the same ``limits``. Only the joint hits limit
    (queries x topk, a 413) cannot be said in JSON Schema: ``queries`` describes it.
    """
    query = Annotated[StrictStr, Field(max_length=limits.max_query_chars)]
    mode_type: Any = Literal[tuple(modes)] | None if modes else None  # no modes offered: only null
    retrieve = create_model(
        "RetrieveRequest", __base__=RetrieveRequest,
        queries=(list[query], Field(max_length=limits.max_batch, description=(
            f"at most {limits.max_batch} queries of at most {limits.max_query_chars} characters; queries x topk "
            f"over {limits.max_hits} hits is refused (413) before searching"))),
        topk=(json_int(0, limits.max_topk) | None, Field(default=None, description=(
            f"hits per query, at most {limits.max_topk}; null or 0 means the server default "
            f"{limits.default_topk}"))),
        mode=(mode_type, Field(default=None, description=(
            "AetherSearch's retrieval mode, one this server offers (absent: the index as built)"))))
    access = create_model("AccessRequest", __base__=AccessRequest, urls=(list[StrictStr], Field(
        max_length=limits.max_urls, description=f"at most {limits.max_urls} urls")))
    return retrieve, access


class WireDocument(BaseModel):
    """A hit as the wire carries it (the corpus row's own id, which may be a number)."""

    id: str | int
    contents: str
    url: str
    title: str = Field(description="AetherSearch's hit title, split from contents as their retriever splits it")
    text: str = Field(description="AetherSearch's hit text, split from contents as their retriever splits it")


class ScoredHit(BaseModel):
    """A hit with ``return_scores: true``."""

    document: WireDocument
    score: float


class RetrieveResponse(BaseModel):
    """``{"result": [...]}``: per query, scored hits (``return_scores``) or plain documents."""

    result: list[list[ScoredHit]] | list[list[WireDocument]]


class AccessPage(BaseModel):
    """A page ``/access`` found."""

    url: str
    id: str | int
    title: str
    contents: str


class AccessResponse(BaseModel):
    """``{"result": [page or null per url]}``."""

    result: list[AccessPage | None]


class HealthResponse(BaseModel):
    """``GET /health`` (further fields are allowed: backends add their own)."""

    model_config = ConfigDict(extra="allow")
    status: str
    service: str = Field(default=RETRIEVAL_SERVICE, description="always aethersearch-retrieval (the masked "
                                                                "sandbox says aethersearch-sandbox)")


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=JSON)


_contents = row_contents  # the row's own ``contents`` when the corpus had one, else ``"Title"\nText``


def id_candidates(url: str, prefix: str) -> list[str]:
    """Ids an ASearcher ``/access`` url may name, most specific first.

    The whole path after ``prefix`` (or after ``/wiki/``, or the ``title=`` query of
    ``index.php``) is the id, so ``.../wiki/AC/DC`` names ``AC/DC``, never ``DC``; the
    url itself is also tried, so bare ids and passage ids work too.
    """
    found: list[str] = []
    if url.startswith(prefix):
        found.append(unquote(url[len(prefix):]))
    elif "://" in url:
        parts = urlsplit(url.replace("index.php/", "index.php?title="))
        if "title=" in parts.query:
            found.append(unquote(parts.query.split("title=", 1)[1].split("&", 1)[0]))
        elif "/wiki/" in parts.path:
            found.append(unquote(parts.path.split("/wiki/", 1)[1]))
        else:
            found.append(unquote(parts.path.rstrip("/").rsplit("/", 1)[-1]))
    found.append(url)
    out: list[str] = []
    for candidate in found:
        for variant in (candidate, candidate.split("#", 1)[0], candidate.replace("_", " "), candidate.replace(" ", "_")):
            if variant and variant not in out:
                out.append(variant)
    return out


class ResponseTooLarge(Exception):
    """The documents fetched for one request passed ``max_response_bytes``."""


class ResponseBudget:
    """Bytes a request's reply may still take (one object shared by the slices of a sliced request)."""

    def __init__(self, left: int) -> None:
        self.left = left


class Retriever:
    """Runs ``index.search`` and fetches contents; the part that runs in the executor."""

    def __init__(self, index: SearchIndex, store: DocumentStore, limits: ServerLimits | None = None, *,
                 pages_separate: bool = False, mode_aliases: dict[str, str] | None = None) -> None:
        self.index = index
        self.store = store
        self.limits = limits or ServerLimits()
        self.pages_separate = pages_separate  # hits are passages whose url names their page
        #: the store's row access (hits read by row, documents by id through their row); None: by id only
        self._rows = store.rows
        self.modes = retrieval_modes(index)
        #: declared aliases (``--mode-alias``): requested mode -> the served mode that answers it
        self.aliases = resolve_mode_aliases(mode_aliases or {}, self.modes)
        #: per served index: (it, its rows path or None, its pre-encoded hits or None)
        self._paths: dict[int, tuple[SearchIndex, StoreRowsIndex | None, WireRows | None]] = {}

    def index_for(self, mode: str | None) -> SearchIndex:
        """The index a request's ``mode`` names; a 400 naming the valid modes otherwise."""
        if mode is None:
            return self.index
        if mode not in RETRIEVAL_MODES:
            raise HTTPProblem(400, f"unknown retrieval mode {mode!r}; valid modes: {', '.join(RETRIEVAL_MODES)} "
                                   f"(this server offers: {', '.join(self.modes) or 'none'}; omit mode for the default)")
        if mode not in self.modes:
            if mode in self.aliases:
                return self.modes[self.aliases[mode]]
            backend = self.index.backend or type(self.index).__name__
            hint = (f"; to answer {mode!r} with it, start the server with --mode-alias {mode}={backend}"
                    if self.modes else "")
            raise HTTPProblem(400, f"retrieval mode {mode!r} is not offered by this server's {backend} index; it "
                                   f"offers: {', '.join(self.modes) or 'none (omit mode)'}{hint}")
        return self.modes[mode]

    def fetch(self, doc_id: str) -> dict[str, Any] | None:
        """``{"id", "contents", "title", "text"}`` of a stored document, or None if absent."""
        if self._rows is not None:
            row = self._rows.row_of(doc_id)
            if row is None:
                return None
            raw: dict[str, Any] = self._rows.raw_at(row)
        else:
            if doc_id not in self.store:
                return None
            raw = self.store.get(doc_id).model_dump()
        return raw

    def resolve(self, url: str) -> dict[str, Any] | None:
        """The stored row an ``/access`` url names (page or passage id, or full URL), or None."""
        for candidate in id_candidates(url, self.limits.url_prefix):
            raw = self.fetch(candidate)
            if raw is None and passage_page(candidate) != candidate:
                raw = self.fetch(passage_page(candidate))
            if raw is not None:
                return raw
        return None

    def wire(self, raw: dict[str, Any]) -> dict[str, Any]:
        """A stored row as a hit on the wire (:func:`~aethersearch.search.wire.wire_hit`)."""
        return wire_hit(raw, self.limits.url_prefix, pages_separate=self.pages_separate)

    def wire_rows(self, index: SearchIndex) -> WireRows | None:
        """``index``'s pre-encoded hits when they hold what this server would build (same url prefix, rows
        that are their own pages), else None."""
        rows = index.wire_rows
        if rows is None or self.pages_separate or rows.prefix != self.limits.url_prefix:
            return None
        return rows

    def hits(self, results: list[list[tuple[Any, float]]], budget: ResponseBudget | None = None, *,
             by_row: bool = False, encoded: WireRows | None = None) -> list[list[tuple[Any, float]]]:
        """Documents for one request's hits; ``ResponseTooLarge`` once they pass the response limit.

        A hit names its document by id, or by store row when ``by_row`` (see :meth:`rows_of`); with
        ``encoded`` (rows only) each hit is its pre-encoded JSON, an ``orjson.Fragment`` the reply splices
        in. ``budget`` is shared by the slices of one request searched apart (see :class:`MicroBatcher`).
        """
        left = budget.left if budget is not None else self.limits.max_response_bytes
        out: list[list[tuple[Any, float]]] = []
        for hits in results:
            if encoded is not None:
                scored, size = encoded.scored(hits)
                left -= size
                if left < 0:
                    raise ResponseTooLarge()
                out.append(scored)
                continue
            if by_row and self._rows is not None:
                raws: list[dict[str, Any] | None] = list(self._rows.raw_rows([row for row, _ in hits]))
            else:
                raws = [self.fetch(doc_id) for doc_id, _ in hits]
            scores = [float(score) for (_, score), raw in zip(hits, raws, strict=True) if raw is not None]
            docs: list[Any] = [self.wire(raw) for raw in raws if raw is not None]  # never a phantom document
            for doc in docs:  # contents, and the title and text split from it, both travel
                left -= 2 * len(doc["contents"]) + len(doc["url"]) + len(str(doc["id"])) + 64
            if left < 0:
                raise ResponseTooLarge()
            out.append(list(zip(docs, scores, strict=True)))
        if budget is not None:
            budget.left = left
        return out

    def rows_of(self, index: SearchIndex) -> StoreRowsIndex | None:
        """``index`` when it answers with rows of this server's own store (:class:`StoreRowsIndex`), else None.

        Reading a hit by its row skips turning the row into an id and the id back into a row.
        """
        if self._rows is None or not isinstance(index, StoreRowsIndex) or index.store is not self.store:
            return None
        return index

    def __call__(self, requests: list[list[str]], k: int,
                 budgets: Sequence[ResponseBudget | None] | None = None, mode: str | None = None) -> list[Any]:
        """One batched index call for several requests' queries; per request its hits or its error."""
        flat = [q for queries in requests for q in queries]
        index = self.index_for(mode)
        path = self._paths.get(id(index))
        if path is None or path[0] is not index:  # decided once per index: isinstance and getattr per call add up
            by_rows = self.rows_of(index)
            path = self._paths[id(index)] = (index, by_rows, self.wire_rows(index) if by_rows is not None else None)
        _, by_rows, encoded = path
        results: list[list[tuple[Any, float]]] = []
        if flat:
            results = by_rows.search_rows(flat, k) if by_rows is not None else list(index.search(flat, k))
        out: list[Any] = []
        start = 0
        for number, queries in enumerate(requests):
            try:
                out.append(self.hits(results[start:start + len(queries)], budgets[number] if budgets else None,
                                     by_row=by_rows is not None, encoded=encoded))
            except ResponseTooLarge:
                out.append(HTTPProblem(413, too_large(self.limits, len(queries), k)))
            start += len(queries)
        return out


def too_large(limits: ServerLimits, queries: int, k: int) -> str:
    """The 413 message for a reply that would pass the response limit."""
    return (f"the reply to {queries} queries at topk {k} would exceed the response limit of "
            f"{limits.max_response_bytes:,} bytes; send fewer queries per request or a smaller topk, "
            "or raise the limit with `aether serve --max-response-mb`")


_Item = tuple[list[str], tuple[int, str | None], "asyncio.Future[Any]", ResponseBudget]


class MicroBatcher:
    """Coalesces concurrent ``(queries, k)`` requests into batched executor calls.

    A request of more than ``max_micro_batch`` queries is searched one slice at a
    time, each slice queued only once the previous one is done, so a request that
    arrives meanwhile joins the next index call instead of waiting for the whole
    large request (no head-of-line blocking). The slices share one response budget.
    """

    def __init__(self, fn: Retriever, executor: ThreadPoolExecutor, limits: ServerLimits) -> None:
        self.fn = fn
        self.executor = executor
        self.limits = limits
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[_Item] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self.calls = 0  # index calls made (tests and /health read it)

    def _ensure_started(self) -> asyncio.Queue[_Item]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._queue is None:
            self._loop, self._queue = loop, asyncio.Queue()
            self._workers = [loop.create_task(self._work()) for _ in range(self.limits.workers)]
        return self._queue

    async def run(self, queries: list[str], k: int,
                  mode: str | None = None) -> list[list[tuple[dict[str, Any], float]]]:
        """Results for ``queries`` at ``k`` (and ``mode``), computed in (possibly shared) batched calls, slice by slice."""
        budget = ResponseBudget(self.limits.max_response_bytes)
        step = self.limits.max_micro_batch
        out: list[list[tuple[dict[str, Any], float]]] = []
        for start in range(0, len(queries), step):
            result = await self._one(queries[start:start + step], k, budget, mode)
            if isinstance(result, HTTPProblem):  # the reply passed the response limit (Retriever's only refusal)
                raise HTTPProblem(413, too_large(self.limits, len(queries), k))
            out.extend(result)
        return out

    async def _one(self, queries: list[str], k: int, budget: ResponseBudget, mode: str | None) -> Any:
        loop = asyncio.get_running_loop()
        if not self.limits.micro_batch:
            self.calls += 1
            (result,) = await loop.run_in_executor(self.executor, self.fn, [queries], k, [budget], mode)
            return result
        queue = self._ensure_started()
        future: asyncio.Future[Any] = loop.create_future()
        queue.put_nowait((queries, (k, mode), future, budget))
        return await future

    async def _work(self) -> None:
        assert self._queue is not None
        queue, loop = self._queue, asyncio.get_running_loop()
        while True:
            batch = [await queue.get()]
            size = len(batch[0][0])
            while not queue.empty() and size < self.limits.max_micro_batch:
                item = queue.get_nowait()
                batch.append(item)
                size += len(item[0])
            groups: dict[tuple[int, str | None], list[_Item]] = {}
            for item in batch:
                groups.setdefault(item[1], []).append(item)
            for (k, mode), items in groups.items():
                try:
                    self.calls += 1
                    results = await loop.run_in_executor(self.executor, self.fn, [item[0] for item in items], k,
                                                         [item[3] for item in items], mode)
                except Exception as exc:  # noqa: BLE001 -- forwarded: every waiting request gets the error
                    for _, _, future, _ in items:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, _, future, _), result in zip(items, results, strict=True):
                    if not future.done():
                        future.set_result(result)


class RetrieveFastPath:
    """Pure-ASGI middleware answering ``POST /retrieve`` before FastAPI's router and middleware stack.

    Why: with one query per request the per-request framework cost is a large part of
    the server's CPU (py-spy put ~12% of samples in the FastAPI/Starlette layers
    between uvicorn and the handler), and that path carries Search-R1's rollout traffic.
    Same status codes, limits and messages as the routed handler (body limits and
    timeouts are :class:`~aethersearch.search.http_guard.GuardMiddleware`'s, mounted
    outside this one); errors other than ``HTTPProblem`` propagate to Starlette's
    ServerErrorMiddleware (a 500).
    """

    def __init__(self, app: Any, answer: Any) -> None:
        self.app = app
        self.answer = answer

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/retrieve" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            status, payload = 200, await self.answer(await read_body(receive))
        except HTTPProblem as exc:
            status, payload = exc.status, problem_body(str(exc.detail))
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


def _parse(body: bytes, model: type[BaseModel]) -> Any:
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise HTTPProblem(422, f"invalid request: {where}: {first['msg']}") from None


def _validate_retrieve(req: RetrieveRequest, limits: ServerLimits) -> int:
    if len(req.queries) > limits.max_batch:
        raise HTTPProblem(422, f"batch of {len(req.queries)} queries exceeds the limit of {limits.max_batch} "
                               "queries per request")
    topk = req.topk or limits.default_topk
    if topk < 0:
        raise HTTPProblem(422, f"topk must be >= 0 (got {req.topk}); null or 0 means the default "
                               f"{limits.default_topk}")
    if topk > limits.max_topk:
        raise HTTPProblem(422, f"topk {topk} exceeds the limit of {limits.max_topk}")
    if len(req.queries) * topk > limits.max_hits:
        raise HTTPProblem(413, f"{len(req.queries)} queries at topk {topk} ask for {len(req.queries) * topk:,} hits, "
                               f"over the limit of {limits.max_hits:,} hits per request (refused before searching); "
                               "send fewer queries per request or a smaller topk, or raise the limit with "
                               "`aether serve --max-hits`")
    for number, query in enumerate(req.queries):
        if len(query) > limits.max_query_chars:
            raise HTTPProblem(422, f"query {number} has {len(query)} characters, exceeding the limit of "
                                   f"{limits.max_query_chars} characters")
    return topk


def create_app(index: SearchIndex, store: DocumentStore, limits: ServerLimits | None = None, *,
               pages: DocumentStore | None = None, mode_aliases: dict[str, str] | None = None) -> FastAPI:
    """The FastAPI app serving ``index`` with contents from ``store``.

    ``pages`` is the store ``/access`` reads whole pages from when the index holds
    passages (``corpus import --chunk ... --pages-out``); by default it is ``store``.
    ``mode_aliases`` (``--mode-alias``) answers a retrieval mode the index lacks with
    one it has (``search.modes``); an alias that names nothing served is a ConfigError.
    """
    limits = limits or ServerLimits()
    retriever = Retriever(index, store, limits, pages_separate=pages is not None, mode_aliases=mode_aliases)
    page_reader = Retriever(index, pages, limits) if pages is not None else retriever
    executor = ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="aether-index")
    batcher = MicroBatcher(retriever, executor, limits)
    app = FastAPI(title="aethersearch retrieval server", docs_url=None, redoc_url=None)
    refusals = RefusalLog()
    app.state.batcher = batcher
    app.state.limits = limits
    app.state.refusals = refusals
    # whether the index's pre-encoded hits (search.wire) are spliced into replies, and why not when not
    own_rows = index.wire_rows
    wire_rows_state = ("none" if own_rows is None else "used" if retriever.wire_rows(index) is not None else
                       f"unused: written for url prefix {own_rows.prefix!r}, served with {limits.url_prefix!r}"
                       + (" and passages whose urls name their pages" if pages is not None else ""))

    @app.exception_handler(HTTPProblem)
    async def _problem(_request: Request, exc: HTTPProblem) -> Response:
        return _json({"detail": exc.detail}, exc.status)

    # Plain Starlette routes (``add_route``): the handlers parse their own bodies, so FastAPI's
    # per-request dependency solving would only add overhead on the hot path.
    async def answer(raw: bytes) -> bytes:
        req = _parse(raw, RetrieveRequest)
        topk = _validate_retrieve(req, limits)
        retriever.index_for(req.mode)  # an unknown or unserved mode is a 400 before any work
        results = await batcher.run(req.queries, topk, req.mode) if req.queries else []
        body: list[list[Any]]
        if req.return_scores:
            body = [[{"document": doc, "score": score} for doc, score in hits] for hits in results]
        else:
            body = [[doc for doc, _ in hits] for hits in results]
        return orjson.dumps({"result": body})

    async def retrieve(request: Request) -> Response:  # reached only if the fast path is bypassed
        return Response(await answer(await read_body(request.receive)), media_type=JSON)

    async def access(request: Request) -> Response:
        req = _parse(await read_body(request.receive), AccessRequest)
        if len(req.urls) > limits.max_urls:
            raise HTTPProblem(422, f"{len(req.urls)} urls exceed the limit of {limits.max_urls} urls per request")

        def pages() -> list[dict[str, Any] | None]:
            out: list[dict[str, Any] | None] = []
            budget = limits.max_response_bytes
            for url in req.urls:
                raw = page_reader.resolve(url)
                if raw is None:
                    out.append(None)
                    continue
                page = {"url": url, "id": wire_id(raw), "title": raw.get("title", ""), "contents": _contents(raw)}
                budget -= len(page["contents"]) + len(page["title"]) + len(url) + 64
                if budget < 0:
                    raise HTTPProblem(413, f"the pages for {len(req.urls)} urls exceed the response limit of "
                                           f"{limits.max_response_bytes:,} bytes; ask for fewer urls per request")
                out.append(page)
            return out

        return _json({"result": await asyncio.get_running_loop().run_in_executor(executor, pages)})

    async def health(_request: Request) -> Response:
        return _json({
            "status": "ok", "service": RETRIEVAL_SERVICE, "backend": index.backend or type(index).__name__,
            "index_hash": index.index_hash, "corpus_hash": index.corpus_hash,
            "store_hash": store.content_hash, "documents": len(store),
            "limits": limits.model_dump(), "index_calls": batcher.calls, "refusals": refusals.health(),
            "connections": CONNECTION_EVENTS.health(),
            "wire_rows": wire_rows_state,
            **health_facts(index, store, retriever.modes, mode_aliases),
        })

    # Routes parse their own bodies (only ``request``: no dependency solving on the hot path); the
    # OpenAPI description is declared beside them so schema-driven clients and fuzzers see the truth.
    body_errors = (400, 408, 413, 422)
    declared_retrieve, declared_access = declared_requests(limits, [*retriever.modes, *retriever.aliases])
    app.add_api_route("/retrieve", retrieve, methods=["POST"], response_class=Response, openapi_extra=json_body(
        declared_retrieve), responses={200: {"model": RetrieveResponse, "description": "hits per query"},
                                     **problem_responses(*body_errors)})
    app.add_api_route("/access", access, methods=["POST"], response_class=Response, openapi_extra=json_body(
        declared_access), responses={200: {"model": AccessResponse, "description": "a page or null per url"},
                                   **problem_responses(*body_errors)})
    app.add_api_route("/health", health, methods=["GET"], response_class=Response,
                      responses={200: {"model": HealthResponse, "description": "hashes, sizes, limits, refusals"}})
    install_problem_handlers(app)
    app.add_middleware(RetrieveFastPath, answer=answer)
    app.add_middleware(GuardMiddleware, max_body_bytes=limits.max_body_bytes,
                       body_timeout_s=limits.timeouts.body_timeout_s, refusals=refusals)
    return app


SERVE_ENV = "AETHER_SERVE_CONFIG"


def _open_app(index_dir: str, limits: ServerLimits | None, pages_dir: str | None,
              mode_aliases: dict[str, str] | None = None) -> FastAPI:
    from aethersearch.corpus.store import open_store
    from aethersearch.search.index_dir import open_index

    opened = open_index(index_dir)
    opened.index.warm_up()  # JIT-compile (numba) before the first client waits on it
    pages = open_store(pages_dir) if pages_dir else None
    return create_app(opened.index, opened.store, limits, pages=pages, mode_aliases=mode_aliases)


def app_from_env() -> FastAPI:
    """App factory for multi-process serving: each uvicorn worker process opens the index (memory-mapped,
    so the processes share the page cache) from the settings ``serve`` put in the environment."""
    settings = orjson.loads(os.environ[SERVE_ENV])
    return _open_app(settings["index"], ServerLimits.model_validate(settings["limits"]), settings["pages"],
                     settings.get("mode_aliases"))


LIMIT_OPTIONS = {"max_topk": "--max-topk", "max_batch": "--max-batch", "max_query_chars": "--max-query-chars",
                 "max_body_bytes": "--max-body-mb", "max_response_bytes": "--max-response-mb",
                 "max_urls": "--max-urls", "workers": "--workers", "url_prefix": "--url-prefix",
                 "default_topk": "--default-topk", "max_micro_batch": "--max-micro-batch", "max_hits": "--max-hits",
                 "header_timeout_s": "--header-timeout-s", "body_timeout_s": "--body-timeout-s",
                 "keep_alive_s": "--keep-alive-s"}


def limits_from_options(**values: Any) -> ServerLimits:
    """``ServerLimits`` from command-line values; a bad value is a ``ConfigError`` naming its option."""
    return record_from_options(ServerLimits, "aether serve", LIMIT_OPTIONS, **values)


def check_bindable(host: str, port: int) -> None:
    """``ConfigError`` unless ``host:port`` is a valid, free address (checked before the index loads)."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port {port} is not a TCP port", fix="use a port between 1 and 65535")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host!r} does not resolve: {exc.strerror}",
                          fix="use an address such as 127.0.0.1 or 0.0.0.0") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}",
                              fix="choose another --port (or stop what is using it)") from None


def _probe_host(host: str) -> str:
    return "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)


def announce_when_ready(host: str, port: int, on_ready: Callable[[str], None], *,
                        poll_s: float = 0.05, give_up: threading.Event | None = None) -> threading.Thread:
    """Call ``on_ready(url)`` once ``GET /health`` answers 200 on ``host:port``, from a daemon thread.

    Why poll: uvicorn reports nothing a caller can wait on (and with several worker
    processes the parent never serves), so "ready" means what a client sees: the port
    accepts and the app answers. A server that fails to start never announces.
    """
    import httpx

    url = f"http://{host}:{port}"
    probe = f"http://{_probe_host(host)}:{port}/health"

    def wait() -> None:
        while give_up is None or not give_up.is_set():
            try:
                if httpx.get(probe, timeout=2.0).status_code == 200:
                    on_ready(url)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(poll_s)

    thread = threading.Thread(target=wait, name="aether-ready", daemon=True)
    thread.start()
    return thread


def serve(index_dir: str, *, host: str = "127.0.0.1", port: int = 8000, limits: ServerLimits | None = None,
          pages_dir: str | None = None, processes: int = 1, log_level: str = "warning",
          http: str = "auto", loop: str = "auto", on_ready: Callable[[str], None] | None = None,
          mode_aliases: dict[str, str] | None = None) -> None:
    """Serve an index directory (and optionally a page store for ``/access``) until interrupted.

    ``processes > 1`` runs that many uvicorn worker processes on one port; HTTP parsing
    then uses more than one core (micro-batching happens within each process).
    ``http``/``loop`` pick uvicorn's HTTP parser and event loop: ``auto`` uses httptools
    and uvloop when installed (``uvicorn[standard]``), which cuts the per-request cost
    that dominates one-query requests; ``h11``/``asyncio`` force the pure-Python ones.
    ``on_ready(url)`` is called once the server answers ``/health`` (never if start-up fails).
    ``mode_aliases``: see :func:`create_app`.
    """
    import importlib.util

    import uvicorn

    for what, value, choices in (("http", http, ("auto", "h11", "httptools")), ("loop", loop, ("auto", "asyncio", "uvloop"))):
        if value not in choices:
            raise ConfigError(f"unknown --{what} {value!r}", fix=f"use one of: {', '.join(choices)}")
        if value in ("httptools", "uvloop") and importlib.util.find_spec(value) is None:
            raise ConfigError(f"--{what} {value} needs the {value} package", fix="pip install 'uvicorn[standard]'")
    if processes < 1:
        raise ConfigError(f"--processes {processes} must be at least 1", fix="pass --processes 1 or more")
    check_bindable(host, port)
    protocol = uvicorn_options(http, (limits or ServerLimits()).timeouts)
    stop = threading.Event()
    try:
        if processes == 1:
            app = _open_app(index_dir, limits, pages_dir, mode_aliases)
            if on_ready is not None:
                announce_when_ready(host, port, on_ready, give_up=stop)
            uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False, loop=loop, **protocol)
            return
        from aethersearch.search.index_dir import open_index

        opened = open_index(index_dir)  # fail here, with a clean message, rather than in every worker
        resolve_mode_aliases(mode_aliases or {}, retrieval_modes(opened.index))
        if pages_dir:
            from aethersearch.corpus.store import open_store

            open_store(pages_dir)
        os.environ[SERVE_ENV] = orjson.dumps({"index": str(index_dir), "pages": pages_dir,
                                              "limits": (limits or ServerLimits()).model_dump(),
                                              "mode_aliases": mode_aliases or {}}).decode()
        if on_ready is not None:
            announce_when_ready(host, port, on_ready, give_up=stop)
        uvicorn.run("aethersearch.search.server:app_from_env", factory=True, workers=processes, host=host,
                    port=port, log_level=log_level, access_log=False, loop=loop, **protocol)
    finally:
        stop.set()
