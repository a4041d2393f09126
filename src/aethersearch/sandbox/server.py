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
  an out-of-range ``k`` is a 422 ``{detail, call}`` from search. Every refusal is logged in the
  episode trace, as in-process (only bodies of the wrong shape are refused before the episode)
* ``POST /episodes/{id}/close`` -> ``{episode_id, trace}`` ; ``GET /episodes/{id}/trace`` -> ``{episode_id, trace}``
* ``GET /health`` -> release id, question and open-episode counts

The index call runs in a worker thread (``run_in_threadpool``) so a slow
search never blocks the event loop. Binds 127.0.0.1 by default.
"""

from __future__ import annotations

import threading
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from aethersearch.errors import AetherError, ConfigError, ToolError
from aethersearch.sandbox.episode import Sandbox, SandboxEpisode
from aethersearch.sandbox.tools import MAX_PAGE_NAME, MAX_QUERY_CHARS, validate_page_name

MAX_OPEN_EPISODES = 10_000
# Request fields longer than this are rejected unlogged (422) so a trace never stores a huge argument;
# anything shorter reaches the episode, whose own limits (MAX_QUERY_CHARS, MAX_PAGE_NAME) refuse and log it.
MAX_BODY_CHARS = 4 * max(MAX_QUERY_CHARS, MAX_PAGE_NAME)


class CreateEpisode(BaseModel):
    """Body of ``POST /episodes``."""

    model_config = ConfigDict(extra="forbid")
    question_id: str = Field(min_length=1, max_length=256)
    run_id: str = Field(default="run", min_length=1, max_length=256)
    replace: bool = False


class SearchBody(BaseModel):
    """Body of ``POST /episodes/{id}/search``."""

    model_config = ConfigDict(extra="forbid")
    # Only a hard size cap here: an empty or over-long query and an out-of-range k are refused by the
    # episode itself, so the refusal is logged in the trace exactly as in-process.
    query: str = Field(max_length=MAX_BODY_CHARS)
    k: int = 5


class VisitBody(BaseModel):
    """Body of ``POST /episodes/{id}/visit``."""

    model_config = ConfigDict(extra="forbid")
    page: str = Field(max_length=MAX_BODY_CHARS)  # names are validated (and logged) by the episode


def _result_json(documents: list[Any], call: Any) -> dict[str, Any]:
    return {"documents": [d.model_dump(mode="json") for d in documents], "call": call.model_dump(mode="json")}


def create_app(sandbox: Sandbox, *, max_open_episodes: int = MAX_OPEN_EPISODES) -> FastAPI:
    """The FastAPI app serving ``sandbox``; episodes are held in memory by this app only."""
    app = FastAPI(title="aethersearch masked sandbox", version="1")
    episodes: dict[str, SandboxEpisode] = {}
    by_key: dict[tuple[str, str], str] = {}
    lock = threading.Lock()

    def episode(episode_id: str) -> SandboxEpisode:
        found = episodes.get(episode_id)
        if found is None:
            raise HTTPException(404, f"no episode {episode_id!r}; create one with POST /episodes")
        return found

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
            if existing is not None:
                episodes[existing].close_sync()
            episodes[new.episode_id] = new
            by_key[key] = new.episode_id
        return {"episode_id": new.episode_id, "question_id": new.question_id, "run_id": new.run_id,
                "tools": list(new.tools)}

    @app.post("/episodes/{episode_id}/search")
    async def search(episode_id: str, body: SearchBody) -> dict[str, Any] | JSONResponse:
        ep = episode(episode_id)
        try:
            result = await run_in_threadpool(ep.search_sync, body.query, body.k)
        except ToolError as exc:
            raise HTTPException(409, exc.message) from None
        if result.call.error is not None:
            return JSONResponse(status_code=422, content={"detail": result.call.error,
                                                          "call": result.call.model_dump(mode="json")})
        return _result_json(result.documents, result.call)

    @app.post("/episodes/{episode_id}/visit")
    async def visit(episode_id: str, body: VisitBody) -> Any:
        ep = episode(episode_id)
        try:
            validate_page_name(body.page)
            invalid = None
        except ToolError as exc:
            invalid = exc.message
        try:
            # An invalid name is refused inside the episode too, so it is logged in the trace.
            result = await run_in_threadpool(ep.visit_sync, body.page)
        except ToolError as exc:
            raise HTTPException(409, exc.message) from None
        if invalid is not None:
            return JSONResponse(status_code=422, content={"detail": invalid,
                                                          "call": result.call.model_dump(mode="json")})
        if result.call.error is not None:
            return JSONResponse(status_code=404, content={"detail": result.call.error,
                                                          "call": result.call.model_dump(mode="json")})
        return _result_json(result.documents, result.call)

    @app.post("/episodes/{episode_id}/close")
    def close(episode_id: str) -> dict[str, Any]:
        trace = episode(episode_id).close_sync()
        return {"episode_id": episode_id, "trace": [c.model_dump(mode="json") for c in trace]}

    @app.get("/episodes/{episode_id}/trace")
    def trace(episode_id: str) -> dict[str, Any]:
        ep = episode(episode_id)
        return {"episode_id": episode_id, "question_id": ep.question_id, "run_id": ep.run_id,
                "closed": ep.closed, "trace": [c.model_dump(mode="json") for c in ep.trace]}

    @app.exception_handler(AetherError)
    async def aether_error(_request: Any, exc: AetherError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    return app


def serve(sandbox: Sandbox, *, host: str = "127.0.0.1", port: int = 8100) -> None:
    """Run the sandbox server with uvicorn until interrupted."""
    import uvicorn

    uvicorn.run(create_app(sandbox), host=host, port=port, log_level="warning")
