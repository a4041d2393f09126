"""An open episode's actions as memory holds them: one compact record per action, with a byte bound.

Why: an open episode keeps every action it took (its trace, the replies a retried
``seq`` is answered from, the pages it unlocked) until it closes, and the sandbox
holds up to ``max_open_episodes`` of them. As ``records.ToolCall`` (a pydantic model:
an attribute dict, a fields-set set, an arguments dict and two lists, all per action)
that was ~1.8 KB per action, about 7 GB at the default caps before anything refused.
:class:`ActionRecord` keeps the same facts in one ``__slots__`` object: the arguments
as their JSON bytes, the ids as tuples of interned strings (one copy per page for the
whole sandbox), the error as UTF-8 bytes; a ``ToolCall`` is rebuilt only when a trace
is read. ``benchmarks/servers.py --bytes-per-action`` measures both representations.

**The bound.** What one action can hold is bounded by construction: arguments over
:data:`MEMORY_ARGUMENT_BYTES` of JSON (only a malformed request's, since every valid
argument is shorter; the durable action log keeps them in full) and errors over
:data:`MEMORY_ERROR_BYTES` are cut in memory, and the ids are at most ``k`` returned
plus the question's masked pages. :func:`worst_action_bytes` adds these up (with
CPython's object sizes), and ``sandbox.server`` multiplies by its caps at start-up to
get the ceiling it enforces (``SandboxLimits.max_episode_memory_mb``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import orjson

from aethersearch.records import ToolCall

__all__ = ["ActionRecord", "CUT_KEY", "EPISODE_BYTES", "MEMORY_ARGUMENT_BYTES", "MEMORY_ERROR_BYTES", "STATUS_BYTES",
    "TRACE_SLOT_BYTES", "VISITED_PAGE_BYTES", "episode_ceiling_bytes", "worst_action_bytes"]

#: JSON bytes of one action's arguments kept in memory: a valid search (512 characters of up to 4 UTF-8 bytes
#: each, plus ``k``) always fits; only a malformed request's arguments are longer, and those are cut here
MEMORY_ARGUMENT_BYTES = 2_200
#: UTF-8 bytes of one action's error kept in memory (the action log keeps the whole message)
MEMORY_ERROR_BYTES = 512
#: the key an argument dict cut in memory is rebuilt under
CUT_KEY = "arguments_cut_in_memory"

_EMPTY: tuple[str, ...] = ()


def _ids(ids: Iterable[str]) -> tuple[str, ...]:
    """Ids as a tuple of interned strings: a page id is one object however many actions name it."""
    out = tuple(sys.intern(i) for i in ids)
    return out or _EMPTY


def _arguments(arguments: dict[str, Any]) -> bytes:
    encoded = orjson.dumps(arguments)
    if len(encoded) > MEMORY_ARGUMENT_BYTES:
        encoded = orjson.dumps({CUT_KEY: encoded[: MEMORY_ARGUMENT_BYTES - 64].decode("utf-8", "ignore")})
    # a copy of exactly its length: orjson's own result keeps the capacity of its write buffer (4 KB, measured)
    return bytes(memoryview(encoded))


class ActionRecord:
    """One action of an open episode, compact (see the module docstring); :meth:`call` rebuilds the ``ToolCall``."""

    __slots__ = ("arguments", "elapsed_s", "error", "returned_ids", "started_at", "suppressed_ids", "tool")

    def __init__(self, call: ToolCall) -> None:
        self.tool = sys.intern(call.tool)
        self.arguments = _arguments(call.arguments)
        self.returned_ids = _ids(call.returned_ids)
        self.suppressed_ids = _ids(call.suppressed_ids)
        self.error = None if call.error is None else call.error.encode("utf-8", "surrogatepass")[:MEMORY_ERROR_BYTES]
        self.elapsed_s = call.elapsed_s
        self.started_at = call.started_at

    def call(self) -> ToolCall:
        """The action as a ``records.ToolCall`` (masked ids included: never agent-facing as it is)."""
        return ToolCall(tool=self.tool, arguments=orjson.loads(self.arguments), returned_ids=list(self.returned_ids),
                        suppressed_ids=list(self.suppressed_ids),
                        error=None if self.error is None else self.error.decode("utf-8", "ignore"),
                        elapsed_s=self.elapsed_s, started_at=self.started_at)


def _bytes_object(size: int) -> int:
    return sys.getsizeof(b"") + size


def _tuple(length: int) -> int:
    return sys.getsizeof(tuple(range(length)))  # the tuple itself; its strings are interned, shared


#: what one more visited page costs an episode's unlock set (a slot of a set that grows 4x, kept at most 3/5
#: full: at worst 16 bytes x 4 / (3/5) ~ 107 bytes a page); counted per action, as a visit can add one
VISITED_PAGE_BYTES = 112
#: the record's slot in the episode's trace list (8 bytes, with the list's growth slack)
TRACE_SLOT_BYTES = 16
#: an action's status in ``sandbox.server.Live.statuses`` (an ``array("H")``), with the array's growth slack
STATUS_BYTES = 4


def worst_action_bytes(max_k: int, max_masked: int) -> int:
    """The most bytes one action can hold in memory: a search returning ``max_k`` ids with ``max_masked``
    suppressed, with arguments and an error at their in-memory limits."""
    record = sys.getsizeof(ActionRecord.__new__(ActionRecord)) + TRACE_SLOT_BYTES  # GC header included
    floats = 2 * sys.getsizeof(0.0)
    return (record + _bytes_object(MEMORY_ARGUMENT_BYTES) + _bytes_object(MEMORY_ERROR_BYTES) + _tuple(max_k)
            + _tuple(max_masked) + floats + VISITED_PAGE_BYTES + STATUS_BYTES)


#: what an open episode holds besides its actions, at most: the episode and its server-side entry (objects,
#: locks, the unlock set and trace list when empty, the id maps' slots) and its ids (question and run ids of
#: up to 256 characters, 4 bytes each at worst); ``tests/sandbox/test_memory.py`` measures it under this
EPISODE_BYTES = 8_192


def episode_ceiling_bytes(max_actions: int, max_k: int, max_masked: int) -> int:
    """The most bytes one open episode can hold: its fixed part and ``max_actions`` worst-case actions."""
    return EPISODE_BYTES + max_actions * worst_action_bytes(max_k, max_masked)
