"""The sandbox's durable action log: every action appended as it happens, read back after a restart.

Why a log of events rather than one row per closed episode: a WebDetective
evaluation runs the sandbox for days, so (a) an episode open when the process
dies must come back with the same unlock state, and (b) closed episodes must
leave memory. Both need every action on disk before its reply is sent. The log
is JSONL, one event per line, group-committed (:class:`aethersearch.jsonl.GroupCommitWriter`:
flush + fsync per batch of concurrent appends, never on the event loop). Each kind of
event is one record below, written and read through it (``tests/test_artefact_records.py``
freezes their fields):

* :class:`OpenEvent` ``{"event": "open", "episode_id", "question_id", "run_id", "owner_sha256"}``
* :class:`CallEvent` ``{"event": "call", "episode_id", "seq", "status", "call": ToolCall}``: action
  ``seq`` (0-based) of the episode, masked ids included, with the HTTP status it was answered with
* :class:`RefusedEvent` ``{"event": "refused", "episode_id", "status", "reason"}``: a request over the
  per-episode action cap (logged, not kept in the trace, so the trace stays bounded)
* :class:`CloseEvent` ``{"event": "close", "episode_id", "question_id", "run_id", "calls", "answer"?}``:
  ``answer`` is present when the client closed with a body (``{"answer": str | null}``: its final
  answer, null for none); an episode closed without one (or replaced) has none
* :class:`ServeEvent` ``{"event": "serve", "release_id", "corpus_hash", "index_hash", "mask_policy"}``:
  written at every start, so an imported run (``aether import sandbox``) knows what served it

Reading back: :func:`recover` streams the log once at start-up and keeps only
the episodes without a close event (a torn last line, from a crash mid-append,
is cut off: nobody was told it was written), and notes every episode id the log
opened in :class:`SeenIds`, a Bloom filter of fixed size. :meth:`ActionLog.read_trace`
answers an id the log never opened at once, whatever the log's size (without the
filter a random id costs a pass over the whole log: 275 ms on a 25.7 MB one), finds a closed
episode's calls from the offset of its open event (remembered for the most recent
episodes, in bounded memory) or, beyond that, by one pass over the file.
:func:`read_episodes` gives every episode of a log, for scoring and tests.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

import numpy as np
import orjson
from pydantic import SerializerFunctionWrapHandler, ValidationError, model_serializer

from aethersearch.errors import DataError
from aethersearch.jsonl import GroupCommitWriter, plain_line_encoder, truncate_to
from aethersearch.records import Record, ToolCall

__all__ = ["ActionEvent", "ActionLog", "CallEvent", "CloseEvent", "EVENTS", "LOG", "LoggedEpisode", "NO_ANSWER",
    "OpenEvent", "REMEMBERED_OFFSETS", "Recovered", "RefusedEvent", "SeenIds", "ServeEvent", "read_episodes",
    "read_events", "read_served", "recover"]

LOG = logging.getLogger("uvicorn.error.aethersearch")
#: open-event offsets remembered for reading back recent closed episodes quickly (bounded memory)
REMEMBERED_OFFSETS = 4_096


class SeenIds:
    """Every episode id a log opened, as a Bloom filter of fixed size: "never opened" is answered in O(1).

    Why a filter and not a set: a sandbox runs for days, and a set of ids grows
    ~100 bytes an episode. The filter takes 8 MiB at start, zero pages until
    written, and never grows; 4 hashes over 2^26 bits answer a never-opened id
    wrongly ("maybe") with odds 1e-5 after 1M episodes, 4% after 10M. A "maybe"
    costs only what every unknown id would cost without the filter: a read of the log.
    """

    BITS = 1 << 26
    HASHES = 4

    def __init__(self) -> None:
        self._bits = np.zeros(self.BITS // 8, dtype=np.uint8)
        self.added = 0

    def _positions(self, episode_id: str) -> list[int]:
        digest = hashlib.blake2b(episode_id.encode("utf-8", "surrogatepass"), digest_size=4 * self.HASHES).digest()
        return [int.from_bytes(digest[4 * i:4 * i + 4], "little") & (self.BITS - 1) for i in range(self.HASHES)]

    def add(self, episode_id: str) -> None:
        """Note an opened episode."""
        for position in self._positions(episode_id):
            self._bits[position >> 3] |= 1 << (position & 7)
        self.added += 1

    def __contains__(self, episode_id: object) -> bool:
        return isinstance(episode_id, str) and all(
            (int(self._bits[p >> 3]) >> (p & 7)) & 1 for p in self._positions(episode_id))


# ----------------------------------------------------------------------------- the events on disk
# Written on the hot path with ``trusted`` (every value is already of its type: one per sandbox
# action, never validated twice); validated where they are read back, as any file read from disk.


class OpenEvent(Record):
    """An episode began: who asked for it (the owner token's sha256, never the token)."""

    event: Literal["open"] = "open"
    episode_id: str
    question_id: str
    run_id: str
    #: None when opened without an owner, or in a log written before owners existed (no key at all)
    owner_sha256: str | None = None


class CallEvent(Record):
    """Action ``seq`` (0-based) of an episode, masked ids included, and the HTTP status it was answered with."""

    event: Literal["call"] = "call"
    episode_id: str
    seq: int
    status: int
    call: ToolCall


class RefusedEvent(Record):
    """A request refused outside the trace (over the per-episode action cap)."""

    event: Literal["refused"] = "refused"
    episode_id: str
    status: int
    reason: str


class CloseEvent(Record):
    """An episode closed, with how many actions it made and, when the client sent a body, its answer.

    ``answer`` is on the line only when the client closed with a body (``null`` for "no answer");
    without one the key is absent, and absent from :attr:`model_fields_set`: build the event with
    its constructor (not ``trusted``), passing ``answer`` only when there is one.
    """

    event: Literal["close"] = "close"
    episode_id: str
    question_id: str
    run_id: str
    calls: int
    answer: str | None = None

    @property
    def answered(self) -> bool:
        """Whether the client closed with a body (``answer`` set, ``None`` included)."""
        return "answer" in self.model_fields_set

    @model_serializer(mode="wrap")
    def _absent_answer_unwritten(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        row: dict[str, Any] = handler(self)
        if not self.answered:
            del row["answer"]
        return row


class ServeEvent(Record):
    """What one start of the sandbox served (written at every start, read by ``aether import sandbox``)."""

    event: Literal["serve"] = "serve"
    release_id: str | None
    corpus_hash: str | None
    index_hash: str | None
    mask_policy: str


ActionEvent = OpenEvent | CallEvent | RefusedEvent | CloseEvent | ServeEvent
#: each event's record by its ``event`` name
EVENTS: dict[str, type[ActionEvent]] = {"open": OpenEvent, "call": CallEvent, "refused": RefusedEvent,
                                       "close": CloseEvent, "serve": ServeEvent}
#: an event's line: orjson over the records' own fields (a close event, with its serializer, goes through ``dumps``)
_encode_event = plain_line_encoder({OpenEvent, CallEvent, RefusedEvent, ServeEvent, ToolCall})
_FIX = "restore the file, or start the sandbox with a new --action-log"
E = TypeVar("E", bound=Record)


def _read(row: dict[str, Any], path: Path, line: int, kind: type[E]) -> E:
    """``row`` validated as a ``kind`` event (where it is read back); malformed: a DataError naming its line."""
    try:
        return kind.model_validate(row)
    except ValidationError as exc:
        raise DataError(path, f"bad {row.get('event')} event: {exc}", line=line or None, fix=_FIX) from None


#: ``LoggedEpisode.answer`` of an episode closed without an answer body (or not closed at all)
NO_ANSWER = object()


class LoggedEpisode(NamedTuple):
    """An episode as the log holds it."""

    episode_id: str
    question_id: str
    run_id: str
    calls: list[ToolCall]
    statuses: list[int]
    closed: bool
    #: the close event's answer: ``NO_ANSWER`` when the client sent no body, ``None`` when it sent null
    answer: str | None | object = NO_ANSWER
    #: sha256 of the owner token the episode was opened with (None in logs written before owners existed)
    owner_sha256: str | None = None


def _rows(path: Path, start: int = 0) -> Iterator[tuple[int, int, dict[str, Any] | None]]:
    """``(offset, line number or 0 when started mid-file, row or None if torn)`` per line from ``start``."""
    with path.open("rb") as handle:
        handle.seek(start)
        offset, number = start, 0
        for raw in handle:
            number += 1
            complete = raw.endswith(b"\n")
            try:
                row = orjson.loads(raw) if complete else None
            except orjson.JSONDecodeError:
                raise DataError(path, "corrupt line in the middle of the sandbox action log",
                                line=number if start == 0 else None, fix=_FIX) from None
            if row is not None and not isinstance(row, dict):
                raise DataError(path, "a sandbox action log line must be a JSON object", line=number or None,
                                fix=_FIX)
            yield offset, number, row
            offset += len(raw)


def _apply(episodes: dict[str, LoggedEpisode], row: dict[str, Any], path: Path, line: int) -> str | None:
    """Fold one event into ``episodes``; returns the id of an episode that just closed.

    Only the events it folds in are validated, as their records (a call or close of an episode it
    does not hold is skipped unread, as before).
    """
    kind, episode_id = row.get("event"), str(row.get("episode_id"))
    if kind == "open":
        opened = _read(row, path, line, OpenEvent)
        episodes[opened.episode_id] = LoggedEpisode(opened.episode_id, opened.question_id, opened.run_id, [], [],
                                                    False, owner_sha256=opened.owner_sha256 or None)
    elif kind == "call" and episode_id in episodes:
        found = episodes[episode_id]
        called = _read(row, path, line, CallEvent)
        if called.seq == len(found.calls):  # a replayed seq is never logged twice
            found.calls.append(called.call)
            found.statuses.append(called.status)
    elif kind == "close" and episode_id in episodes:
        closed = _read(row, path, line, CloseEvent)
        if closed.answered:
            episodes[episode_id] = episodes[episode_id]._replace(answer=closed.answer)
        return episode_id
    return None


class Recovered(NamedTuple):
    """What :func:`recover` found: episodes still open, the bytes cut off as a torn tail, every id opened."""

    open: dict[str, LoggedEpisode]
    torn_bytes: int
    size: int
    seen: SeenIds


def recover(path: str | Path) -> Recovered:
    """The episodes of ``path`` that were open when the sandbox stopped (one streaming pass).

    Memory is what those open episodes hold; closed ones are dropped as their
    close event is read. A torn last line is cut off the file (and reported).
    """
    path = Path(path)
    seen = SeenIds()
    if not path.exists():
        return Recovered({}, 0, 0, seen)
    episodes: dict[str, LoggedEpisode] = {}
    torn = 0
    for offset, line, row in _rows(path):
        if row is None:
            torn = path.stat().st_size - offset
            break
        if row.get("event") == "open":
            seen.add(str(row.get("episode_id")))
        closed = _apply(episodes, row, path, line)
        if closed is not None:
            del episodes[closed]
    size = path.stat().st_size - torn
    if torn:
        truncate_to(path, size)
        LOG.warning("%s: cut off a torn last line of %d bytes (a crash mid-append; it was never acknowledged)",
                    path, torn)
    return Recovered(episodes, torn, size, seen)


def read_served(path: str | Path) -> list[ServeEvent]:
    """The ``serve`` events of an action log, in order: what each start of the sandbox served."""
    path = Path(path)
    return [_read(row, path, line, ServeEvent) for _, line, row in _rows(path)
            if row is not None and row.get("event") == "serve"]


def read_events(path: str | Path) -> list[ActionEvent]:
    """Every event of an action log as its record, in order (a torn last line is left out; for tools and tests)."""
    path = Path(path)
    events: list[ActionEvent] = []
    for _, line, row in _rows(path):
        if row is None:
            break
        kind = EVENTS.get(str(row.get("event")))
        if kind is not None:  # an event kind this version does not write is skipped, as every reader here does
            events.append(_read(row, path, line, kind))
    return events


def read_episodes(path: str | Path) -> dict[str, LoggedEpisode]:
    """Every episode of an action log, open or closed, in order of opening (for scoring and tests)."""
    path = Path(path)
    episodes: dict[str, LoggedEpisode] = {}
    for _, line, row in _rows(path):
        if row is None:
            break
        closed = _apply(episodes, row, path, line)
        if closed is not None:
            episodes[closed] = episodes[closed]._replace(closed=True)
    return episodes


class ActionLog:
    """Appends the events of every episode durably; reads closed episodes back."""

    def __init__(self, path: str | Path, *, size: int, seen: SeenIds | None = None) -> None:
        self.path = Path(path)
        self.seen = seen if seen is not None else SeenIds()
        self._writer = GroupCommitWriter(self.path, interval_s=0.0, max_rows=1024, thread_name="sandbox-action-log")
        self._end = size  # offset where the next submitted line will start (lines are written in submit order)
        self._offsets: OrderedDict[str, int] = OrderedDict()

    async def _append(self, event: ActionEvent) -> int:
        line = _encode_event(event)
        offset = self._end
        self._end += len(line)
        await self._writer.submit_line(line)
        return offset

    async def opened(self, episode_id: str, question_id: str, run_id: str, owner_sha256: str | None = None) -> None:
        """Log an episode's opening with its owner's token hash (never the token; durable on return)."""
        offset = await self._append(OpenEvent.trusted(event="open", episode_id=episode_id, question_id=question_id,
                                                      run_id=run_id, owner_sha256=owner_sha256))
        self.seen.add(episode_id)
        self.remember(episode_id, offset)

    def remember(self, episode_id: str, offset: int) -> None:
        """Note where an episode's events start (only the most recent :data:`REMEMBERED_OFFSETS` are kept)."""
        self._offsets[episode_id] = offset
        self._offsets.move_to_end(episode_id)
        while len(self._offsets) > REMEMBERED_OFFSETS:
            self._offsets.popitem(last=False)

    async def called(self, episode_id: str, seq: int, status: int, call: ToolCall) -> None:
        """Log action ``seq`` of an episode (durable on return)."""
        await self._append(CallEvent.trusted(event="call", episode_id=episode_id, seq=seq, status=status, call=call))

    async def refused(self, episode_id: str, status: int, reason: str) -> None:
        """Log a request refused outside the trace (over the action cap)."""
        await self._append(RefusedEvent.trusted(event="refused", episode_id=episode_id, status=status, reason=reason))

    async def closed(self, episode_id: str, question_id: str, run_id: str, calls: int,
                     answer: str | None | object = NO_ANSWER) -> None:
        """Log an episode's close (durable on return); after this it may leave memory.

        ``answer``: the client's final answer (``None``: it sent null), or ``NO_ANSWER`` when it sent no body.
        """
        fields: dict[str, Any] = {"episode_id": episode_id, "question_id": question_id, "run_id": run_id,
                                  "calls": calls}
        if answer is not NO_ANSWER:  # no body: no answer key on the line (CloseEvent.answered)
            fields["answer"] = answer
        await self._append(CloseEvent(**fields))

    async def served(self, release_id: str | None, corpus_hash: str | None, index_hash: str | None,
                     mask_policy: str) -> None:
        """Log what this start of the sandbox serves (durable on return)."""
        await self._append(ServeEvent.trusted(event="serve", release_id=release_id, corpus_hash=corpus_hash,
                                              index_hash=index_hash, mask_policy=mask_policy))

    def read_trace(self, episode_id: str) -> LoggedEpisode | None:
        """A closed (or open) episode's events read back from the file; None if the log never had it.

        Blocking file I/O: call it from a worker thread.
        """
        if episode_id not in self.seen:  # never opened here: answered without reading the log
            return None
        start = self._offsets.get(episode_id, 0)
        found: dict[str, LoggedEpisode] = {}
        for _, line, row in _rows(self.path, start):
            if row is None:
                break
            if row.get("episode_id") != episode_id:
                continue
            if _apply(found, row, self.path, line) is not None:
                return found[episode_id]._replace(closed=True)
        return found.get(episode_id)

    def close(self) -> None:
        """Flush everything submitted and close the file."""
        self._writer.close()
