"""HTTP plumbing shared by both servers: body limits, read timeouts, and visible refusals.

Why one module: the retrieval server and the sandbox face the same hostile or
careless clients (a 50 MB body, one byte a second, a connection that never sends
a request, a trainer whose client throws away every 4xx body), so the rules live
in one place and both apps mount the same pieces:

* :class:`GuardMiddleware` (pure ASGI, outermost): a declared ``Content-Length``
  over the limit is refused with 413 before a byte of the body is read; the body
  is then read through a counting ``receive`` that refuses (413) as soon as the
  limit is passed and answers 408 once the whole body has taken longer than
  ``body_timeout_s``. Both close the connection. Every 4xx the app answers is
  counted by status and logged (:class:`RefusalLog`).
* :class:`TimedHttpToolsProtocol` / :class:`TimedH11Protocol`: uvicorn's own
  protocols plus a **header deadline**: a request's headers must arrive in full
  within ``header_timeout_s`` of the connection opening or of the previous
  response ending, else the connection is closed. uvicorn's ``timeout_keep_alive``
  only closes connections idle *after* a response, so without this a connection
  that never sends a request, or sends its headers a byte a second, is held forever.
* :class:`HttpTimeouts`: the three limits (header, body, idle keep-alive), each a
  ``--...`` option of ``aether serve`` and ``aether sandbox serve``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import threading
import time
from collections import Counter
from typing import Annotated, Any, TypeVar

import orjson
from pydantic import BaseModel, BeforeValidator, Field, StrictInt, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from uvicorn.protocols.http.h11_impl import H11Protocol

from aethersearch.errors import ConfigError
from aethersearch.records import Record
from aethersearch.search import http_reason
from aethersearch.search.http_reason import reason_for, reason_phrase

__all__ = ["CONNECTION_EVENTS", "ConnectionEvents", "GuardMiddleware", "HEADER_TIMEOUT", "HEADER_TIMEOUT_ENV",
    "HTTPProblem", "HttpTimeouts", "KEEP_ALIVE_IDLE", "LISTEN_BACKLOG", "LOG", "MALFORMED", "Problem", "REASONS",
    "RateLimitedLines", "RefusalLog", "TimedH11Protocol", "install_problem_handlers", "json_body", "json_int",
    "json_integer", "kernel_listen_drops", "problem_body", "problem_responses", "raise_open_files_limit",
    "read_body", "record_from_options", "uvicorn_options"]

R = TypeVar("R", bound=BaseModel)
LOG = logging.getLogger("uvicorn.error.aethersearch")
#: how the header deadline reaches uvicorn's protocol objects (also in worker processes)
HEADER_TIMEOUT_ENV = "AETHER_HEADER_TIMEOUT_S"


class HttpTimeouts(Record):
    """Read timeouts of a server; reported by ``/health`` (see the module docstring)."""

    header_timeout_s: float = Field(default=10.0, gt=0, description="a request's headers must arrive within this "
                                                                    "of the connection opening or the last response")
    body_timeout_s: float = Field(default=30.0, gt=0, description="a request body must arrive in full within this")
    keep_alive_s: int = Field(default=5, ge=1, description="an idle keep-alive connection is closed after this")


def json_integer(value: Any) -> Any:
    """``2.0`` as ``2``: JSON Schema calls a number with no fractional part an integer, so a server whose
    OpenAPI says ``"type": "integer"`` must take it (schemathesis sends ``"topk": 2.0``); ``true``,
    ``"2"`` and ``2.5`` stay refused."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def json_int(ge: int | None = None, le: int | None = None) -> Any:
    """A strict integer field type as JSON Schema's ``"type": "integer"`` means it (:func:`json_integer`),
    with its range declared (given here, not on the field: pydantic cannot push a range past the
    converter, and would describe it as a non-standard ``"ge"`` key)."""
    return Annotated[StrictInt, Field(ge=ge, le=le), BeforeValidator(json_integer)]


class HTTPProblem(StarletteHTTPException):
    """A request refused with a status code and a message saying the limit (answered as ``{"detail": ...}``)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(status_code=status, detail=detail)

    @property
    def status(self) -> int:
        """The HTTP status of the refusal."""
        return self.status_code


class RateLimitedLines:
    """A token bucket of log lines: at most ``lines_per_s`` a second, counting what it left out."""

    def __init__(self, lines_per_s: float = 5.0) -> None:
        self.lines_per_s = lines_per_s
        self._tokens = lines_per_s
        self._last = time.monotonic()
        self._left_out = 0
        self._lock = threading.Lock()

    def take(self) -> int | None:
        """None if this line must be left out (counted), else how many were left out since the last one."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.lines_per_s, self._tokens + (now - self._last) * self.lines_per_s)
            self._last = now
            if self._tokens < 1.0:
                self._left_out += 1
                return None
            self._tokens -= 1.0
            left_out, self._left_out = self._left_out, 0
            return left_out


class RefusalLog:
    """Counts every 4xx by status and logs each as one line, at most ``lines_per_s`` lines a second.

    Why: a client that discards response bodies (verl's search tool reports only
    ``422 Client Error``) leaves the reason nowhere unless the server says it.
    Lines beyond the rate are counted and the next logged line says how many were
    left out, so a flood of refusals cannot flood the log.
    """

    def __init__(self, lines_per_s: float = 5.0, logger: logging.Logger = LOG) -> None:
        self.by_status: Counter[int] = Counter()
        self.logger = logger
        self._lines = RateLimitedLines(lines_per_s)
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        """All refusals counted so far."""
        return sum(self.by_status.values())

    def record(self, status: int, detail: str, client: str, method: str, path: str) -> None:
        """Count one refusal and log it unless over the line rate."""
        with self._lock:
            self.by_status[status] += 1
        left_out = self._lines.take()
        if left_out is None:
            return
        more = f" ({left_out} more refusals not logged)" if left_out else ""
        self.logger.warning("refused %s %s %s from %s: %s%s", status, method, path, client, detail[:300], more)

    def health(self) -> dict[str, Any]:
        """What ``/health`` reports: counts by status and the total."""
        return {"total": self.total, "by_status": {str(k): v for k, v in sorted(self.by_status.items())}}


#: what the protocol layer counts (``/health``'s ``connections.by_kind``)
MALFORMED = "malformed_request_400"
HEADER_TIMEOUT = "header_timeout_closed"
#: an idle keep-alive connection closed after ``--keep-alive-s`` (normal HTTP, so counted, not logged); a
#: client whose event loop is too busy to see the close sends its next request on it and reads "server
#: disconnected": the cause of the load rounds' unexplained drops at 2,048 clients (docs/servers.md)
KEEP_ALIVE_IDLE = "keep_alive_idle_closed"
#: the listen backlog both servers ask for (uvicorn's default, 2,048, equals the top load level: no headroom
#: for a burst of connects; not the cause of the 2,048-client drops, the kernel counted no overflow); the
#: kernel caps it at ``net.core.somaxconn``
LISTEN_BACKLOG = 8192


class ConnectionEvents:
    """Refusals and closes of the HTTP protocol layer, before any app sees a request; one per process.

    Why separate from :class:`RefusalLog`: uvicorn answers a request it cannot parse
    with its own 400 and the header deadline closes a connection, both before a
    request reaches the app (and its middleware). They are counted here, logged at
    most ``lines_per_s`` a second, and every app of the process reports them in
    ``/health`` under ``connections``, beside the kernel's listen-queue counters
    (:func:`kernel_listen_drops`): a connection the kernel dropped never reaches
    the process at all.
    """

    def __init__(self, lines_per_s: float = 5.0, logger: logging.Logger = LOG) -> None:
        self.by_kind: Counter[str] = Counter()
        self.logger = logger
        self._lines = RateLimitedLines(lines_per_s)
        self._lock = threading.Lock()

    def record(self, kind: str, peer: Any, message: str, *, log: bool = True) -> None:
        """Count one event of ``kind`` and (with ``log``) log it unless over the line rate."""
        with self._lock:
            self.by_kind[kind] += 1
        if not log:
            return
        left_out = self._lines.take()
        if left_out is None:
            return
        more = f" ({left_out} more connection events not logged)" if left_out else ""
        where = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        self.logger.warning("%s from %s: %s%s", kind, where, message, more)

    def health(self) -> dict[str, Any]:
        """``/health``'s ``connections``: this process's counts by kind, and the kernel's listen-queue drops."""
        return {"total": sum(self.by_kind.values()), "by_kind": dict(sorted(self.by_kind.items())),
                "kernel_listen_drops": kernel_listen_drops()}


#: the process's protocol-layer events (the protocol objects are uvicorn's, made per connection)
CONNECTION_EVENTS = ConnectionEvents()


def kernel_listen_drops(path: str = "/proc/net/netstat") -> dict[str, int] | None:
    """Linux's ``ListenOverflows`` and ``ListenDrops`` (machine-wide, since boot), or None elsewhere.

    A connection the accept queue had no room for (``--backlog``, capped by
    ``net.core.somaxconn``) is dropped by the kernel and never reaches the server;
    these counters are the only place it shows on the server's side. They count every
    listening socket of the machine, so read their change over a period, not the value.
    """
    try:
        with open(path, encoding="ascii") as handle:
            lines = [line.split() for line in handle if line.startswith("TcpExt:")]
    except OSError:
        return None
    if len(lines) < 2:
        return None
    values = dict(zip(lines[0][1:], lines[1][1:], strict=False))
    return {name: int(values[name]) for name in ("ListenOverflows", "ListenDrops") if name in values}


def _detail_of(body: bytes) -> str:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:300].decode("utf-8", "replace")
    detail = value.get("detail") if isinstance(value, dict) else value
    return detail if isinstance(detail, str) else orjson.dumps(detail)[:300].decode("utf-8", "replace")


def problem_body(detail: str) -> bytes:
    """The error shape of both servers: ``{"detail": str}``."""
    return orjson.dumps({"detail": detail})


class GuardMiddleware:
    """Body size and time limits before the app sees a body, and every 4xx counted and logged."""

    def __init__(self, app: Any, *, max_body_bytes: int, body_timeout_s: float, refusals: RefusalLog) -> None:
        self.app = app
        self.limit = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self.refusals = refusals

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        where = f"{client[0]}:{client[1]}" if client else "unknown client"
        started = False
        status = 0
        error_body: list[bytes] = []

        held: dict[str, Any] | None = None  # a refusal's start, sent with its first body chunk (its reason)

        async def guarded_send(message: dict[str, Any]) -> None:
            nonlocal started, status, held
            if message["type"] == "http.response.start":
                started, status = True, message["status"]
                if status in (408, 413):  # the rest of the body was never read: do not reuse the connection
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
                if 400 <= status < 500:  # its reason phrase is the body's detail: wait for the body
                    held = message
                    return
            elif message["type"] == "http.response.body" and 400 <= status < 500 and len(error_body) < 4:
                error_body.append(message.get("body", b"")[:2048])
            if held is not None:
                start, held = held, None
                with reason_for(reason_phrase(status, _detail_of(b"".join(error_body)))):
                    await send(start)
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body") and 400 <= status < 500:
                self.refusals.record(status, _detail_of(b"".join(error_body)), where, scope["method"], scope["path"])

        try:
            await self.app(scope, self._counting(receive, self._declared_problem(scope)), guarded_send)
        except HTTPProblem as exc:
            if started:
                raise
            await self._refuse(guarded_send, exc)

    def _declared_problem(self, scope: dict[str, Any]) -> HTTPProblem | None:
        """The refusal a declared Content-Length already earns (raised at the first read, before any byte)."""
        for name, value in scope["headers"]:
            if name == b"content-length":
                if not value.isdigit():
                    return HTTPProblem(400, f"Content-Length {value[:32].decode('latin-1')!r} is not a number")
                if int(value) > self.limit:
                    return HTTPProblem(413, f"request body of {int(value)} bytes exceeds the limit of "
                                            f"{self.limit} bytes")
        return None

    def _counting(self, receive: Any, declared: HTTPProblem | None) -> Any:
        """``receive`` with the limits: the declared refusal, then the byte count and the deadline.

        Why refuse at the first read rather than before calling the app: the app
        still sees the request, so the sandbox logs a refused body in its episode.
        """
        deadline = time.monotonic() + self.body_timeout_s
        size = 0
        limit, timeout = self.limit, self.body_timeout_s

        async def counting_receive() -> dict[str, Any]:
            nonlocal size
            if declared is not None:
                raise declared
            remaining = deadline - time.monotonic()
            try:
                message: dict[str, Any] = await asyncio.wait_for(receive(), max(remaining, 0.0))
            except TimeoutError:
                raise HTTPProblem(408, f"the request body did not arrive within {timeout:g} s "
                                       f"({size:,} bytes received); send it at once or raise "
                                       "--body-timeout-s") from None
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > limit:
                    raise HTTPProblem(413, f"request body exceeds the limit of {limit} bytes")
            return message

        return counting_receive

    @staticmethod
    async def _refuse(send: Any, exc: HTTPProblem) -> None:
        payload = problem_body(str(exc.detail))
        await send({"type": "http.response.start", "status": exc.status_code,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})


async def read_body(receive: Any) -> bytes:
    """The whole request body from an ASGI ``receive`` (limits are the guard's, see :class:`GuardMiddleware`)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HTTPProblem(400, "client disconnected before sending the whole body")
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


# --------------------------------------------------------------------------- uvicorn protocols


def _header_timeout() -> float:
    try:
        return float(os.environ.get(HEADER_TIMEOUT_ENV, "") or HttpTimeouts().header_timeout_s)
    except ValueError:
        return HttpTimeouts().header_timeout_s


class _HeaderDeadline:
    """Closes a connection whose next request's headers do not arrive within the deadline."""

    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    _deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        if not self.transport.is_closing():
            self._deadline = self.loop.call_later(_header_timeout(), self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            CONNECTION_EVENTS.record(HEADER_TIMEOUT, self.transport.get_extra_info("peername"),
                                     f"closed: no complete request headers within {_header_timeout():g} s "
                                     "(raise --header-timeout-s)")
            self.transport.close()

    def _idle_close(self, close: Any) -> None:
        """uvicorn's keep-alive timeout fired: counted (``/health``), then closed as uvicorn does."""
        if not self.transport.is_closing():
            CONNECTION_EVENTS.record(KEEP_ALIVE_IDLE, self.transport.get_extra_info("peername"), "", log=False)
        close()

    def _refuse_malformed(self, send_400: Any, msg: str) -> None:
        """uvicorn's own 400 for a request it cannot parse: counted, logged, its reason in the status line."""
        CONNECTION_EVENTS.record(MALFORMED, self.transport.get_extra_info("peername"), msg)
        with reason_for(reason_phrase(400, f"{msg} (not parseable as HTTP/1.1)")):
            send_400(msg)


def _httptools_protocol() -> type[asyncio.Protocol]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class TimedHttpToolsProtocol(_HeaderDeadline, HttpToolsProtocol):
        """uvicorn's httptools protocol with the header deadline."""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            pipelined = bool(self.pipeline)
            super().on_response_complete()
            if not pipelined:
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            self._refuse_malformed(super().send_400_response, msg)

        def timeout_keep_alive_handler(self) -> None:
            self._idle_close(super().timeout_keep_alive_handler)

    return TimedHttpToolsProtocol


class TimedH11Protocol(_HeaderDeadline, H11Protocol):
    """uvicorn's pure-Python h11 protocol with the header deadline."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's headers were parsed
            self._disarm()

    def on_response_complete(self) -> None:
        self._arm()  # first: super() may start the next pipelined request (which disarms)
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        self._refuse_malformed(super().send_400_response, msg)

    def timeout_keep_alive_handler(self) -> None:
        self._idle_close(super().timeout_keep_alive_handler)


class _QuietUvicorn400(logging.Filter):
    """Drops uvicorn's own unthrottled "Invalid HTTP request received." line: ours (rate-limited) replaces it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Invalid HTTP request received."


def _install() -> None:
    """Once per process, at import (so ``--processes`` workers too): the reason-phrase tables
    (``http_reason``) and the filter on uvicorn's 400 line."""
    http_reason.install()
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietUvicorn400) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_QuietUvicorn400())


_install()


TimedHttpToolsProtocol: type[asyncio.Protocol] | None = (
    _httptools_protocol() if importlib.util.find_spec("httptools") is not None else None)


def uvicorn_options(http: str, timeouts: HttpTimeouts) -> dict[str, Any]:
    """``uvicorn.run`` keyword arguments giving ``http`` (auto, h11, httptools) the timeouts.

    The header deadline travels in the environment so that worker processes
    (``--processes``) apply it too; the protocol is named by import string for the same reason.
    """
    if http not in ("auto", "h11", "httptools"):
        raise ConfigError(f"unknown --http {http!r}", fix="use one of: auto, h11, httptools")
    if http == "httptools" and TimedHttpToolsProtocol is None:
        raise ConfigError("--http httptools needs the httptools package", fix="pip install 'uvicorn[standard]'")
    os.environ[HEADER_TIMEOUT_ENV] = repr(timeouts.header_timeout_s)
    raise_open_files_limit()
    use_httptools = http == "httptools" or (http == "auto" and TimedHttpToolsProtocol is not None)
    name = "TimedHttpToolsProtocol" if use_httptools else "TimedH11Protocol"
    return {"http": f"{__name__}:{name}", "timeout_keep_alive": timeouts.keep_alive_s, "backlog": LISTEN_BACKLOG}


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's open-files soft limit to its hard limit; return (soft, hard) after.

    Why: every connection is a file descriptor, and a soft limit of 1,024 (a common
    default) makes ``accept`` fail once about a thousand clients are connected.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft, hard
        return target, hard
    return soft, hard


# --------------------------------------------------------------------------- OpenAPI


class Problem(BaseModel):
    """The error shape of every refusal of both servers."""

    detail: str


#: why each refusal status can happen, as both servers' OpenAPI descriptions say it
REASONS = {
    400: "malformed request: a non-numeric Content-Length, a body cut short, or a refused action",
    403: "the episode belongs to another client: replace=true needs the owner token its creation returned",
    404: "no such episode, question or page",
    408: "the request body did not arrive within the body timeout",
    409: "conflicts with the episode's state (open twice, or already closed)",
    413: "the request body, or the reply it asks for, is over a limit (the message names it)",
    422: "the body is not valid JSON of the documented shape, or a value is out of range",
    429: "over a documented cap (open episodes, actions per episode)",
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """FastAPI ``responses=`` entries documenting refusals with :class:`Problem` bodies."""
    return {status: {"model": Problem, "description": REASONS[status]} for status in statuses}


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """FastAPI ``openapi_extra`` declaring a JSON request body a handler parses itself (plain, no ``$defs``)."""
    schema = model.model_json_schema()
    if "$defs" in schema:
        raise ValueError(f"{model.__name__}: json_body takes flat models only")
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def install_problem_handlers(app: Any) -> None:
    """Answer FastAPI's own validation errors in the :class:`Problem` shape (one string, first error)."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import Response

    async def invalid(_request: Any, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        return Response(problem_body(f"invalid request: {where}: {first.get('msg')}"), status_code=422,
                        media_type="application/json")

    app.add_exception_handler(RequestValidationError, invalid)


def record_from_options(model: type[R], command: str, names: dict[str, str], **values: Any) -> R:
    """A limits record from command-line values; a bad value is a ``ConfigError`` naming its option.

    ``names`` maps a field to its option where the option is not ``--field-name``;
    the timeouts are given as a ``timeouts`` dict and named by their own options.
    """
    try:
        return model(**values)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            loc = [str(part) for part in error["loc"]] or ["?"]
            field = loc[-1]  # a timeout's own name (timeouts.body_timeout_s), else the limit's
            given = values.get("timeouts", {}).get(field) if loc[0] == "timeouts" else values.get(field)
            option = names.get(field, "--" + field.replace("_", "-"))
            problems.append(f"{option} {given!r}: {error['msg']}")
        raise ConfigError("invalid server option: " + "; ".join(problems),
                          fix=f"see `{command} --help` for each option's range") from None
