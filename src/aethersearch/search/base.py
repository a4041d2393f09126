"""The SearchIndex protocol: batched retrieval returning ``(doc_id, score)`` per query."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

from aethersearch.records import Record

if TYPE_CHECKING:
    from aethersearch.search.wire import WireRows

__all__ = ["IndexIdentity", "IndexManifest", "SearchIndex", "StoreRowsIndex"]


class SearchIndex(Protocol):
    """A retrieval index over a fixed, hashed corpus.

    ``corpus_hash``, ``index_hash`` and ``search`` are required. The optional
    abilities the servers use are declared here with defaults (every backend
    inherits them through :class:`IndexIdentity`): its ``backend`` name, ``warm_up``
    before serving, pre-encoded ``wire_rows``, the retrieval ``modes`` a hybrid
    serves, and what ``describe`` says in ``/health``.
    """

    #: the backend's registry name (``bm25``, ``faiss``, ``hybrid``…); "" when it has none
    backend: str = ""
    #: pre-encoded hits the search server splices into replies (see :mod:`aethersearch.search.wire`)
    wire_rows: WireRows | None = None

    @property
    def corpus_hash(self) -> str:
        """Content hash of the corpus this index was built from."""
        ...

    @property
    def index_hash(self) -> str:
        """Hash identifying the index (config + corpus hash + build artefacts)."""
        ...

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` ``(doc_id, score)`` per query, best first; never more hits than documents."""
        ...

    def warm_up(self) -> None:
        """Pay first-request costs (JIT compilation, page cache) before serving; default: none."""
        return None

    def modes(self) -> dict[str, SearchIndex] | None:
        """The index answering each retrieval mode it serves itself (a hybrid's); None (the default): the
        one mode its ``backend`` is (:func:`~aethersearch.search.modes.retrieval_modes`)."""
        return None

    def describe(self) -> dict[str, Any] | None:
        """AetherSearch's ``/health`` facts about this index (``index_ntotal``…); None (the default): none."""
        return None


class IndexIdentity(SearchIndex):
    """The two hashes every backend reports, kept in one place.

    A backend's constructor sets ``_corpus_hash`` and ``_index_hash`` (read from
    its index directory); these read-only properties satisfy ``SearchIndex``.
    """

    _corpus_hash: str
    _index_hash: str

    @classmethod
    def prepare_config(cls, config: Any) -> Any:
        """The backend's settings completed before a build (e.g. a faiss GPU choice); default: as given."""
        return config

    @property
    def corpus_hash(self) -> str:
        """Content hash of the corpus this index was built from."""
        return self._corpus_hash

    @property
    def index_hash(self) -> str:
        """Hash identifying the index (config + corpus hash + build artefacts)."""
        return self._index_hash


class StoreRowsIndex(IndexIdentity):
    """An index whose hits are rows of its own document store (every store-backed backend).

    A backend implements :meth:`search_rows`; :meth:`search` names the rows by id. The search
    server reads :meth:`search_rows` directly when the index's :attr:`store` is the one it serves
    from, so a hit is never turned from row into id and back into row (the id -> row lookup was
    a third of the server's own work per hit). ``_store`` is set by the backend's constructor.
    """

    _store: Any

    @property
    def store(self) -> Any:
        """The store whose rows this index's hits are."""
        return self._store

    def search_rows(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """Top-``k`` ``(store row, score)`` per query, best first; empty queries return no hits."""
        raise NotImplementedError

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[str, float]]]:
        """Top-``k`` ``(doc_id, score)`` per query: :meth:`search_rows` with each row named by its id."""
        id_at = self._store.id_at
        return [[(id_at(row), score) for row, score in found] for found in self.search_rows(queries, k)]


class IndexManifest(Record):
    """``index.json`` of an index directory: what the index was built from, with which settings, and its hash.

    Written once by ``build_index`` and read by every backend's ``load``, the
    ``/health`` route and the CLI. ``config`` is the backend's own settings (its
    ``config_model`` validates them on load); ``build_stats`` what the build measured
    (timings and memory vary run to run and are not hashed); ``artefacts`` the sha256
    of each file the backend wrote, by relative path; ``store`` the document store's
    path (absolute, or ``store`` inside the directory).
    """

    kind: Literal["aethersearch-index"]
    schema_version: int
    backend: str
    config: dict[str, Any]
    corpus_hash: str
    corpus_size: int
    store: str
    build_stats: dict[str, Any]
    artefacts: dict[str, str]
    index_hash: str

