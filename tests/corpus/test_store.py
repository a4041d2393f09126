"""The offset-indexed store: random access by id, stable content hash, refusals with locations."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.corpus.base import DocumentStore
from aethersearch.corpus.hashing import OPTIONAL_FIELDS, canonical_document_bytes, corpus_hash
from aethersearch.corpus.store import DocumentNotFound, build_store, open_store
from aethersearch.errors import ConfigError, DataError, IntegrityError
from aethersearch.jsonl import dumps
from aethersearch.records import Document

DOCS = [Document(id=f"doc{i}", title=f"Title {i}", text=f"text {i} ünïcödé", links=[f"doc{(i + 1) % 50}"])
        for i in range(50)]


def test_random_access_by_id_and_row(tmp_path: Path) -> None:
    store = build_store(DOCS, tmp_path / "s")
    assert isinstance(store, DocumentStore)
    assert len(store) == 50
    assert store.get("doc17") == DOCS[17]
    assert store.doc_at(3) == DOCS[3] and store.id_at(49) == "doc49"
    assert "doc0" in store and "doc50" not in store and 5 not in store
    assert list(store.ids()) == [d.id for d in DOCS]
    assert list(store) == DOCS
    with pytest.raises(DocumentNotFound, match="'missing' is not in the store"):
        store.get("missing")
    with pytest.raises(LookupError):
        store.get("missing")


def test_content_hash_is_stable_and_content_sensitive(tmp_path: Path) -> None:
    a = build_store(DOCS, tmp_path / "a")
    b = open_store(build_store(iter(DOCS), tmp_path / "elsewhere" / "b").directory)
    assert a.content_hash == b.content_hash == corpus_hash(DOCS)
    assert a.content_hash.startswith("sha256-canonical-jsonl-v1:")
    changed = build_store([*DOCS[:-1], DOCS[-1].model_copy(update={"text": "edited"})], tmp_path / "c")
    reordered = build_store(list(reversed(DOCS)), tmp_path / "d")
    assert len({a.content_hash, changed.content_hash, reordered.content_hash}) == 3
    a.verify()


def test_known_hash_value_pins_the_scheme(tmp_path: Path) -> None:
    """Same bytes on every machine: the canonical line of a document is fixed."""
    store = build_store([Document(id="1", title="T", text="x")], tmp_path / "s")
    line = (store.directory / "documents.jsonl").read_bytes()
    assert line == b'{"id":"1","links":[],"text":"x","title":"T","url":null}\n'


def test_tampering_is_detected(tmp_path: Path) -> None:
    store = build_store(DOCS, tmp_path / "s")
    path = store.directory / "documents.jsonl"
    path.write_bytes(path.read_bytes().replace(b"text 3", b"TEXT 3"))
    with pytest.raises(IntegrityError, match="rebuild"):
        open_store(store.directory).verify()


def test_duplicate_ids_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="duplicate document id 'doc1' \\(documents 2 and 4\\)"):
        build_store([DOCS[0], DOCS[1], DOCS[2], DOCS[1]], tmp_path / "dup", source="x.jsonl")
    assert not (tmp_path / "dup").exists()
    assert not list(tmp_path.glob(".dup*"))


def test_existing_store_needs_overwrite(tmp_path: Path) -> None:
    build_store(DOCS[:2], tmp_path / "s")
    with pytest.raises(ConfigError, match="not empty"):
        build_store(DOCS, tmp_path / "s")
    assert len(build_store(DOCS, tmp_path / "s", overwrite=True)) == 50


def test_empty_store_and_not_a_store(tmp_path: Path) -> None:
    empty = build_store([], tmp_path / "e")
    assert len(empty) == 0 and "x" not in empty and list(empty) == []
    with pytest.raises(DataError, match="store.json missing"):
        open_store(tmp_path)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40, unique=True))
def test_any_ids_round_trip(tmp_path_factory: pytest.TempPathFactory, ids: list[str]) -> None:
    root = tmp_path_factory.mktemp("h")
    store = build_store([Document(id=i, title=i, text="t") for i in ids], root / "s")
    assert [store.get(i).id for i in ids] == ids
    assert all(store.row_of(i) == n for n, i in enumerate(ids))


_OPTIONAL_TEXT = st.none() | st.text(max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.builds(Document, id=st.text(min_size=1, max_size=12), title=st.text(max_size=12), text=st.text(max_size=40),
                 links=st.lists(st.text(max_size=8), max_size=4), url=_OPTIONAL_TEXT, source_contents=_OPTIONAL_TEXT,
                 source_id=st.none() | st.integers(min_value=-2**63, max_value=2**63 - 1)))
def test_the_canonical_line_is_the_documents_json_record(doc: Document) -> None:
    # the store's line is read off the field dict, not model_dump: the two must give the same bytes, and so
    # the same corpus hash, for every document (optional fields written only when set)
    record = {k: v for k, v in doc.model_dump(mode="json").items() if v is not None or k not in OPTIONAL_FIELDS}
    assert canonical_document_bytes(doc) == dumps(record) + b"\n"


def test_id_lookup_goes_through_the_bucket_directory_and_finds_every_id(tmp_path) -> None:
    import numpy as np

    from aethersearch.corpus.store import bucket_bits, build_store, open_store
    from aethersearch.records import Document

    docs = [Document(id=f"page-{i}", title=f"Page {i}", text="t") for i in range(5000)]
    store = build_store(docs, tmp_path / "store")
    buckets = np.load(tmp_path / "store" / "id_buckets.npy")
    assert len(buckets) == (1 << bucket_bits(5000)) + 1 and buckets[-1] == 5000
    assert np.all(np.diff(buckets) >= 0) and np.diff(buckets).max() < 32  # a bucket is a handful of hashes
    assert [store.row_of(doc.id) for doc in docs] == list(range(5000))
    assert store.row_of("page-5000") is None and "missing" not in store
    # a store written before the bucket directory existed still answers by binary search
    (tmp_path / "store" / "id_buckets.npy").unlink()
    older = open_store(tmp_path / "store")
    assert [older.row_of(doc.id) for doc in docs[:200]] == list(range(200))


def test_lookup_arrays_are_plain_views_of_their_maps_that_outlive_the_opener(tmp_path: Path) -> None:
    """The id -> row -> document path reads scalars; ``np.memmap`` runs Python on each (see benchmarks/dense.py)."""
    import gc

    import numpy as np

    build_store(DOCS, tmp_path / "s")
    store = open_store(tmp_path / "s")
    for name in ("_offsets", "_id_offsets", "_hashes", "_rows", "_buckets"):
        array = getattr(store, name)
        if array is not None:
            assert type(array) is np.ndarray and not array.flags.writeable, name
            assert isinstance(array.base, np.memmap), name  # still the file's map, not a copy in memory
    gc.collect()
    assert [store.row_of(d.id) for d in DOCS] == list(range(50)) and store.get("doc7") == DOCS[7]


def test_ids_handed_out_by_row_map_back_to_their_rows_past_the_memo(tmp_path: Path) -> None:
    """A server turns an index's rows into ids and fetches those ids at once; ``row_of`` remembers the
    ids ``id_at`` handed out. Past the memo's size (it is cleared, not evicted) every id still maps back
    to its own row, and an id never stored maps to none."""
    from aethersearch.corpus.store import RECENT_IDS

    count = RECENT_IDS + 300
    store = build_store((Document(id=f"d{i}", title=f"T{i}", text="x") for i in range(count)), tmp_path / "s")
    rows = [*range(count), *range(0, count, 7)]  # every row, then again after the memo was cleared
    assert [store.row_of(store.id_at(row)) for row in rows] == rows
    assert store.row_of("d-absent") is None and store.doc_at(store.row_of("d17") or 0).id == "d17"
