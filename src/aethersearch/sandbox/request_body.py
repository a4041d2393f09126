"""Checking an action's JSON body by hand, so that a malformed one is still logged in its episode.

Why not a pydantic body model: FastAPI would refuse a malformed body before the
handler runs, and the refusal would never reach the episode's action log (every
request naming an episode is logged). Here the body is parsed and checked
field by field, and what is logged of it is clipped: strings over
:data:`MAX_BODY_CHARS` are cut, and any other value is logged as its JSON text
(cut too). A value nested too deeply to encode (a thousand nested arrays) is
logged as a note saying so: ``repr`` of such a value raises ``RecursionError``,
and the request would answer 500 and go unlogged.
"""

from __future__ import annotations

from typing import Any

import orjson

from aethersearch.jsonl import loads
from aethersearch.sandbox.tools import MAX_PAGE_NAME, MAX_QUERY_CHARS
from aethersearch.search.http_guard import json_integer

__all__ = ["MAX_BODY_CHARS", "check_body", "clip"]

# Request fields longer than this are refused (422, logged with the argument cut to this length) so the log
# never stores a huge argument; anything shorter reaches the episode, whose own limits refuse and log it.
MAX_BODY_CHARS = 4 * max(MAX_QUERY_CHARS, MAX_PAGE_NAME)


def clip(value: Any) -> Any:
    """A request argument as the log keeps it: short scalars as they are, anything else as (cut) JSON text."""
    if isinstance(value, str):
        return value if len(value) <= MAX_BODY_CHARS else value[:MAX_BODY_CHARS] + f"... ({len(value)} chars)"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    try:
        text = orjson.dumps(value).decode("utf-8")
    except TypeError:  # orjson refuses values nested deeper than it encodes (and never recurses in Python)
        return f"<a {type(value).__name__} nested too deeply to log>"
    return text if len(text) <= MAX_BODY_CHARS else text[:MAX_BODY_CHARS] + "..."


def check_body(raw: bytes, fields: dict[str, type], required: tuple[str, ...]) -> tuple[dict[str, Any], str | None]:
    """(arguments to log, error or None) of an action's body; with no error, the arguments are the body."""
    try:
        body = loads(raw) if raw else None
    except ValueError:
        return {"body": clip(raw.decode("utf-8", "replace"))}, "request body is not valid JSON"
    if not isinstance(body, dict):
        return {"body": clip(body)}, "request body must be a JSON object"
    args = {str(k)[:64]: clip(v) for k, v in list(body.items())[:16]}
    body = {name: json_integer(value) if fields.get(name) is int else value for name, value in body.items()}
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
    if body.get("seq", 0) < 0:
        return args, f"seq must be >= 0 (the number of actions already answered), got {body['seq']}"
    return body, None
