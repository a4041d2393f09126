"""The store's id index sorted a hash range at a time equals the index sorted whole, file for file."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aethersearch.corpus import id_index
from aethersearch.corpus.id_index import bucket_bits, range_bits, write_id_index
from aethersearch.corpus.npy_stream import NpyAppender
from aethersearch.corpus.store import build_store, open_store
from aethersearch.errors import DataError
from aethersearch.records import Document


def _saved(values: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, values, allow_pickle=False)
    return out.getvalue()


def _whole_sort(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The index as the store wrote it before: one stable argsort, one searchsorted over every bucket."""
    order = np.argsort(hashes, kind="stable").astype(np.int64)
    ordered = hashes[order]
    bits = bucket_bits(len(hashes))
    if bits == 0:
        directory = np.array([0, len(hashes)], dtype=np.int64)
    else:
        starts = np.arange(1 << bits, dtype=np.uint64) << np.uint64(64 - bits)
        directory = np.append(np.searchsorted(ordered, starts).astype(np.int64), np.int64(len(hashes)))
    return ordered, order, directory


@settings(max_examples=60, deadline=None)
@given(count=st.integers(0, 3000), repeats=st.integers(0, 40), range_entries=st.sampled_from([1, 7, 64, 1 << 20]),
       seed=st.integers(0, 2**32 - 1))
def test_a_range_at_a_time_writes_the_files_a_whole_sort_writes(tmp_path_factory: pytest.TempPathFactory,
                                                                 count: int, repeats: int, range_entries: int,
                                                                 seed: int) -> None:
    rng = np.random.default_rng(seed)
    hashes = rng.integers(0, 2**64, count, dtype=np.uint64)
    if count > 1:  # hashes that repeat (a collision or a duplicate id) keep their rows in row order
        hashes[rng.integers(0, count, repeats)] = hashes[rng.integers(0, count, repeats)]
    folder = tmp_path_factory.mktemp("index")
    with NpyAppender(folder / "by_row.npy", "uint64") as by_row:
        by_row.extend(hashes[: count // 2])
        by_row.extend(hashes[count // 2:])
    seen: list[np.ndarray] = []
    write_id_index(folder, folder / "by_row.npy", lambda part, rows: seen.append(part), range_entries)
    ordered, order, directory = _whole_sort(hashes)
    assert (folder / "id_hashes.npy").read_bytes() == _saved(ordered)
    assert (folder / "id_rows.npy").read_bytes() == _saved(order)
    assert (folder / "id_buckets.npy").read_bytes() == _saved(directory)
    assert len(seen) == 1 << range_bits(count, range_entries)
    assert np.array_equal(np.concatenate(seen) if seen else ordered, ordered)


def test_the_appender_writes_what_np_save_writes_and_counts_what_it_holds(tmp_path: Path) -> None:
    with NpyAppender(tmp_path / "a.npy", "int64") as out:
        out.extend(np.array([-3]))
        out.extend(np.arange(5, dtype=np.int32))  # converted to the file's type
        out.extend(np.arange(70_000))
        assert out.count == 70_006
    expected = np.concatenate([[-3], np.arange(5), np.arange(70_000)]).astype(np.int64)
    assert (tmp_path / "a.npy").read_bytes() == _saved(expected)
    with NpyAppender(tmp_path / "empty.npy", "uint64"):
        pass
    assert (tmp_path / "empty.npy").read_bytes() == _saved(np.zeros(0, np.uint64))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.integers(-2**31, 2**31 - 1), st.lists(st.integers(-2**31, 2**31 - 1), max_size=9)),
                max_size=30), st.sampled_from(["int32", "int64"]), st.integers(1, 4))
def test_values_appended_one_at_a_time_and_in_blocks_keep_their_order(
        tmp_path_factory: pytest.TempPathFactory, writes: list[int | list[int]], dtype: str, buffer: int) -> None:
    # a small buffer: one-value appends are written out between and across the blocks
    path = tmp_path_factory.mktemp("npy") / "a.npy"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("aethersearch.corpus.npy_stream.APPEND_BUFFER", buffer)
        with NpyAppender(path, dtype) as out:
            for write in writes:
                out.append(write) if isinstance(write, int) else out.extend(np.array(write, dtype=np.int64))
            expected = [v for w in writes for v in ([w] if isinstance(w, int) else w)]
            assert out.count == len(expected)
    assert path.read_bytes() == _saved(np.array(expected, dtype=dtype))


def test_an_appender_of_another_type_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="int32, int64 or uint64, not float64"):
        NpyAppender(tmp_path / "f.npy", "float64")


def test_a_store_sorted_in_ranges_finds_every_id_and_names_a_duplicate_in_a_later_range(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(id_index, "RANGE_ENTRIES", 16)
    docs = [Document(id=f"page {i}", title=f"T{i}", text="x") for i in range(500)]
    whole = build_store(docs, tmp_path / "whole")
    assert [whole.row_of(f"page {i}") for i in range(500)] == list(range(500))
    assert whole.row_of("page 500") is None
    with pytest.raises(DataError, match=r"duplicate document id 'page 321' \(documents 322 and 501\)"):
        build_store([*docs, docs[321]], tmp_path / "dup", source="pages.jsonl")
    assert not (tmp_path / "dup").exists() and not list(tmp_path.glob(".dup.*"))
    assert open_store(whole.directory).row_of("page 499") == 499
