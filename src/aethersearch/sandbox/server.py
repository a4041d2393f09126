"""The masked sandbox over HTTP (FastAPI): create episode, search, visit, close, trace.

Why an HTTP face: agents in another process (or another machine, e.g. a vLLM
box) must browse the same masked corpus with the same per-episode state.
Every episode lives in this server; its id is a random 128-bit hex string, so
episodes cannot see or guess each other. One open episode per (run, question):
creating a second one is a 409 unless ``replace`` is set (a resumed run), and
``replace`` takes over only with the owner token the episode's creation
returned (403 otherwise): another client cannot close an episode that is not
its own. A request without ``run_id`` gets a run id of its own.

Endpoints (JSON bodies; every refusal is ``{"detail": str}``, plus ``call`` when it was logged):

* ``POST /episodes`` ``{question_id, run_id?, replace?, owner?}`` -> ``{episode_id, question_id, run_id, tools, owner}``
* ``POST /episodes/{id}/search`` ``{query, k?, seq?}`` -> ``{documents, call}``
* ``POST /episodes/{id}/visit`` ``{page, seq?}`` -> ``{documents, call}``; an unknown or
  still-masked page is a 404 ``{detail, call}`` (same message for both); an invalid
  name, an empty or over-long query, an out-of-range ``k`` or a malformed body is a
  422 ``{detail, call}``; a body over the size limit a 413, one slower than the body
  timeout a 408, both ``{detail, call}``. Every request that names an open episode is
  logged in its action log, valid or not. ``seq`` (optional) is the number of actions
  the client has already had answered in this episode: a request whose reply was lost
  (the connection broke, the sandbox restarted) is sent again with the same ``seq``
  and answered from the log, never run or logged twice.
* ``POST /episodes/{id}/close`` (optional body ``{answer: str | null}``: an external harness's final
  answer, kept in the action log for ``aether import sandbox``; null is no answer) -> ``{episode_id, trace}``; ``GET /episodes/{id}/trace`` ->
  ``{episode_id, question_id, run_id, closed, trace}`` (the trace as the agent saw it;
  a closed episode's is read back from the action log).
* ``GET /health`` -> ``ready`` (true once warmed up), release id, question, open- and
  recovered-episode counts, the limits and the refusals counted by status.

**Bounded state, durable actions** (see ``sandbox.action_log``): every action is
appended to the action log, fsynced (group-committed), before its reply is sent;
a closed episode leaves memory once its close is durable. A restarted sandbox
reads the log and recovers its open episodes with the same trace and unlock
state (an episode whose question is not in the served release is refused with
a message saying so). Each episode takes at most ``max_actions`` actions (429
beyond, with the fix); at most ``max_open_episodes`` are open at once (429).
Without an ``action_log`` the log goes to a private temporary file (nothing
survives a restart then).

No agent-facing response carries anything about masked pages: calls are sent
without ``suppressed_ids``, a masked page's refusal is the nonexistent page's
(see ``sandbox.serving``). The full action log, masked ids included, stays on
the server. The index call runs in a worker thread (``run_in_threadpool``) so a
slow search never blocks the event loop. Binds 127.0.0.1 by default.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import tempfile
from array import array
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import orjson
from fastapi import FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, StrictStr
from pydantic.json_schema import SkipJsonSchema

from aethersearch.errors import AetherError, ConfigError, ToolError
from aethersearch.records import Document, Record, ToolCall
from aethersearch.sandbox.action_log import NO_ANSWER, ActionLog, LoggedEpisode, recover
from aethersearch.sandbox.action_record import episode_ceiling_bytes
from aethersearch.sandbox.contract import MASK_POLICY, SANDBOX_SERVICE
from aethersearch.sandbox.episode import MAX_K, Sandbox, SandboxEpisode
from aethersearch.sandbox.request_body import MAX_BODY_CHARS, check_body
from aethersearch.sandbox.serving import PUBLIC_CALL_EXCLUDE
from aethersearch.sandbox.tools import MAX_PAGE_NAME, MAX_QUERY_CHARS, QUERY_PATTERN, page_name_pattern, validate_page_name
from aethersearch.search.http_guard import (
    CONNECTION_EVENTS,
    GuardMiddleware,
    HTTPProblem,
    HttpTimeouts,
    RefusalLog,
    install_problem_handlers,
    json_body,
    json_integer,
    problem_responses,
    read_body,
    uvicorn_options,
)

__all__ = ["ActionReply", "CloseBody", "CreateEpisode", "Created", "EpisodeTable", "Health", "Live", "LoggedRefusal",
    "MAX_ANSWER_CHARS", "MAX_EPISODE_MEMORY_MB", "MAX_OPEN_EPISODES", "RECENTLY_CLOSED", "SandboxLimits",
    "SearchBody", "Seq", "TraceReply", "VisitBody", "bounded_limits", "create_app", "serve"]

MAX_OPEN_EPISODES = 10_000
#: the default ceiling of what open episodes may hold (``--max-episode-memory-mb``)
MAX_EPISODE_MEMORY_MB = 4_096
#: a final answer's length: a short span, and any answer this long fits the body limit however it is escaped
#: (a character JSON-escaped as a surrogate pair is 12 bytes; 2,000 of them were refused as 413, not 422)
MAX_ANSWER_CHARS = MAX_BODY_CHARS // 4
#: closed episode ids remembered so a late request is told "closed" (409) rather than "unknown" (404)
RECENTLY_CLOSED = 4_096


class SandboxLimits(Record):
    """What one client can make the sandbox hold (reported by ``/health``)."""

    max_open_episodes: int = Field(default=MAX_OPEN_EPISODES, ge=1, description=(
        "open episodes; left at its default, lowered to what --max-episode-memory-mb holds"))
    max_actions: int = Field(default=400, ge=1, description="actions per episode (WebDetective's agents make at "
                                                            "most 40 tool calls); 429 beyond")
    max_episode_memory_mb: int = Field(default=MAX_EPISODE_MEMORY_MB, ge=1, description=(
        "the most memory open episodes may hold, at worst (open episodes x actions x bytes per action); the "
        "sandbox refuses to start when its caps allow more"))
    max_body_bytes: int = Field(default=8 * MAX_BODY_CHARS, ge=256, description="request body size; 413 beyond")
    timeouts: HttpTimeouts = Field(default_factory=HttpTimeouts)


class CreateEpisode(BaseModel):
    """Body of ``POST /episodes``."""

    model_config = ConfigDict(extra="forbid")
    question_id: StrictStr = Field(min_length=1, max_length=256)
    run_id: StrictStr | None = Field(default=None, min_length=1, max_length=256,
                                     description="omitted: a run id of its own (no other client shares it)")
    replace: StrictBool = False
    owner: StrictStr | None = Field(default=None, min_length=16, max_length=256,
                                    description="the client's secret for this episode (omitted: the server makes "
                                                "one); replace=true takes over an open episode only with its owner")


#: an action's ``seq``: a JSON integer >= 0 (``2.0`` included, as JSON Schema counts it)
Seq = Annotated[StrictInt, Field(ge=0), BeforeValidator(json_integer)]


def _no_default(schema: dict[str, Any]) -> None:
    """Drop a declared ``"default": null`` (an omitted ``seq`` is not a null one: null is refused)."""
    schema.pop("default", None)


class SearchBody(BaseModel):
    """Body of ``POST /episodes/{id}/search`` (checked by hand so a malformed one is still logged).

    Declared as strictly as ``sandbox.tools`` refuses: a query with a non-space
    character, at most ``MAX_QUERY_CHARS``; ``seq`` may be omitted but is never null.
    """

    model_config = ConfigDict(extra="forbid")
    query: StrictStr = Field(min_length=1, max_length=MAX_QUERY_CHARS, pattern=QUERY_PATTERN,
                             description="keywords, with at least one non-space character")
    k: Annotated[StrictInt, Field(ge=1, le=MAX_K), BeforeValidator(json_integer)] = 5
    seq: Seq | SkipJsonSchema[None] = Field(default=None, description=(
        "actions already answered in this episode (a retried request carries the same seq); omit it rather "
        "than send null"), json_schema_extra=_no_default)


class VisitBody(BaseModel):
    """Body of ``POST /episodes/{id}/visit``: a page name ``sandbox.tools.validate_page_name`` accepts."""

    model_config = ConfigDict(extra="forbid")
    page: StrictStr = Field(min_length=1, max_length=MAX_PAGE_NAME, pattern=page_name_pattern(),
                            description="a page id or title: no '/', '\\', '..' or control characters, "
                                        "not starting with '.'")
    seq: Seq | SkipJsonSchema[None] = Field(default=None, description="as for search",
                                                  json_schema_extra=_no_default)


class CloseBody(BaseModel):
    """Optional body of ``POST /episodes/{id}/close``: an external harness's final answer, kept in the action log.

    ``aether import sandbox`` reads it back as the episode's prediction (a refusal
    is an answer shaped like one, "I don't know"). ``null``, or no body, is no
    answer (``no_answer_tag`` when imported).
    """

    model_config = ConfigDict(extra="forbid")
    answer: StrictStr | None = Field(max_length=MAX_ANSWER_CHARS)


class Created(BaseModel):
    """Reply of ``POST /episodes``."""

    episode_id: str
    question_id: str
    run_id: str
    tools: list[str]
    owner: str = Field(description="the owner token: replace=true of this (run, question) needs it")


class ActionReply(BaseModel):
    """Reply of an action: the documents served and the logged call (no masked ids)."""

    documents: list[Document]
    call: dict[str, Any]


class LoggedRefusal(BaseModel):
    """A refused action: why, and the call as logged (no masked ids)."""

    detail: str
    call: dict[str, Any] | None = None


class TraceReply(BaseModel):
    """An episode's trace as the agent saw it."""

    episode_id: str
    question_id: str | None = None
    run_id: str | None = None
    closed: bool | None = None
    trace: list[dict[str, Any]]


class Health(BaseModel):
    """``GET /health``."""

    model_config = ConfigDict(extra="allow")
    status: str
    ready: bool
    service: str = Field(default=SANDBOX_SERVICE, description="always aethersearch-sandbox (a retrieval server "
                                                              "says aethersearch-retrieval)")
    mask_policy: str = Field(default=MASK_POLICY, description="the masking rules by version (run.json records it)")
    corpus_hash: str | None = None
    index_hash: str | None = None


def _public_json(call: ToolCall) -> dict[str, Any]:
    """The agent-facing JSON of a logged call: the masked-ids field is not even present."""
    return call.model_dump(mode="json", exclude=set(PUBLIC_CALL_EXCLUDE))


def _json_reply(content: dict[str, Any], status: int = 200) -> Response:
    """A JSON reply encoded once by orjson.

    Why not return the dict: with ``response_model=None`` FastAPI walks a returned
    dict with ``jsonable_encoder`` (recursive Python, every key and value) and then
    ``json.dumps`` it; the content here is already plain JSON types
    (``model_dump(mode="json")``), so that walk was pure per-request CPU.
    """
    return Response(content=orjson.dumps(content), status_code=status, media_type="application/json")


def _result_json(documents: list[Any], call: ToolCall) -> Response:
    return _json_reply({"documents": [d.model_dump(mode="json") for d in documents], "call": _public_json(call)})


def _refusal(status: int, call: ToolCall) -> Response:
    return _json_reply({"detail": call.error, "call": _public_json(call)}, status)


class Live:
    """An open episode on the server: the episode, the status each action was answered with, its lock."""

    __slots__ = ("episode", "lock", "owner_sha256", "statuses")

    def __init__(self, episode: SandboxEpisode, statuses: Sequence[int] | None = None,
                 owner_sha256: str | None = None) -> None:
        self.episode = episode
        self.statuses = array("H", statuses or ())  # 2 bytes an action (a list held 8)
        self.owner_sha256 = owner_sha256  # only the client holding this token's preimage may replace the episode
        self.lock = asyncio.Lock()  # one action of an episode at a time: its seq is its place in the log


def _warm(sandbox: Sandbox) -> None:
    """First-request costs paid before ``/health`` says ready: JIT compile, page cache, the title map."""
    sandbox.backend.warm_up()
    sandbox.backend.search(["warm up the index"], 1)
    sandbox.resolver.resolve("warm up the title map")


def create_app(sandbox: Sandbox, *, max_open_episodes: int | None = None,
               action_log: str | Path | None = None, limits: SandboxLimits | None = None) -> FastAPI:
    """The FastAPI app serving ``sandbox``; open episodes are held in memory, every action in ``action_log``.

    ``action_log``: the JSONL event log (``sandbox.action_log``), masked ids included:
    the server-side record for scoring, and what a restarted sandbox recovers its open
    episodes from. Agent-facing responses never carry masked ids;
    ``app.state.episodes`` maps open episode ids to their ``SandboxEpisode``.
    """
    limits = limits or SandboxLimits()
    if max_open_episodes is not None:
        limits = SandboxLimits.model_validate({**limits.model_dump(exclude_unset=True),
                                               "max_open_episodes": max_open_episodes})
    limits, ceiling = bounded_limits(limits, sandbox)
    if action_log is None:
        action_log = Path(tempfile.mkdtemp(prefix="aether-sandbox-")) / "actions.jsonl"
    recovered = recover(action_log)
    log = ActionLog(action_log, size=recovered.size, seen=recovered.seen)
    refusals = RefusalLog()
    episodes = EpisodeTable()
    state = {"ready": False}
    for logged in recovered.open.values():
        episodes.recover(sandbox, logged)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(_warm, sandbox)
        await log.served(sandbox.release_id, sandbox.corpus_hash, sandbox.index_hash, MASK_POLICY)
        state["ready"] = True
        yield
        await asyncio.to_thread(log.close)

    # no /docs or /redoc: their pages load Swagger UI and ReDoc from a CDN (nothing an offline or
    # loopback-only box can show) and are no part of the API; /openapi.json is the description
    app = FastAPI(title="aethersearch masked sandbox", version="2", lifespan=lifespan, docs_url=None,
                  redoc_url=None)
    app.state.episodes = episodes
    app.state.refusals = refusals
    app.state.action_log = log

    async def persist(found: Live, answer: str | None | object = NO_ANSWER) -> list[ToolCall]:
        """Close an episode durably (with the client's answer, when it sent one), then let it leave memory."""
        ep = found.episode
        trace = ep.close_sync()
        await log.closed(ep.episode_id, ep.question_id, ep.run_id, len(trace), answer)
        episodes.forget(ep.episode_id)
        return trace

    @app.get("/health", response_model=Health)
    def health() -> dict[str, Any]:
        return {"status": "ok" if state["ready"] else "warming up", "ready": state["ready"],
                "service": SANDBOX_SERVICE, "mask_policy": MASK_POLICY, "tools": ["search", "visit"],
                "corpus_hash": sandbox.corpus_hash, "index_hash": sandbox.index_hash,
                "release_id": sandbox.release_id, "questions": len(sandbox.masks), "open_episodes": len(episodes),
                "recovered_episodes": len(recovered.open) - len(episodes.unrecoverable),
                "unrecoverable_episodes": len(episodes.unrecoverable), "limits": limits.model_dump(),
                "episode_memory_ceiling_bytes": ceiling,
                "refusals": refusals.health(), "connections": CONNECTION_EVENTS.health()}

    @app.post("/episodes", response_model=Created,
              responses=problem_responses(400, 403, 404, 408, 409, 413, 422, 429))
    async def create(body: CreateEpisode) -> dict[str, Any]:
        run_id = body.run_id or f"run-{secrets.token_hex(8)}"
        owner = body.owner or secrets.token_hex(16)
        owner_sha256 = hashlib.sha256(owner.encode("utf-8", "surrogatepass")).hexdigest()
        key = (run_id, body.question_id)
        existing = episodes.by_key.get(key)
        if existing is not None and not body.replace:
            raise HTTPException(409, f"episode {existing} is already open for run {run_id!r}, question "
                                     f"{body.question_id!r}; close it or pass replace=true with its owner token")
        held = episodes.live[existing].owner_sha256 if existing is not None else None
        if existing is not None and held is not None and held != owner_sha256:
            raise HTTPException(403, f"episode {existing} of run {run_id!r}, question {body.question_id!r} belongs "
                                     "to the client that opened it; replace=true needs the owner token its "
                                     "creation returned (or use a run id of your own)")
        if existing is None and len(episodes) >= limits.max_open_episodes:
            raise HTTPException(429, f"{limits.max_open_episodes} episodes are open; close finished ones first "
                                     "(or raise --max-open-episodes)")
        try:
            new = sandbox.episode(body.question_id, run_id=run_id)
        except ConfigError as exc:
            raise HTTPException(404, exc.message) from None
        if existing is not None:
            await persist(episodes.live[existing])
        episodes.add(Live(new, owner_sha256=owner_sha256))
        await log.opened(new.episode_id, new.question_id, new.run_id, owner_sha256)
        return {"episode_id": new.episode_id, "question_id": new.question_id, "run_id": new.run_id,
                "tools": list(new.tools), "owner": owner}

    async def act(episode_id: str, request: Request, tool: str) -> Any:
        found = episodes.open(episode_id)
        fields: dict[str, type] = {"query": str, "k": int, "seq": int} if tool == "search" else {"page": str,
                                                                                                "seq": int}
        body: dict[str, Any]
        error: str | None
        try:
            raw = await read_body(request.receive)
        except HTTPProblem as exc:  # over the size limit or too slow: still logged in the episode
            body, error, status = {"refused": exc.status_code}, str(exc.detail), exc.status_code
        else:
            body, error = check_body(raw, fields, ("query",) if tool == "search" else ("page",))
            status = 422
        async with found.lock:
            ep = found.episode
            if ep.closed:
                raise HTTPException(409, f"episode {episode_id} is closed; open a new episode")
            seq = body.get("seq") if error is None else None
            if isinstance(seq, int) and seq < ep.actions:
                return _replay(found, seq, tool, body)
            if isinstance(seq, int) and seq > ep.actions:
                raise HTTPException(409, f"seq {seq} is ahead of episode {episode_id}, which has answered "
                                         f"{ep.actions} actions; send seq={ep.actions}")
            if ep.actions >= limits.max_actions:
                reason = (f"episode {episode_id} has taken its {limits.max_actions} actions (the per-episode "
                          "cap); close it and answer, or raise the cap with `aether sandbox serve --max-actions`")
                await log.refused(episode_id, 429, reason)
                raise HTTPException(429, reason)
            documents: list[Document] = []
            if error is not None:
                public = ep.log_rejected(tool, body, error)
            elif tool == "search":
                documents, public = await run_in_threadpool(ep.search_sync, body["query"], body.get("k", 5))
                status = 200 if public.error is None else 422
            else:
                documents, public = await run_in_threadpool(ep.visit_sync, body["page"])
                status = 200 if public.error is None else _visit_refusal_status(body["page"])
            found.statuses.append(status)
            await log.called(episode_id, ep.actions - 1, status, ep.take_last_call())
            if status != 200:
                return _refusal(status, public)
            # the documents the tool just served; documents_of (rebuilding them, on the event loop) is
            # only for a retried seq: calling it here rendered every reply twice
            return _result_json(documents, public)

    action_docs: dict[str, Any] = {
        "response_model": None,
        "responses": {200: {"model": ActionReply, "description": "the documents served and the logged call"},
                      **problem_responses(400, 409, 429),
                      **{s: {"model": LoggedRefusal, "description": d} for s, d in (
                          (404, "no such open episode, or (with a call) no such page or a masked one"),
                          (408, "the body was too slow (logged)"), (413, "the body is over the limit (logged)"),
                          (422, "malformed body or an invalid argument (logged)"))}}}

    @app.post("/episodes/{episode_id}/search", openapi_extra=json_body(SearchBody), **action_docs)
    async def search(episode_id: str, request: Request) -> Any:
        return await act(episode_id, request, "search")

    @app.post("/episodes/{episode_id}/visit", openapi_extra=json_body(VisitBody), **action_docs)
    async def visit(episode_id: str, request: Request) -> Any:
        return await act(episode_id, request, "visit")

    @app.post("/episodes/{episode_id}/close", response_model=TraceReply, responses=problem_responses(400, 404, 408, 409, 413, 422))
    async def close(episode_id: str, body: CloseBody | None = None) -> dict[str, Any]:
        found = episodes.live.get(episode_id)
        if found is None:
            episodes.refuse_unrecoverable(episode_id)
            return await trace(episode_id)  # closing twice answers the trace again
        async with found.lock:
            trace_calls = await persist(found, NO_ANSWER if body is None else body.answer)
        return {"episode_id": episode_id, "trace": [_public_json(c) for c in trace_calls]}

    @app.get("/episodes/{episode_id}/trace", response_model=TraceReply, responses=problem_responses(404, 409))
    async def trace(episode_id: str) -> dict[str, Any]:
        found = episodes.live.get(episode_id)
        if found is not None:
            ep = found.episode
            return {"episode_id": episode_id, "question_id": ep.question_id, "run_id": ep.run_id,
                    "closed": ep.closed, "trace": [_public_json(c) for c in ep.trace]}
        episodes.refuse_unrecoverable(episode_id)
        # an id the log never opened is answered here, in O(1), without reading the log or leaving the loop
        known = len(episode_id) <= 64 and episode_id in log.seen
        logged = await run_in_threadpool(log.read_trace, episode_id) if known else None
        if logged is None:
            raise HTTPException(404, f"no episode {episode_id!r} in this sandbox's action log")
        return {"episode_id": episode_id, "question_id": logged.question_id, "run_id": logged.run_id,
                "closed": logged.closed, "trace": [_public_json(c) for c in logged.calls]}

    @app.exception_handler(AetherError)
    async def aether_error(_request: Any, exc: AetherError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    @app.exception_handler(ToolError)
    async def tool_error(_request: Any, exc: ToolError) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": exc.message})

    install_problem_handlers(app)
    app.add_middleware(GuardMiddleware, max_body_bytes=limits.max_body_bytes,
                       body_timeout_s=limits.timeouts.body_timeout_s, refusals=refusals)
    return app


def bounded_limits(limits: SandboxLimits, sandbox: Sandbox) -> tuple[SandboxLimits, int]:
    """The limits with open episodes capped to the memory ceiling, and the ceiling in bytes.

    The ceiling is open episodes x (an episode's fixed part + actions x the worst bytes
    of one action: ``sandbox.action_record``), with the most masked pages of any
    question served. ``max_open_episodes`` left at its default is lowered to fit
    ``max_episode_memory_mb``; set explicitly beyond it, the sandbox refuses to start.
    """
    max_masked = max((len(mask.masked) for mask in sandbox.masks.values() if mask is not None), default=0)
    per_episode = episode_ceiling_bytes(limits.max_actions, MAX_K, max_masked)
    budget = limits.max_episode_memory_mb << 20
    fits = budget // per_episode
    if limits.max_open_episodes > fits:
        if "max_open_episodes" in limits.model_fields_set or fits < 1:
            raise ConfigError(
                f"{limits.max_open_episodes:,} open episodes x {limits.max_actions} actions could hold "
                f"{limits.max_open_episodes * per_episode / 2**20:,.0f} MB (at worst {per_episode:,} bytes an "
                f"episode), over --max-episode-memory-mb {limits.max_episode_memory_mb:,}",
                fix=f"lower --max-open-episodes to {max(fits, 1):,} or less, lower --max-actions, or raise "
                    "--max-episode-memory-mb")
        limits = limits.model_copy(update={"max_open_episodes": int(fits)})
    return limits, limits.max_open_episodes * per_episode


def _visit_refusal_status(page: str) -> int:
    """An invalid page name is a 422; an unknown or masked page a 404 (the same for both)."""
    try:
        validate_page_name(page)
    except ToolError:
        return 422
    return 404


def _asked(tool: str, body: dict[str, Any]) -> dict[str, Any]:
    """The arguments a valid request logs (``SandboxEpisode.search_sync``/``visit_sync`` record these)."""
    return {"query": body["query"], "k": body.get("k", 5)} if tool == "search" else {"page": body["page"]}


def _replay(found: Live, seq: int, tool: str, body: dict[str, Any]) -> Any:
    """Answer a retried request (same ``seq``) from the log: same status, same documents, nothing logged.

    Only the same action is a retry: another action sent with a logged ``seq`` is a
    client whose count went wrong, and answering it with the logged reply would hand
    it the documents of a request it did not make (409, naming the logged action).
    """
    call = found.episode.call_at(seq)
    if call.tool != tool or call.arguments != _asked(tool, body):
        raise HTTPException(409, f"seq {seq} of episode {found.episode.episode_id} was {call.tool} "
                                 f"{orjson.dumps(call.arguments).decode()}, not this {tool} "
                                 f"{orjson.dumps(_asked(tool, body)).decode()}; a retry must resend the same action, "
                                 f"a new action takes seq={found.episode.actions}")
    status = found.statuses[seq]
    if status != 200:
        return _refusal(status, call)
    return _result_json(found.episode.documents_of(seq), call)


class EpisodeTable:
    """The server's open episodes and what it remembers of closed ones: one object instead of five closures.

    ``live``: open episode id -> :class:`Live`; ``by_key``: (run id, question id) -> the open episode of that
    question in that run; ``recently_closed``: the last ``RECENTLY_CLOSED`` closed ids (a request to one is a
    409 that points at its trace, not a 404); ``unrecoverable``: ids open when the sandbox stopped whose
    question the release served now lacks, with the reason. As a mapping (``app.state.episodes``) it gives
    each open id's :class:`SandboxEpisode`.
    """

    def __init__(self) -> None:
        self.live: dict[str, Live] = {}
        self.by_key: dict[tuple[str, str], str] = {}
        self.recently_closed: OrderedDict[str, None] = OrderedDict()
        self.unrecoverable: dict[str, str] = {}

    def recover(self, sandbox: Sandbox, logged: LoggedEpisode) -> None:
        """Bring back one episode that was open when the sandbox stopped, or note why it cannot be."""
        try:
            ep = sandbox.episode(logged.question_id, run_id=logged.run_id, episode_id=logged.episode_id)
        except ConfigError:
            self.unrecoverable[logged.episode_id] = (
                f"episode {logged.episode_id} was open when the sandbox stopped, but its question "
                f"{logged.question_id!r} is not in the release served now ({sandbox.release_id!r}); "
                "open a new episode with replace=true")
            return
        ep.restore(logged.calls)
        self.add(Live(ep, list(logged.statuses), owner_sha256=logged.owner_sha256))

    def add(self, found: Live) -> None:
        """Hold a newly opened (or recovered) episode."""
        ep = found.episode
        self.live[ep.episode_id] = found
        self.by_key[(ep.run_id, ep.question_id)] = ep.episode_id

    def forget(self, episode_id: str) -> None:
        """Let a closed episode leave memory; its id is remembered as recently closed."""
        ep = self.live.pop(episode_id).episode
        if self.by_key.get((ep.run_id, ep.question_id)) == episode_id:
            del self.by_key[(ep.run_id, ep.question_id)]
        self.recently_closed[episode_id] = None
        while len(self.recently_closed) > RECENTLY_CLOSED:
            self.recently_closed.popitem(last=False)

    def refuse_unrecoverable(self, episode_id: str) -> None:
        """A 409 with the reason, for an id that was open at the stop and cannot be brought back."""
        if episode_id in self.unrecoverable:
            raise HTTPException(409, self.unrecoverable[episode_id])

    def open(self, episode_id: str) -> Live:
        """The open episode ``episode_id``, or the HTTP error that says why there is none."""
        found = self.live.get(episode_id)
        if found is not None:
            return found
        self.refuse_unrecoverable(episode_id)
        if episode_id in self.recently_closed:
            raise HTTPException(409, f"episode {episode_id} is closed; open a new episode "
                                     f"(its trace: GET /episodes/{episode_id}/trace)")
        raise HTTPException(404, f"no open episode {episode_id!r}; create one with POST /episodes")

    def __getitem__(self, episode_id: str) -> SandboxEpisode:
        return self.live[episode_id].episode

    def __contains__(self, episode_id: object) -> bool:
        return episode_id in self.live

    def __len__(self) -> int:
        return len(self.live)

    def values(self) -> list[SandboxEpisode]:
        """The open episodes."""
        return [found.episode for found in self.live.values()]


def serve(sandbox: Sandbox, *, host: str = "127.0.0.1", port: int = 8100, action_log: str | Path | None = None,
          limits: SandboxLimits | None = None, http: str = "auto") -> None:
    """Run the sandbox server with uvicorn until interrupted (``action_log``: see :func:`create_app`).

    uvicorn runs the app's start-up (warm-up and recovery) before it accepts a
    connection, so the first ``/health`` that answers already says ready.
    """
    import uvicorn

    limits = limits or SandboxLimits()
    uvicorn.run(create_app(sandbox, action_log=action_log, limits=limits), host=host, port=port,
                log_level="warning", access_log=False, **uvicorn_options(http, limits.timeouts))
