"""The masked sandbox over HTTP (FastAPI): create episode, search, visit, close, trace.

Why an HTTP face: agents in another process (or another machine, e.g. a vLLM
box) must browse the same masked corpus with the same per-episode state.
Every episode lives in this server; its id is a random 128-bit hex string, so
episodes cannot see or guess each other. One open episode per (run, question):
creating a second one is a 409 unless ``replace`` is set (a resumed run).

Endpoints (JSON bodies):

* ``POST /episodes`` ``{question_id, run_id, replace?}`` -> ``{episode_id, question_id, run_id, tools}``
* ``POST /episodes/{id}/search`` ``{query, k?}`` -> ``{documents, call}``
* ``POST /episodes/{id}/visit`` ``{page}`` -> ``{documents, call}``; an unknown or
  still-masked page is a 404 ``{detail, call}`` (same message for both); an
  invalid name (path-like, control characters, too long) is a 422; an empty or over-long query or
  an out-of-range ``k`` is a 422 ``{detail, call}`` from search. A malformed body (not JSON, wrong
  field names or types) is a 422 too. Every request that names an existing episode is logged in
  its action log, valid or not.
* ``POST /episodes/{id}/close`` -> ``{episode_id, trace}`` ; ``GET /episodes/{id}/trace`` -> ``{episode_id, trace}``
  (the trace as the agent saw it).

No agent-facing response carries anything about masked pages: calls are sent
without ``suppressed_ids``, a masked page's refusal is the nonexistent page's
(see ``sandbox.serving``). The full action log, masked ids included, stays on
the server: appended to ``action_log`` (JSONL, fsynced) when an episode closes.
* ``GET /health`` -> release id, question and open-episode counts

The index call runs in a worker thread (``run_in_threadpool``) so a slow
search never blocks the event loop. Binds 127.0.0.1 by default.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from aethersearch.errors import AetherError, ConfigError, ToolError
from aethersearch.jsonl import DurableAppender, loads
from aethersearch.records import ToolCall
from aethersearch.sandbox.episode import Sandbox, SandboxEpisode
from aethersearch.sandbox.serving import PUBLIC_CALL_EXCLUDE
from aethersearch.sandbox.tools import (
    MAX_PAGE_NAME,
    MAX_QUERY_CHARS,
    validate_page_name,
)

MAX_OPEN_EPISODES = 10_000
# Request fields longer than this are refused (422, logged with the argument cut to this length) so the log
# never stores a huge argument; anything shorter reaches the episode, whose own limits refuse and log it.
MAX_BODY_CHARS = 4 * max(MAX_QUERY_CHARS, MAX_PAGE_NAME)


class CreateEpisode(BaseModel):
    """Body of ``POST /episodes``."""

    model_config = ConfigDict(extra="forbid")
    question_id: str = Field(min_length=1, max_length=256)
    run_id: str = Field(default="run", min_length=1, max_length=256)
    replace: bool = False


def _public_json(call: ToolCall) -> dict[str, Any]:
    """The agent-facing JSON of a logged call: the masked-ids field is not even present."""
    return call.model_dump(mode="json", exclude=set(PUBLIC_CALL_EXCLUDE))


def _result_json(documents: list[Any], call: ToolCall) -> dict[str, Any]:
    return {"documents": [d.model_dump(mode="json") for d in documents], "call": _public_json(call)}


def _clip(value: Any) -> Any:
    """A request argument as the log keeps it: strings over MAX_BODY_CHARS cut, other values by their repr."""
    if isinstance(value, str):
        return value if len(value) <= MAX_BODY_CHARS else value[:MAX_BODY_CHARS] + f"... ({len(value)} chars)"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = repr(value)
    return text if len(text) <= MAX_BODY_CHARS else text[:MAX_BODY_CHARS] + "..."


async def _read_body(request: Request, fields: dict[str, type | tuple[type, ...]],
                     required: tuple[str, ...]) -> tuple[dict[str, Any], str | None]:
    """(arguments to log, error or None): the JSON body checked by hand so a malformed one is still logged."""
    raw = await request.body()
    if len(raw) > 8 * MAX_BODY_CHARS:
        return {"body_bytes": len(raw)}, f"request body is {len(raw)} bytes; the limit is {8 * MAX_BODY_CHARS}"
    try:
        body = loads(raw) if raw else None
    except ValueError:
        return {"body": _clip(raw.decode("utf-8", "replace"))}, "request body is not valid JSON"
    if not isinstance(body, dict):
        return {"body": _clip(body)}, "request body must be a JSON object"
    args = {str(k)[:64]: _clip(v) for k, v in list(body.items())[:16]}
    unknown = sorted(set(body) - set(fields))
    if unknown:
        return args, f"unknown field(s) {unknown}; expected {sorted(fields)}"
    missing = [name for name in required if name not in body]
    if missing:
        return args, f"missing field(s) {missing}"
    for name, kind in fields.items():
        if name in body and (not isinstance(body[name], kind) or isinstance(body[name], bool) and kind is int):
            return args, f"field {name!r} has the wrong type ({type(body[name]).__name__})"
        if isinstance(body.get(name), str) and len(body[name]) > MAX_BODY_CHARS:
            return args, f"field {name!r} is {len(body[name])} characters; the limit is {MAX_BODY_CHARS}"
    return body, None


def create_app(sandbox: Sandbox, *, max_open_episodes: int = MAX_OPEN_EPISODES,
               action_log: str | Path | None = None) -> FastAPI:
    """The FastAPI app serving ``sandbox``; episodes are held in memory by this app only.

    ``action_log``: a JSONL file to which each episode's full action log (masked
    ids included) is appended, fsynced, when the episode is closed or replaced;
    it is the server-side record for scoring. Agent-facing responses never
    carry masked ids; ``app.state.episodes`` gives in-process access to the logs.
    """
    appender = DurableAppender(action_log) if action_log is not None else None

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        if appender is not None:
            appender.close()

    app = FastAPI(title="aethersearch masked sandbox", version="1", lifespan=lifespan)
    episodes: dict[str, SandboxEpisode] = {}
    by_key: dict[tuple[str, str], str] = {}
    lock = threading.Lock()
    app.state.episodes = episodes

    def persist(ep: SandboxEpisode) -> list[ToolCall]:
        trace = ep.close_sync()
        if appender is not None and not getattr(ep, "_persisted", False):
            ep._persisted = True  # type: ignore[attr-defined]
            with lock:
                appender.append({"episode_id": ep.episode_id, "question_id": ep.question_id, "run_id": ep.run_id,
                                 "trace": [c.model_dump(mode="json") for c in trace]})
        return trace

    def episode(episode_id: str) -> SandboxEpisode:
        found = episodes.get(episode_id)
        if found is None:
            raise HTTPException(404, f"no episode {episode_id!r}; create one with POST /episodes")
        return found

    def refusal(status: int, call: ToolCall) -> JSONResponse:
        return JSONResponse(status_code=status, content={"detail": call.error, "call": _public_json(call)})

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "release_id": sandbox.release_id, "questions": len(sandbox.masks),
                "open_episodes": sum(1 for e in episodes.values() if not e.closed)}

    @app.post("/episodes")
    def create(body: CreateEpisode) -> dict[str, Any]:
        key = (body.run_id, body.question_id)
        with lock:
            existing = by_key.get(key)
            if existing is not None and not episodes[existing].closed and not body.replace:
                raise HTTPException(409, f"episode {existing} is already open for run {body.run_id!r}, question "
                                         f"{body.question_id!r}; close it or pass replace=true")
            if sum(1 for e in episodes.values() if not e.closed) >= max_open_episodes:
                raise HTTPException(429, f"{max_open_episodes} episodes are open; close finished ones first")
            try:
                new = sandbox.episode(body.question_id, run_id=body.run_id)
            except ConfigError as exc:
                raise HTTPException(404, exc.message) from None
            episodes[new.episode_id] = new
            by_key[key] = new.episode_id
        if existing is not None:
            persist(episodes[existing])
        return {"episode_id": new.episode_id, "question_id": new.question_id, "run_id": new.run_id,
                "tools": list(new.tools)}

    @app.post("/episodes/{episode_id}/search")
    async def search(episode_id: str, request: Request) -> Any:
        ep = episode(episode_id)
        body, error = await _read_body(request, {"query": str, "k": int}, ("query",))
        try:
            if error is not None:
                return refusal(422, ep.log_rejected("search", body, error))
            result = await run_in_threadpool(ep.search_sync, body["query"], body.get("k", 5))
        except ToolError as exc:
            raise HTTPException(409, exc.message) from None
        if result.call.error is not None:
            return refusal(422, result.call)
        return _result_json(result.documents, result.call)

    @app.post("/episodes/{episode_id}/visit")
    async def visit(episode_id: str, request: Request) -> Any:
        ep = episode(episode_id)
        body, error = await _read_body(request, {"page": str}, ("page",))
        try:
            if error is not None:
                return refusal(422, ep.log_rejected("visit", body, error))
            try:
                validate_page_name(body["page"])
                invalid = False
            except ToolError:
                invalid = True
            # An invalid name is refused inside the episode too, so it is logged in the trace.
            result = await run_in_threadpool(ep.visit_sync, body["page"])
        except ToolError as exc:
            raise HTTPException(409, exc.message) from None
        if result.call.error is not None:
            return refusal(422 if invalid else 404, result.call)
        return _result_json(result.documents, result.call)

    @app.post("/episodes/{episode_id}/close")
    def close(episode_id: str) -> dict[str, Any]:
        ep = episode(episode_id)
        persist(ep)
        return {"episode_id": episode_id, "trace": [_public_json(c) for c in ep.trace]}

    @app.get("/episodes/{episode_id}/trace")
    def trace(episode_id: str) -> dict[str, Any]:
        ep = episode(episode_id)
        return {"episode_id": episode_id, "question_id": ep.question_id, "run_id": ep.run_id,
                "closed": ep.closed, "trace": [_public_json(c) for c in ep.trace]}

    @app.exception_handler(AetherError)
    async def aether_error(_request: Any, exc: AetherError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    return app


def serve(sandbox: Sandbox, *, host: str = "127.0.0.1", port: int = 8100,
          action_log: str | Path | None = None) -> None:
    """Run the sandbox server with uvicorn until interrupted (``action_log``: see :func:`create_app`)."""
    import uvicorn

    uvicorn.run(create_app(sandbox, action_log=action_log), host=host, port=port, log_level="warning")
