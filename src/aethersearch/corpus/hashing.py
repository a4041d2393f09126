"""Stable content hashes for documents and corpora.

Why a canonical form: the corpus hash is recorded in every index and every run
fingerprint, so two machines that import the same corpus must compute the same
hash. The canonical bytes of a document are its record as compact JSON with
sorted keys (orjson, UTF-8, no whitespace), followed by ``\\n`` -- exactly the
line the document store writes. The corpus hash is the sha256 of those lines
concatenated **in store (file) order**, prefixed with the scheme name so a
future scheme can never be confused with this one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from aethersearch.jsonl import dumps
from aethersearch.records import Document

__all__ = ["CorpusHasher", "HASH_SCHEME", "OPTIONAL_FIELDS", "canonical_document_bytes", "corpus_hash", "id_hash64"]

HASH_SCHEME = "sha256-canonical-jsonl-v1"


OPTIONAL_FIELDS = ("source_contents", "source_id")


def canonical_document_bytes(doc: Document) -> bytes:
    """The canonical JSON line of one document (what the store writes and the hash reads).

    The pass-through fields (``source_contents``, ``source_id``) are written only when set,
    so a corpus whose rows need neither hashes exactly as it did before they existed.
    Every field of a ``Document`` is held as its JSON value (``str``, ``list[str]``, ``int``, ``None``), so
    its field dict is what ``model_dump(mode="json")`` would copy out; reading it directly halves the
    line's cost, which the store pays once per page (a test holds the two equal).
    """
    data = {name: value for name, value in doc.__dict__.items() if value is not None or name not in OPTIONAL_FIELDS}
    return dumps(data) + b"\n"


class CorpusHasher:
    """Incremental corpus hash: feed canonical lines in store order, read ``hexdigest``."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self.count = 0

    def update_line(self, line: bytes) -> None:
        """Add one canonical document line (must end in ``\\n``)."""
        self._digest.update(line)
        self.count += 1

    def update(self, doc: Document) -> None:
        """Add one document."""
        self.update_line(canonical_document_bytes(doc))

    def hexdigest(self) -> str:
        """``sha256-canonical-jsonl-v1:<hex>`` of everything fed so far."""
        return f"{HASH_SCHEME}:{self._digest.hexdigest()}"


def corpus_hash(documents: Iterable[Document]) -> str:
    """Hash of a corpus given its documents in store order (same as the store's ``content_hash``)."""
    hasher = CorpusHasher()
    for doc in documents:
        hasher.update(doc)
    return hasher.hexdigest()


def id_hash64(doc_id: str) -> int:
    """A stable 64-bit hash of a document id (blake2b-8), used by the store's on-disk id index.

    Python's ``hash()`` is salted per process, so it cannot be stored on disk.
    """
    return int.from_bytes(hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest(), "little")
