"""A refusal's reason in the HTTP status line, for clients that read nothing else.

Why: verl's search tool (``verl/tools/utils/search_r1_like_utils.py``, read at
b178a3c) calls ``requests``' ``raise_for_status()`` and hands the model only the
exception's text, ``"422 Client Error: Unprocessable Content for url: ..."``; the
body that names the limit is thrown away. ``requests`` builds that text from the
status line's *reason phrase*, so a phrase that carries the reason
(``"Unprocessable Content: topk 500 exceeds the limit of 100"``) reaches the model.

HTTP/1.1 allows any reason phrase (RFC 9112 section 4: ``*( HTAB / SP / VCHAR /
obs-text )``; clients must not act on it), but ASGI has no field for it: uvicorn
writes ``http.HTTPStatus``'s phrase from a module-level table (``STATUS_LINE`` in
its httptools protocol, ``STATUS_PHRASES`` in its h11 one). Those two tables are
replaced, once, by tables that answer the *current response's* phrase when one is
set in a context variable (:func:`reason_for`), else the standard one. The
variable is set only around the ``http.response.start`` send of a refusal (the
ASGI app's task, so concurrent responses never see each other's), by
``http_guard.GuardMiddleware``. Alternatives weighed: a response header (invisible
to a client that reads only the status line), the body (what verl drops), and
copying uvicorn's ``send`` methods into our protocol classes (a fork of ~60 lines
per protocol to change one lookup). HTTP/2 has no reason phrase: there the body and
the server's log (``RefusalLog``) remain the only carriers.

A phrase is ASCII (``requests`` decodes it as ISO-8859-1, so UTF-8 would arrive
garbled), without control characters, at most :data:`MAX_REASON_BYTES`.
"""

from __future__ import annotations

import http
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["MAX_REASON_BYTES", "install", "installed", "reason_for", "reason_phrase", "standard_phrase"]

#: the longest reason phrase sent: long enough for every message of both servers' limits, short
#: enough for any client's status-line limit (aiohttp reads 8,190 bytes, http.client 65,536)
MAX_REASON_BYTES = 400

_CURRENT: ContextVar[bytes | None] = ContextVar("aethersearch_reason_phrase", default=None)


def standard_phrase(status: int) -> str:
    """``http.HTTPStatus``'s phrase of ``status`` (empty for an unnamed code)."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def reason_phrase(status: int, detail: str) -> bytes:
    """The reason phrase of a refusal: the standard phrase, a colon, and ``detail`` made safe.

    Non-ASCII characters become ``?``, control characters (CR and LF included) become
    spaces, and the whole is cut at :data:`MAX_REASON_BYTES` (ending ``...`` when cut).
    """
    text = " ".join(detail.split())  # control whitespace (CR, LF, TAB) and runs of spaces -> one space
    safe = "".join(ch if 32 <= ord(ch) < 127 else "?" for ch in text)
    phrase = f"{standard_phrase(status)}: {safe}" if safe else standard_phrase(status)
    if len(phrase) > MAX_REASON_BYTES:
        phrase = phrase[: MAX_REASON_BYTES - 3] + "..."
    return phrase.encode("ascii")


@contextmanager
def reason_for(phrase: bytes) -> Iterator[None]:
    """Within this block, the response started by this task carries ``phrase`` as its reason phrase."""
    token = _CURRENT.set(phrase)
    try:
        yield
    finally:
        _CURRENT.reset(token)


class _StatusLines(dict[int, bytes]):
    """uvicorn httptools' ``STATUS_LINE``: ``HTTP/1.1 <code> <phrase>\\r\\n``, the current phrase when set."""

    def __getitem__(self, status: int) -> bytes:
        phrase = _CURRENT.get()
        if phrase is None:
            return super().__getitem__(status)
        return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


class _Phrases(dict[int, bytes]):
    """uvicorn h11's ``STATUS_PHRASES``: the current phrase when set."""

    def __getitem__(self, status: int) -> bytes:
        phrase = _CURRENT.get()
        return super().__getitem__(status) if phrase is None else phrase


def install() -> None:
    """Put the phrase-aware tables into uvicorn's two HTTP protocols (idempotent; every process does it at
    import of ``http_guard``, so ``--processes`` workers have it too)."""
    import importlib.util

    from uvicorn.protocols.http import h11_impl

    if not isinstance(h11_impl.STATUS_PHRASES, _Phrases):
        h11_impl.STATUS_PHRASES = _Phrases(h11_impl.STATUS_PHRASES)
    if importlib.util.find_spec("httptools") is not None:
        from uvicorn.protocols.http import httptools_impl

        if not isinstance(httptools_impl.STATUS_LINE, _StatusLines):
            httptools_impl.STATUS_LINE = _StatusLines(httptools_impl.STATUS_LINE)


def installed() -> dict[str, Any]:
    """Whether each protocol's table is ours (``/health`` could say it; tests check it)."""
    import importlib.util

    from uvicorn.protocols.http import h11_impl

    out: dict[str, Any] = {"h11": isinstance(h11_impl.STATUS_PHRASES, _Phrases)}
    if importlib.util.find_spec("httptools") is not None:
        from uvicorn.protocols.http import httptools_impl

        out["httptools"] = isinstance(httptools_impl.STATUS_LINE, _StatusLines)
    return out
