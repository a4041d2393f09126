"""The Search-R1-compatible retrieval server (FastAPI + uvicorn), with ASearcher's ``/access``.

Wire format (DESIGN.md, "Search-R1 retrieval API"), so Search-R1's own training
and eval client works unmodified:

* ``POST /retrieve`` ``{"queries": [str], "topk": int|null, "return_scores": bool}`` ->
  ``{"result": [[{"document": {"id", "contents"}, "score"}, ...] per query]}`` when
  ``return_scores`` is true, else ``{"result": [[{"id", "contents"}, ...]]}``; a null or
  0 ``topk`` means the default (3). ``contents`` is ``"Title"\\nText``.
* ``POST /access`` ``{"urls": [str]}`` -> ``{"result": [page or null per url]}`` where a
  page is ``{"url", "id", "title", "contents"}`` and a url is a page id or any URL whose
  last path segment is one (ASearcher's local server returns null for unknown pages).
* ``GET /health`` -> backend, index and corpus hashes and sizes, and the limits.

Unlike Search-R1's server it binds 127.0.0.1 by default, bounds every input (413 for
the body size, 422 for topk, batch size, query length and url count, each message
naming the limit) and never returns a document that is not in the store.

Concurrency: the index call runs in a thread executor, never on the event loop.
Requests that arrive while the index is busy are **micro-batched**: the next index
call takes every waiting request with the same ``topk`` in one batched
``search()``, which amortises per-call overhead (the whole point of a batched
index) without adding latency when the server is idle.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import unquote, urlsplit

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aethersearch.corpus.base import DocumentStore
from aethersearch.records import Record
from aethersearch.search.base import SearchIndex

JSON = "application/json"


class ServerLimits(Record):
    """Input bounds and batching settings of the server (reported by ``/health``)."""

    default_topk: int = Field(default=3, ge=1)
    max_topk: int = Field(default=100, ge=1)
    max_batch: int = Field(default=512, ge=1, description="queries per /retrieve request")
    max_query_chars: int = Field(default=4096, ge=1)
    max_body_bytes: int = Field(default=1 << 20, ge=64)
    max_urls: int = Field(default=64, ge=1, description="urls per /access request")
    micro_batch: bool = True
    max_micro_batch: int = Field(default=2048, ge=1, description="queries per batched index call")
    workers: int = Field(default=1, ge=1, description="index calls running at once (executor threads)")


class RetrieveRequest(BaseModel):
    """Search-R1's ``QueryRequest``."""

    model_config = ConfigDict(extra="ignore")

    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


class AccessRequest(BaseModel):
    """ASearcher's ``AccessRequest``."""

    model_config = ConfigDict(extra="ignore")

    urls: list[str]


class HTTPProblem(Exception):
    """A request refused with a status code and a message saying the limit."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


def _json(body: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type=JSON)


def _contents(raw: dict[str, Any]) -> str:
    return f'"{raw.get("title", "")}"\n{raw.get("text", "")}'


class Retriever:
    """Runs ``index.search`` and fetches contents; the part that runs in the executor."""

    def __init__(self, index: SearchIndex, store: DocumentStore) -> None:
        self.index = index
        self.store = store
        self._raw = getattr(store, "raw_at", None)
        self._row_of = getattr(store, "row_of", None)

    def fetch(self, doc_id: str) -> dict[str, Any] | None:
        """``{"id", "contents", "title", "text"}`` of a stored document, or None if absent."""
        if self._raw is not None and self._row_of is not None:
            row = self._row_of(doc_id)
            if row is None:
                return None
            raw: dict[str, Any] = self._raw(row)
        else:
            if doc_id not in self.store:
                return None
            raw = self.store.get(doc_id).model_dump()
        return raw

    def __call__(self, queries: list[str], k: int) -> list[list[tuple[dict[str, str], float]]]:
        out = []
        for hits in self.index.search(queries, k):
            rows = []
            for doc_id, score in hits:
                raw = self.fetch(doc_id)
                if raw is not None:  # never a phantom document
                    rows.append(({"id": doc_id, "contents": _contents(raw)}, float(score)))
            out.append(rows)
        return out


class MicroBatcher:
    """Coalesces concurrent ``(queries, k)`` requests into batched executor calls."""

    def __init__(self, fn: Retriever, executor: ThreadPoolExecutor, limits: ServerLimits) -> None:
        self.fn = fn
        self.executor = executor
        self.limits = limits
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[list[str], int, asyncio.Future[Any]]] | None = None
        self._workers: list[asyncio.Task[None]] = []
        self.calls = 0  # index calls made (tests and /health read it)

    def _ensure_started(self) -> asyncio.Queue[tuple[list[str], int, asyncio.Future[Any]]]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._queue is None:
            self._loop, self._queue = loop, asyncio.Queue()
            self._workers = [loop.create_task(self._work()) for _ in range(self.limits.workers)]
        return self._queue

    async def run(self, queries: list[str], k: int) -> list[list[tuple[dict[str, str], float]]]:
        """Results for ``queries`` at ``k``, computed in a (possibly shared) batched call."""
        loop = asyncio.get_running_loop()
        if not self.limits.micro_batch:
            self.calls += 1
            return await loop.run_in_executor(self.executor, self.fn, queries, k)
        queue = self._ensure_started()
        future: asyncio.Future[Any] = loop.create_future()
        queue.put_nowait((queries, k, future))
        return await future  # type: ignore[no-any-return]

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
            groups: dict[int, list[tuple[list[str], int, asyncio.Future[Any]]]] = {}
            for item in batch:
                groups.setdefault(item[1], []).append(item)
            for k, items in groups.items():
                flat = [q for item in items for q in item[0]]
                try:
                    self.calls += 1
                    results = await loop.run_in_executor(self.executor, self.fn, flat, k)
                except Exception as exc:  # the index failed: every waiting request gets the error
                    for _, _, future in items:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                start = 0
                for queries, _, future in items:
                    if not future.done():
                        future.set_result(results[start:start + len(queries)])
                    start += len(queries)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPProblem(413, f"request body of {declared} bytes exceeds the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPProblem(413, f"request body exceeds the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class RetrieveFastPath:
    """Pure-ASGI middleware answering ``POST /retrieve`` before FastAPI's router and middleware stack.

    Why: with one query per request the per-request framework cost is a large part of
    the server's CPU (py-spy put ~12% of samples in the FastAPI/Starlette layers
    between uvicorn and the handler), and that path carries Search-R1's rollout traffic.
    Same status codes, limits and messages as the routed handler; errors other than
    ``HTTPProblem`` propagate to Starlette's ServerErrorMiddleware (a 500).
    """

    def __init__(self, app: Any, answer: Any, max_body_bytes: int) -> None:
        self.app = app
        self.answer = answer
        self.limit = max_body_bytes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/retrieve" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        try:
            status, payload = 200, await self.answer(await self._body(scope, receive))
        except HTTPProblem as exc:
            status, payload = exc.status, orjson.dumps({"detail": exc.detail})
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    async def _body(self, scope: dict[str, Any], receive: Any) -> bytes:
        for name, value in scope["headers"]:
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                raise HTTPProblem(413, f"request body of {value.decode()} bytes exceeds the limit of "
                                       f"{self.limit} bytes")
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise HTTPProblem(400, "client disconnected before sending the whole body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                raise HTTPProblem(413, f"request body exceeds the limit of {self.limit} bytes")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


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
    for number, query in enumerate(req.queries):
        if len(query) > limits.max_query_chars:
            raise HTTPProblem(422, f"query {number} has {len(query)} characters, exceeding the limit of "
                                   f"{limits.max_query_chars} characters")
    return topk


def page_id_of(url: str) -> str:
    """The page id an ASearcher url names: the id itself, or the last path segment of a URL."""
    if "://" not in url:
        return url
    parts = urlsplit(url)
    if "title=" in parts.query:
        return unquote(parts.query.split("title=", 1)[1].split("&", 1)[0])
    return unquote(parts.path.rstrip("/").rsplit("/", 1)[-1])


def create_app(index: SearchIndex, store: DocumentStore, limits: ServerLimits | None = None, *,
               pages: DocumentStore | None = None) -> FastAPI:
    """The FastAPI app serving ``index`` with contents from ``store``.

    ``pages`` is the store ``/access`` reads whole pages from when the index holds
    passages (``corpus import --chunk ... --pages-out``); by default it is ``store``.
    """
    limits = limits or ServerLimits()
    retriever = Retriever(index, store)
    page_reader = Retriever(index, pages) if pages is not None else retriever
    executor = ThreadPoolExecutor(max_workers=limits.workers, thread_name_prefix="aether-index")
    batcher = MicroBatcher(retriever, executor, limits)
    app = FastAPI(title="aethersearch retrieval server", docs_url=None, redoc_url=None)
    app.state.batcher = batcher
    app.state.limits = limits

    @app.exception_handler(HTTPProblem)
    async def _problem(_request: Request, exc: HTTPProblem) -> Response:
        return _json({"detail": exc.detail}, exc.status)

    # Plain Starlette routes (``add_route``): the handlers parse their own bodies, so FastAPI's
    # per-request dependency solving would only add overhead on the hot path.
    async def answer(raw: bytes) -> bytes:
        req = _parse(raw, RetrieveRequest)
        topk = _validate_retrieve(req, limits)
        results = await batcher.run(req.queries, topk) if req.queries else []
        body: list[list[Any]]
        if req.return_scores:
            body = [[{"document": doc, "score": score} for doc, score in hits] for hits in results]
        else:
            body = [[doc for doc, _ in hits] for hits in results]
        return orjson.dumps({"result": body})

    async def retrieve(request: Request) -> Response:  # reached only if the fast path is bypassed
        return Response(await answer(await _read_body(request, limits.max_body_bytes)), media_type=JSON)

    async def access(request: Request) -> Response:
        req = _parse(await _read_body(request, limits.max_body_bytes), AccessRequest)
        if len(req.urls) > limits.max_urls:
            raise HTTPProblem(422, f"{len(req.urls)} urls exceed the limit of {limits.max_urls} urls per request")

        def pages() -> list[dict[str, Any] | None]:
            out: list[dict[str, Any] | None] = []
            for url in req.urls:
                raw = page_reader.fetch(page_id_of(url))
                out.append(None if raw is None else {"url": url, "id": raw["id"], "title": raw.get("title", ""),
                                                     "contents": _contents(raw)})
            return out

        return _json({"result": await asyncio.get_running_loop().run_in_executor(executor, pages)})

    async def health(_request: Request) -> Response:
        return _json({
            "status": "ok", "backend": getattr(index, "backend", type(index).__name__),
            "index_hash": index.index_hash, "corpus_hash": index.corpus_hash,
            "store_hash": store.content_hash, "documents": len(store),
            "limits": limits.model_dump(), "index_calls": batcher.calls,
        })

    app.add_middleware(RetrieveFastPath, answer=answer, max_body_bytes=limits.max_body_bytes)
    app.router.add_route("/retrieve", retrieve, methods=["POST"])
    app.router.add_route("/access", access, methods=["POST"])
    app.router.add_route("/health", health, methods=["GET"])
    return app


SERVE_ENV = "AETHER_SERVE_CONFIG"


def _open_app(index_dir: str, limits: ServerLimits | None, pages_dir: str | None) -> FastAPI:
    from aethersearch.corpus.store import open_store
    from aethersearch.search.index_dir import open_index

    opened = open_index(index_dir)
    warm_up = getattr(opened.index, "warm_up", None)  # JIT-compile (numba) before the first client waits on it
    if callable(warm_up):
        warm_up()
    pages = open_store(pages_dir) if pages_dir else None
    return create_app(opened.index, opened.store, limits, pages=pages)


def app_from_env() -> FastAPI:
    """App factory for multi-process serving: each uvicorn worker process opens the index (memory-mapped,
    so the processes share the page cache) from the settings ``serve`` put in the environment."""
    settings = orjson.loads(os.environ[SERVE_ENV])
    return _open_app(settings["index"], ServerLimits.model_validate(settings["limits"]), settings["pages"])


def serve(index_dir: str, *, host: str = "127.0.0.1", port: int = 8000, limits: ServerLimits | None = None,
          pages_dir: str | None = None, processes: int = 1, log_level: str = "warning",
          http: str = "auto", loop: str = "auto") -> None:
    """Serve an index directory (and optionally a page store for ``/access``) until interrupted.

    ``processes > 1`` runs that many uvicorn worker processes on one port; HTTP parsing
    then uses more than one core (micro-batching happens within each process).
    ``http``/``loop`` pick uvicorn's HTTP parser and event loop: ``auto`` uses httptools
    and uvloop when installed (``uvicorn[standard]``), which cuts the per-request cost
    that dominates one-query requests; ``h11``/``asyncio`` force the pure-Python ones.
    """
    import importlib.util

    import uvicorn

    from aethersearch.errors import ConfigError

    for what, value, choices in (("http", http, ("auto", "h11", "httptools")), ("loop", loop, ("auto", "asyncio", "uvloop"))):
        if value not in choices:
            raise ConfigError(f"unknown --{what} {value!r}", fix=f"use one of: {', '.join(choices)}")
        if value in ("httptools", "uvloop") and importlib.util.find_spec(value) is None:
            raise ConfigError(f"--{what} {value} needs the {value} package", fix="pip install 'uvicorn[standard]'")
    if processes <= 1:
        app = _open_app(index_dir, limits, pages_dir)
        uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=False, http=http, loop=loop)
        return
    from aethersearch.search.index_dir import open_index

    open_index(index_dir)  # fail here, with a clean message, rather than in every worker
    os.environ[SERVE_ENV] = orjson.dumps({"index": str(index_dir), "pages": pages_dir,
                                          "limits": (limits or ServerLimits()).model_dump()}).decode()
    uvicorn.run("aethersearch.search.server:app_from_env", factory=True, workers=processes, host=host, port=port,
                log_level=log_level, access_log=False, http=http, loop=loop)
