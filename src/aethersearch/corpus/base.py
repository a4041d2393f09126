"""The document-store protocol every corpus backend satisfies."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from aethersearch.records import Document

__all__ = ["DocumentStore", "RowStore"]


class RowStore(Protocol):
    """Row-addressed access to a store whose documents sit in a fixed order (0-based store rows).

    Why rows: the search server and the distractor probe read hits and draws by row,
    skipping the id -> row lookup that was a third of the server's work per hit.
    """

    def id_at(self, row: int) -> str:
        """The id in row ``row``."""
        ...

    def raw_at(self, row: int) -> dict[str, Any]:
        """Row ``row`` as plain JSON fields (cheaper than a validated ``Document``)."""
        ...

    def raw_rows(self, rows: Sequence[int]) -> list[dict[str, Any]]:
        """Rows ``rows`` as plain JSON fields, in one call."""
        ...

    def row_of(self, doc_id: str) -> int | None:
        """The row of ``doc_id``, None when absent."""
        ...


@runtime_checkable
class DocumentStore(Protocol):
    """Random access to documents by id (O(1)) without loading the corpus into Python objects.

    ``rows`` is the one optional ability, declared with its default: a store that
    keeps its documents in a fixed order offers row-addressed access
    (:class:`RowStore`); one that does not answers None.
    """

    @property
    def content_hash(self) -> str:
        """Stable content hash of the whole corpus (same across runs and machines)."""
        ...

    def __len__(self) -> int: ...

    def __contains__(self, doc_id: object) -> bool: ...

    def get(self, doc_id: str) -> Document:
        """The document with this id; KeyError-free: raises DataError/LookupError with a message."""
        ...

    def ids(self) -> Iterator[str]:
        """All document ids in store order."""
        ...

    def __iter__(self) -> Iterator[Document]: ...

    @property
    def rows(self) -> RowStore | None:
        """Row-addressed access to this store, None (the default) when it keeps no fixed row order."""
        return None
