"""The document-store protocol every corpus backend satisfies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from aethersearch.records import Document


@runtime_checkable
class DocumentStore(Protocol):
    """Random access to documents by id (O(1)) without loading the corpus into Python objects."""

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
