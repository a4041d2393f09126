"""One sandbox episode per (run, question): its unlock state, its tools and its action log.

Why per episode: WebDetective's masking depends on what *this* agent has
visited for *this* question, so the visited set lives in the episode and
nowhere else; two episodes never share state (the mask itself is immutable
and shared). Every action -- allowed, refused or failed -- is appended to the
episode's action log as a ``records.ToolCall`` (tool, arguments, returned
ids, masked hits suppressed, error, elapsed time), including requests refused
as malformed (:meth:`SandboxEpisode.log_rejected`). The log stays on the
sandbox's side: the agent receives only :func:`~aethersearch.sandbox.serving.public_call`
copies (no masked ids) and pages served under the snippet policy of
``sandbox.serving`` (search: title + snippet; visit: full masked page).

``SandboxEpisode`` satisfies ``aethersearch.environment.Environment``, so an
agent uses it exactly like the plain search environment. ``open_sandbox``
reads a hint-free release's ``diagnostics.jsonl`` and returns a
:class:`Sandbox` that opens episodes by question id.
"""

from __future__ import annotations

import operator
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from aethersearch.corpus.base import DocumentStore
from aethersearch.corpus.hashing import corpus_hash
from aethersearch.environment import ToolResult
from aethersearch.errors import ConfigError, DataError, ToolError
from aethersearch.jsonl import iter_jsonl, validate_row
from aethersearch.records import DiagnosticsRow, Document, ToolCall
from aethersearch.release_layout import release_layout
from aethersearch.sandbox.action_record import ActionRecord
from aethersearch.sandbox.mask import ChainMask
from aethersearch.sandbox.serving import public_call, render_page, search_hit
from aethersearch.sandbox.tools import (
    PageResolver,
    SearchBackend,
    validate_page_name,
    validate_query,
)

__all__ = ["DictStore", "MAX_K", "PageStore", "Sandbox", "SandboxEpisode", "load_masks", "open_sandbox",
    "unknown_page_message", "visited_pages"]

MAX_K = 50


@runtime_checkable
class PageStore(Protocol):
    """What the sandbox needs of a corpus: membership, lookup by id, iteration (for titles)."""

    def __contains__(self, doc_id: object) -> bool: ...

    def get(self, doc_id: str) -> Document: ...

    def __iter__(self) -> Any: ...


class DictStore(DocumentStore):
    """A :class:`PageStore` and ``DocumentStore`` over an in-memory list of documents (tests, the demo world)."""

    def __init__(self, documents: list[Document]) -> None:
        self._docs = {doc.id: doc for doc in documents}
        if len(self._docs) != len(documents):
            raise ConfigError("duplicate document ids in the page list")

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def __len__(self) -> int:
        return len(self._docs)

    def get(self, doc_id: str) -> Document:
        try:
            return self._docs[doc_id]
        except KeyError:
            raise LookupError(f"no document {doc_id!r}") from None

    def __iter__(self) -> Iterator[Document]:
        return iter(self._docs.values())

    def ids(self) -> Iterator[str]:
        return iter(self._docs)

    @property
    def content_hash(self) -> str:
        """The corpus hash of the documents in their given order (as a store built from them reports)."""
        return corpus_hash(self._docs.values())


class SandboxEpisode:
    """The masked browse tools of one (run, question) episode; an ``Environment``.

    Refusals are results, not exceptions: ``search``/``visit`` always return a
    ``ToolResult`` whose ``call.error`` says what was wrong, so the runner can
    charge the budget and the trace shows it. ``*_sync`` variants serve the
    HTTP server (which runs them in a worker thread).
    """

    tools: tuple[str, ...] = ("search", "visit")

    def __init__(self, *, question_id: str, run_id: str, mask: ChainMask | None, backend: SearchBackend,
                 resolver: PageResolver, episode_id: str | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.question_id = question_id
        self.run_id = run_id
        self.episode_id = episode_id or uuid.uuid4().hex
        self.mask = mask
        self._backend = backend
        self._resolver = resolver
        self._clock = clock
        self._visited: set[str] = set()
        self._trace: list[ActionRecord] = []  # compact: a ToolCall is rebuilt only when a trace is read
        self._last: ToolCall | None = None  # the latest call in full, for the durable log
        self._lock = threading.Lock()
        self.closed = False

    # ------------------------------------------------------------------ state

    @property
    def visited(self) -> frozenset[str]:
        """Pages successfully visited so far (the unlock state)."""
        return frozenset(self._visited)

    @property
    def trace(self) -> list[ToolCall]:
        """The action log: every request of the episode, in order, masked ids included (never agent-facing)."""
        return [record.call() for record in self._trace]

    def call_at(self, seq: int) -> ToolCall:
        """Action ``seq`` of the episode (0-based), masked ids included."""
        return self._trace[seq].call()

    @property
    def public_trace(self) -> list[ToolCall]:
        """The action log as the agent saw it (:func:`public_call` of each entry)."""
        return [public_call(c) for c in self.trace]

    @property
    def actions(self) -> int:
        """How many requests the action log holds (the next action's ``seq``)."""
        return len(self._trace)

    @property
    def last_call(self) -> ToolCall:
        """The latest logged call in full, masked ids included (what the server's durable log records)."""
        if self._last is None:
            return self._trace[-1].call()
        return self._last

    def take_last_call(self) -> ToolCall:
        """:attr:`last_call`, handed over: afterwards memory keeps only its compact record (the server
        takes it once it is in the durable log, so an open episode holds no request at full size)."""
        call = self.last_call
        self._last = None
        return call

    def restore(self, calls: list[ToolCall]) -> None:
        """Replay a logged action list into a fresh episode (a restarted sandbox recovering it).

        The unlock state is exactly what it was: every successful visit's page is visited again.
        """
        with self._lock:
            if self._trace:
                raise ToolError(f"episode {self.episode_id} already has actions; restore only a fresh one")
            self._trace = [ActionRecord(call) for call in calls]
            self._last = None  # already in the durable log
            self._visited = visited_pages(calls)

    def documents_of(self, seq: int) -> list[Document]:
        """The documents action ``seq``, a logged successful call, served, rebuilt (a retried request is
        answered again).

        Deterministic: search hits are the snippets of the returned ids for the
        logged query, a visit the returned page as the (immutable) mask renders it.
        """
        store = self._resolver.store
        call = self.call_at(seq)
        if call.tool == "search":
            # the snippets as served then: masked by the pages visited *before* this call
            visited = visited_pages(self._trace[:seq])
            return [search_hit(self.mask, store.get(i), str(call.arguments.get("query", "")).strip(), visited)
                    for i in call.returned_ids]
        return [render_page(self.mask, store.get(i)) for i in call.returned_ids]

    def is_locked(self, page: str) -> bool:
        """Whether ``page`` is currently hidden in this episode."""
        return self.mask is not None and self.mask.is_locked(page, self._visited)

    def _log(self, call: ToolCall) -> ToolCall:
        """Append a call to the action log (stamped with its start time); return the agent's copy."""
        call = call.model_copy(update={"started_at": round(time.time() - call.elapsed_s, 6)})
        self._trace.append(ActionRecord(call))
        self._last = call
        return public_call(call)

    def log_rejected(self, tool: str, arguments: dict[str, Any], error: str) -> ToolCall:
        """Log a request refused before it reached a tool (malformed body); returns the agent's copy.

        Every request of an episode is logged, valid or not, so probing the
        sandbox with malformed requests leaves a trace like any other action.
        """
        with self._lock:
            return self._log(ToolCall(tool=tool, arguments=arguments, error=error, elapsed_s=0.0))

    def _check_open(self) -> None:
        if self.closed:
            raise ToolError(f"episode {self.episode_id} (question {self.question_id}) is closed",
                            fix="open a new episode")

    # ------------------------------------------------------------------ tools

    def search_sync(self, query: str, k: int = 5) -> ToolResult:
        """Search the corpus; locked chain pages are dropped (logged as suppressed, never shown)."""
        start = self._clock()
        args = {"query": query, "k": k}
        with self._lock:
            self._check_open()
            try:
                query = validate_query(query)
                try:
                    k = operator.index(k)  # any integer type; "5", 2.5 or None is a refusal, not a crash
                except TypeError:
                    k = -1
                if not 1 <= k <= MAX_K:
                    raise ToolError(f"k must be an integer between 1 and {MAX_K}, got {args['k']!r}")
            except ToolError as exc:
                return ToolResult([], self._log(ToolCall(tool="search", arguments=args, error=exc.message,
                                                         elapsed_s=self._clock() - start)))
            extra = 0 if self.mask is None else len(self.mask.masked)
            hits = self._backend.search([query], int(k) + extra)[0]
            returned: list[str] = []
            suppressed: list[str] = []
            for doc_id, _score in hits:
                if self.is_locked(doc_id):
                    suppressed.append(doc_id)
                elif len(returned) < int(k):
                    returned.append(doc_id)
            docs = [search_hit(self.mask, self._resolver.store.get(doc_id), query, self._visited)
                    for doc_id in returned]
            call = ToolCall(tool="search", arguments=args, returned_ids=returned, suppressed_ids=suppressed,
                            elapsed_s=self._clock() - start)
            return ToolResult(docs, self._log(call))

    def visit_sync(self, page: str) -> ToolResult:
        """Open a page by id or title; unknown and locked pages get the same refusal."""
        start = self._clock()
        args = {"page": page}
        with self._lock:
            self._check_open()
            try:
                name = validate_page_name(page)
            except ToolError as exc:
                return ToolResult([], self._log(ToolCall(tool="visit", arguments=args, error=exc.message,
                                                         elapsed_s=self._clock() - start)))
            doc_id = self._resolver.resolve(name)
            if doc_id is None or self.is_locked(doc_id):
                call = ToolCall(tool="visit", arguments=args, error=unknown_page_message(name),
                                suppressed_ids=[doc_id] if doc_id is not None else [],
                                elapsed_s=self._clock() - start)
                return ToolResult([], self._log(call))
            self._visited.add(doc_id)
            doc = render_page(self.mask, self._resolver.store.get(doc_id))
            call = ToolCall(tool="visit", arguments=args, returned_ids=[doc_id], elapsed_s=self._clock() - start)
            return ToolResult([doc], self._log(call))

    def close_sync(self) -> list[ToolCall]:
        """Close the episode (further calls are refused) and return its action log."""
        with self._lock:
            self.closed = True
            return self.trace

    async def search(self, query: str, k: int) -> ToolResult:
        """Search the encyclopedia for ``query``: the top ``k`` pages, each as title and a short snippet."""
        return self.search_sync(query, k)

    async def visit(self, page: str) -> ToolResult:
        """Open the page with this id or title and read its full text and links."""
        return self.visit_sync(page)

    async def close(self) -> None:
        """Close the episode."""
        self.close_sync()


def visited_pages(calls: Iterable[ToolCall | ActionRecord]) -> set[str]:
    """The pages an episode's successful visits opened (what unlocks their successors in the mask)."""
    return {c.returned_ids[0] for c in calls if c.tool == "visit" and c.error is None and c.returned_ids}


def unknown_page_message(name: str) -> str:
    """The refusal for a page that does not exist *or* is still masked (deliberately identical)."""
    return f"no page named {name!r} is available; search for it or follow a link from a page you visited"


class Sandbox:
    """Opens isolated episodes for the questions of one hint-free release."""

    def __init__(self, masks: dict[str, ChainMask], backend: SearchBackend, store: PageStore, *,
                 release_id: str | None = None, corpus_hash: str | None = None,
                 index_hash: str | None = None) -> None:
        self.masks = masks
        self.backend = backend
        self.store = store
        self.resolver = PageResolver(store)
        self.release_id = release_id
        #: what the pages and the index are (``/health`` reports them; a run records them in run.json)
        self.corpus_hash = corpus_hash
        self.index_hash = index_hash

    @property
    def question_ids(self) -> list[str]:
        """Question ids in release order."""
        return list(self.masks)

    def episode(self, question_id: str, *, run_id: str = "run", episode_id: str | None = None) -> SandboxEpisode:
        """A fresh episode for ``question_id``; an unknown id is a ConfigError naming it."""
        if question_id not in self.masks:
            raise ConfigError(f"question {question_id!r} is not in this sandbox release"
                              f"{'' if self.release_id is None else f' {self.release_id!r}'}",
                              fix="use an id from the release's rollout_questions.jsonl")
        return SandboxEpisode(question_id=question_id, run_id=run_id, mask=self.masks[question_id],
                              backend=self.backend, resolver=self.resolver, episode_id=episode_id)


def load_masks(release_dir: str | Path) -> dict[str, ChainMask]:
    """Question id -> ChainMask, from a hint-free release's ``diagnostics.jsonl`` (``extra["mask"]``)."""
    try:
        path = release_layout(release_dir).diagnostics
    except DataError:
        path = Path(release_dir) / "diagnostics.jsonl"
    if not path.exists():
        raise DataError(path, "missing: not a hint-free release directory",
                        fix="build one with `aether construct demo --out DIR`")
    masks: dict[str, ChainMask] = {}
    for line, value in iter_jsonl(path):
        row = validate_row(path, line, value, DiagnosticsRow)
        if "mask" not in row.extra:
            raise DataError(path, f"row {row.id!r} has no chain mask", line=line, field="extra.mask",
                            fix="this release was not built by `aether construct`")
        masks[row.id] = ChainMask.from_json(row.extra["mask"], origin=str(path), line=line)
    return masks


def open_sandbox(release_dir: str | Path, index: SearchBackend, store: PageStore, *,
                 corpus_hash: str | None = None, index_hash: str | None = None) -> Sandbox:
    """A :class:`Sandbox` over ``index`` and ``store`` with the chain masks of the release in ``release_dir``.

    ``store`` must hold one document per page (ids = the graph's page ids) and
    ``index`` must return those ids. ``corpus_hash``/``index_hash`` say what they
    are, for ``/health`` and the runs served.
    """
    masks = load_masks(release_dir)
    missing = sorted({page for mask in masks.values() for page in mask.path if page not in store})
    if missing:
        raise ConfigError(f"{len(missing)} chain page(s) of {release_dir} are not in the store, e.g. {missing[:3]}",
                          fix="open the sandbox over the corpus the release was constructed from")
    release_id = None
    manifest = release_layout(release_dir).manifest
    if manifest.exists():
        from aethersearch.jsonl import loads

        release_id = loads(manifest.read_bytes()).get("release_id")
    return Sandbox(masks, index, store, release_id=release_id, corpus_hash=corpus_hash, index_hash=index_hash)
