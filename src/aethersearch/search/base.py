"""The SearchIndex protocol: batched retrieval returning ``(doc_id, score)`` per query."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class SearchIndex(Protocol):
    """A retrieval index over a fixed, hashed corpus."""

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


class IndexIdentity:
    """The two hashes every backend reports, kept in one place.

    A backend's constructor sets ``_corpus_hash`` and ``_index_hash`` (read from
    its index directory); these read-only properties satisfy ``SearchIndex``.
    """

    _corpus_hash: str
    _index_hash: str

    @property
    def corpus_hash(self) -> str:
        """Content hash of the corpus this index was built from."""
        return self._corpus_hash

    @property
    def index_hash(self) -> str:
        """Hash identifying the index (config + corpus hash + build artefacts)."""
        return self._index_hash
