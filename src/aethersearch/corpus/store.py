"""Offset-indexed JSONL document store: random access without loading the corpus.

Row -> document is O(1) (one offset lookup and one slice); id -> row is O(1)
expected: a bucket directory over the sorted 64-bit id hashes (the top bits pick
a bucket holding about two hashes) narrows the lookup to a handful of entries.

Why this layout: Search-R1's wiki-18 has 21M passages; holding them as Python
objects costs tens of GB. The store keeps one canonical JSON line per document
in ``documents.jsonl`` and only small numpy arrays beside it, all memory-mapped:

* ``offsets.npy`` (int64, n+1): byte offset of each line, so row -> document is one slice;
* ``ids.bin`` + ``id_offsets.npy``: the ids concatenated, so row -> id needs no JSON parse;
* ``id_hashes.npy`` (uint64, sorted) + ``id_rows.npy``: a stable 64-bit hash of every
  id (blake2b, see ``hashing.id_hash64``) and the row it belongs to; collisions are
  resolved by comparing ids;
* ``id_buckets.npy`` (int64, 2**b + 1): where each bucket of hashes (their top
  ``b`` bits, 2**b ≈ n/2) starts in ``id_hashes.npy``, so id -> row touches one
  bucket instead of binary-searching (stores written before it fall back to the search);
* ``store.json``: count, content hash and provenance, written last, so a store whose
  build died is never opened.

The content hash is the sha256 of ``documents.jsonl`` itself, which is the
canonical lines in store order (see ``hashing``): stable across runs and machines.
"""

from __future__ import annotations

import mmap
import os
import shutil
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from aethersearch.corpus.base import DocumentStore
from aethersearch.corpus.hashing import HASH_SCHEME, CorpusHasher, canonical_document_bytes, id_hash64
from aethersearch.corpus.id_index import bucket_bits, write_id_index
from aethersearch.corpus.npy_stream import NpyAppender
from aethersearch.errors import AetherError, ConfigError, DataError, IntegrityError
from aethersearch.jsonl import atomic_write_json, dumps_pretty, sha256_file
from aethersearch.records import SCHEMA_VERSION, Document

__all__ = ["DocumentNotFound", "JsonlStore", "MANIFEST", "RECENT_IDS", "STORE_KIND", "build_store", "open_store"]

STORE_KIND = "aethersearch-document-store"
MANIFEST = "store.json"
#: the build's id hashes in row order, sorted into the id index and deleted before the store is renamed in
_HASHES_BY_ROW = "id_hashes.by_row.npy"
#: rows whose offsets and hashes are buffered between two writes to their files
_SPILL_ROWS = 1 << 16


class DocumentNotFound(AetherError, LookupError):
    """A document id that the store does not hold."""


def build_store(documents: Iterable[Document], out_dir: str | Path, *, source: str = "<iterable>",
                overwrite: bool = False, on_document: Callable[[int], None] | None = None) -> JsonlStore:
    """Write ``documents`` (in this order) as a store at ``out_dir`` and open it.

    The store is built in a temporary sibling directory and renamed into place,
    so ``out_dir`` is either the complete old store, absent, or the complete new one.
    Duplicate ids are a ``DataError`` naming both rows.
    """
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(f"{out} already exists and is not empty",
                              fix="choose another --out directory or pass overwrite/--force")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        hasher = CorpusHasher()
        position = id_position = 0
        # every per-row array goes to a file as it is made (NpyAppender), and the id index is sorted a hash
        # range at a time (id_index): a build holds no memory per document, where the arrays held until the
        # end were 24 bytes a document at the moment the build was largest
        with (tmp / "documents.jsonl").open("wb") as docs_file, (tmp / "ids.bin").open("wb") as ids_file, \
                NpyAppender(tmp / "offsets.npy", "int64") as offsets_out, \
                NpyAppender(tmp / "id_offsets.npy", "int64") as id_offsets_out, \
                NpyAppender(tmp / _HASHES_BY_ROW, "uint64") as hashes_out:
            offsets, id_offsets, hashes = array("q", [0]), array("q", [0]), array("Q")
            for doc in documents:
                line = canonical_document_bytes(doc)
                docs_file.write(line)
                hasher.update_line(line)
                position += len(line)
                offsets.append(position)
                raw_id = doc.id.encode("utf-8")
                ids_file.write(raw_id)
                id_position += len(raw_id)
                id_offsets.append(id_position)
                hashes.append(id_hash64(doc.id))
                if on_document is not None:
                    on_document(hasher.count)
                if len(hashes) == _SPILL_ROWS:
                    _spill((offsets, offsets_out), (id_offsets, id_offsets_out), (hashes, hashes_out))
            _spill((offsets, offsets_out), (id_offsets, id_offsets_out), (hashes, hashes_out))
            docs_file.flush()
            os.fsync(docs_file.fileno())
        write_id_index(tmp, tmp / _HASHES_BY_ROW,
                       lambda sorted_hashes, rows: _check_unique(tmp, sorted_hashes, rows, source))
        (tmp / _HASHES_BY_ROW).unlink()
        atomic_write_json(tmp / MANIFEST, {
            "kind": STORE_KIND, "schema_version": SCHEMA_VERSION, "count": hasher.count,
            "content_hash": hasher.hexdigest(), "hash_scheme": HASH_SCHEME, "source": source,
        })
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return JsonlStore(out)


def _spill(*pairs: tuple[array[int], NpyAppender]) -> None:
    """Append each buffer to its file and empty it."""
    for values, out in pairs:
        out.extend(np.frombuffer(values, dtype=out.dtype))
        del values[:]


def _mapped_array(path: Path) -> np.ndarray:
    """``path`` memory-mapped read-only, as a plain ndarray view of the map.

    ``np.memmap``'s ``__getitem__`` is Python code that runs on every scalar read; the hot
    paths here (id -> row -> document, about ten reads per hit) read scalars, and through the
    plain view they cost a fifth as much. The view keeps the map open (its ``base``).
    """
    mapped: np.ndarray = np.load(path, mmap_mode="r").view(np.ndarray)
    return mapped


def _map_file(path: Path) -> mmap.mmap | bytes:
    """``path`` mapped read-only (``b""`` for an empty file, which ``mmap`` refuses)."""
    if path.stat().st_size == 0:
        return b""
    with path.open("rb") as handle:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _check_unique(tmp: Path, sorted_hashes: np.ndarray, rows: np.ndarray, source: str) -> None:
    """A DataError naming both rows when two rows of one run of equal hashes have the same id (the ids are
    read from the finished ``ids.bin``, mapped: only where hashes repeat)."""
    if len(sorted_hashes) < 2:
        return
    same = np.flatnonzero(sorted_hashes[1:] == sorted_hashes[:-1])
    if not len(same):
        return
    id_offsets = _mapped_array(tmp / "id_offsets.npy")
    ids = _map_file(tmp / "ids.bin")
    for position in same.tolist():
        a, b = sorted((int(rows[position]), int(rows[position + 1])))
        id_a = ids[id_offsets[a]:id_offsets[a + 1]]
        if id_a == ids[id_offsets[b]:id_offsets[b + 1]]:
            raise DataError(source, f"duplicate document id {id_a.decode()!r} (documents {a + 1} and {b + 1})",
                            fix="document ids must be unique; deduplicate the corpus before importing")


#: ids :meth:`JsonlStore.id_at` remembers for the :meth:`JsonlStore.row_of` that follows it
RECENT_IDS = 4096


class JsonlStore(DocumentStore):
    """A read-only, memory-mapped document store, addressable by id and by row."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        manifest_path = self.directory / MANIFEST
        if not manifest_path.is_file():
            raise DataError(manifest_path, "not a document store (store.json missing)",
                            fix="build one with `aether corpus import ...` or pass the store directory")
        manifest = orjson.loads(manifest_path.read_bytes())
        if manifest.get("kind") != STORE_KIND:
            raise DataError(manifest_path, f"kind is {manifest.get('kind')!r}, expected {STORE_KIND!r}",
                            fix="pass a directory written by build_store")
        self.manifest: dict[str, Any] = manifest
        self._count = int(manifest["count"])
        self._offsets = _mapped_array(self.directory / "offsets.npy")
        self._id_offsets = _mapped_array(self.directory / "id_offsets.npy")
        self._hashes = _mapped_array(self.directory / "id_hashes.npy")
        self._rows = _mapped_array(self.directory / "id_rows.npy")
        buckets = self.directory / "id_buckets.npy"
        self._buckets = _mapped_array(buckets) if buckets.is_file() else None
        self._bucket_shift = np.uint64(64 - bucket_bits(self._count))
        self._docs = _map_file(self.directory / "documents.jsonl")
        self._ids = _map_file(self.directory / "ids.bin")
        self._recent: dict[str, int] = {}  # id -> row of ids id_at handed out lately (see row_of)
        # the offsets as memoryviews: an item read is a Python int, three times as fast as a numpy scalar
        # made into one, and the row reads below are per hit
        self._row_bounds = self._offsets.data
        self._id_bounds = self._id_offsets.data
        if len(self._offsets) != self._count + 1:
            raise IntegrityError(f"{self.directory}: offsets.npy has {len(self._offsets) - 1} rows, "
                                 f"store.json says {self._count}", fix="rebuild the store")

    # ------------------------------------------------------------------ protocol
    @property
    def content_hash(self) -> str:
        """The corpus hash recorded at build time (``verify()`` recomputes it)."""
        return str(self.manifest["content_hash"])

    def __len__(self) -> int:
        return self._count

    def __contains__(self, doc_id: object) -> bool:
        return isinstance(doc_id, str) and self.row_of(doc_id) is not None

    def get(self, doc_id: str) -> Document:
        """The document with this id; ``DocumentNotFound`` (a LookupError) names the id otherwise."""
        row = self.row_of(doc_id)
        if row is None:
            raise DocumentNotFound(f"document {doc_id!r} is not in the store {self.directory} "
                                   f"({self._count} documents)", fix="check the id (ids are case-sensitive)")
        return self.doc_at(row)

    def ids(self) -> Iterator[str]:
        """All ids in store order."""
        for row in range(self._count):
            yield self.id_at(row)

    def __iter__(self) -> Iterator[Document]:
        for row in range(self._count):
            yield self.doc_at(row)

    def stream_raw(self, release_every: int = 1 << 22) -> Iterator[bytes]:
        """Every row's JSON line in store order, for one pass over the whole store: the mapped file pages
        behind the read position are handed back (``MADV_DONTNEED``) every few MB, so a pass leaves the
        process's resident memory flat instead of holding the whole file mapped in (``release_every``: bytes
        read between two releases)."""
        step = release_every
        released = 0
        for row in range(self._count):
            yield self.raw_line(row)
            end = self._row_bounds[row + 1]
            if end - released >= step:
                upto = end - end % mmap.PAGESIZE
                self.release_mapped(released, upto)
                released = upto

    def stream(self) -> Iterator[Document]:
        """Every document in store order, read as :meth:`stream_raw` reads (resident memory stays flat)."""
        for line in self.stream_raw():
            yield Document.model_validate(orjson.loads(line))

    def release_mapped(self, start: int = 0, end: int | None = None) -> None:
        """Hand back the documents' mapped file pages from byte ``start`` (page-aligned) to ``end`` (default:
        the whole map) with ``MADV_DONTNEED``; they are read again from the page cache when next needed. For
        a pass over the store (:meth:`stream_raw`, behind its read position) and for a caller that reads rows
        at random across it (construction's page lookups), whose touched pages would otherwise all stay in the
        process's resident memory. Nothing to do for an empty store or where the platform lacks it."""
        if isinstance(self._docs, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):  # a platform constant (POSIX)
            self._docs.madvise(mmap.MADV_DONTNEED, start, (len(self._docs) if end is None else end) - start)

    # ------------------------------------------------------------------ rows
    @property
    def rows(self) -> JsonlStore:
        """This store: its documents sit in a fixed row order (:class:`~aethersearch.corpus.base.RowStore`)."""
        return self

    def doc_at(self, row: int) -> Document:
        """The document in row ``row`` (0-based store order)."""
        bounds = self._row_bounds
        return Document.model_validate(orjson.loads(self._docs[bounds[row]:bounds[row + 1]]))

    def raw_at(self, row: int) -> dict[str, Any]:
        """Row ``row`` as a plain dict (cheaper than a validated ``Document`` on hot paths)."""
        bounds = self._row_bounds
        value: dict[str, Any] = orjson.loads(self._docs[bounds[row]:bounds[row + 1]])
        return value

    def raw_rows(self, rows: Sequence[int]) -> list[dict[str, Any]]:
        """Rows ``rows`` as plain dicts, in one call: a search server reads a query's hits together, so the
        lookups are bound once per query rather than once per hit."""
        bounds, docs, loads = self._row_bounds, self._docs, orjson.loads
        return [loads(docs[bounds[row]:bounds[row + 1]]) for row in rows]

    def raw_line(self, row: int) -> bytes:
        """Row ``row``'s canonical JSON line, undecoded (one slice of the memory map)."""
        bounds = self._row_bounds
        return bytes(self._docs[bounds[row]:bounds[row + 1]])

    def id_at(self, row: int) -> str:
        """The id in row ``row`` without parsing its JSON."""
        bounds = self._id_bounds
        doc_id = bytes(self._ids[bounds[row]:bounds[row + 1]]).decode("utf-8")
        recent = self._recent
        if len(recent) >= RECENT_IDS:
            recent.clear()
        recent[doc_id] = row
        return doc_id

    def row_of(self, doc_id: str) -> int | None:
        """Row of ``doc_id`` or None: an id :meth:`id_at` handed out lately, else find its 64-bit hash in its
        bucket, then compare ids.

        Why the memo: where the server cannot read an index's hits by row (a hybrid fuses its sides' ids),
        the sides turn rows into ids with :meth:`id_at` and the server fetches each hit by id straight after;
        the hash lookup was 40% of the server's own work per hit (``benchmarks/dense.py``). Rows never change in a store, so a remembered pair is always right;
        the memo holds at most :data:`RECENT_IDS` pairs and is cleared, not evicted, when full.
        """
        row = self._recent.get(doc_id)
        if row is not None:
            return row
        if not self._count:
            return None
        key = np.uint64(id_hash64(doc_id))
        if self._buckets is None or len(self._buckets) == 2:
            position = int(np.searchsorted(self._hashes, key))
        else:
            bucket = int(key >> self._bucket_shift)
            position, end = int(self._buckets[bucket]), int(self._buckets[bucket + 1])
            while position < end and self._hashes[position] < key:
                position += 1
        while position < self._count and self._hashes[position] == key:
            row = int(self._rows[position])
            if self.id_at(row) == doc_id:
                return row
            position += 1
        return None

    def verify(self) -> None:
        """Recompute the content hash from ``documents.jsonl``; IntegrityError if it changed."""
        actual = f"{HASH_SCHEME}:{sha256_file(self.directory / 'documents.jsonl')}"
        if actual != self.content_hash:
            raise IntegrityError(f"{self.directory}: content hash {actual} != recorded {self.content_hash}",
                                 fix="the store was modified after it was built; rebuild it")

    def describe(self) -> bytes:
        """The manifest as pretty JSON (for ``aether corpus info``)."""
        return dumps_pretty(self.manifest)


def open_store(directory: str | Path) -> JsonlStore:
    """Open a store directory written by :func:`build_store`."""
    return JsonlStore(directory)
