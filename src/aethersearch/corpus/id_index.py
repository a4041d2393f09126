"""The store's id index (sorted id hashes, their rows, the bucket directory), sorted a hash range at a time.

A store build writes each document's 64-bit id hash to a file in row order as documents stream in;
this module turns that file into the index files. Range ``k`` of ``2**p`` holds the hashes whose top
``p`` bits are ``k``, so the ranges in order are the sorted whole: each is read out of the by-row
file, sorted stably (rows ascending within one hash, as a stable sort of the whole puts them) and
appended to the output, with the part of the bucket directory that falls in it. ``p`` is chosen so a
range holds at most about :data:`RANGE_ENTRIES` hashes (the hashes are blake2b, so ranges are even).

Why: sorting the whole array at the end held 24 bytes a document (hashes, rows, the sorted copy) at the
moment a build is largest, 0.5 GB for Search-R1's 21M-passage wiki-18 and most of what an import's memory
grew by beside its graph; a range at a time holds about 40 bytes x :data:`RANGE_ENTRIES` for any corpus,
and reads the by-row file once per range (from the page cache; 8 bytes a document a range: for 21M passages,
64 ranges, about 11 GB read, a few seconds of a build that takes many minutes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from aethersearch.corpus.npy_stream import NpyAppender

#: most hashes a range holds on average (a power of two of ranges is used, so a range may hold half as many):
#: a range's sort holds about 40 bytes a hash (20 MiB here), and the by-row file is read once per range
RANGE_ENTRIES = 1 << 19
#: hashes read from the by-row file at a time
_READ = 1 << 18


def bucket_bits(count: int) -> int:
    """Bits of the hash that pick a bucket: 2**b buckets for ``count`` hashes, about two per bucket."""
    return max(0, count.bit_length() - 2)


def range_bits(count: int, range_entries: int = RANGE_ENTRIES) -> int:
    """Bits of the hash that pick a sort range: the fewest that leave at most ``range_entries`` hashes a
    range on average, and never more than the bucket bits (so every bucket lies in one range)."""
    bits = 0
    while count > range_entries << bits:
        bits += 1
    return min(bits, bucket_bits(count))


def _bucket_starts(sorted_part: np.ndarray, bits: int, part: int, part_bits: int) -> np.ndarray:
    """Where each bucket that falls in range ``part`` of ``2**part_bits`` starts in that range's hashes."""
    if bits == 0:
        return np.zeros(1, dtype=np.int64)
    per_part = 1 << (bits - part_bits)
    buckets = np.arange(part * per_part, (part + 1) * per_part, dtype=np.uint64)
    return np.searchsorted(sorted_part, buckets << np.uint64(64 - bits), side="left").astype(np.int64)


def _count(by_row: Path) -> int:
    with by_row.open("rb") as handle:
        npy_format.read_magic(handle)
        shape, _, dtype = npy_format.read_array_header_1_0(handle)
    if dtype != np.dtype(np.uint64) or len(shape) != 1:
        raise ValueError(f"{by_row}: expected a 1-D uint64 array, found {dtype} {shape}")
    return int(shape[0])


def _range(by_row: Path, count: int, part: int, part_bits: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The hashes of range ``part`` and their rows (``None`` when the range is every row), in row order, read
    from the by-row file in blocks (read, not mapped: mapped pages read stay resident and count against the
    build)."""
    hashes: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    with by_row.open("rb") as handle:
        npy_format.read_magic(handle)
        npy_format.read_array_header_1_0(handle)
        for start in range(0, count, _READ):
            block = np.fromfile(handle, dtype=np.uint64, count=min(_READ, count - start))
            if part_bits:
                at = np.flatnonzero((block >> np.uint64(64 - part_bits)) == np.uint64(part))
                hashes.append(block[at])
                rows.append(at + start)
            else:
                hashes.append(block)
    if not hashes:
        return np.zeros(0, np.uint64), None
    return np.concatenate(hashes), np.concatenate(rows) if rows else None


def write_id_index(directory: Path, by_row: Path, check: Callable[[np.ndarray, np.ndarray], None],
                   range_entries: int | None = None) -> None:
    """Write ``id_hashes.npy``, ``id_rows.npy`` and ``id_buckets.npy`` in ``directory`` from ``by_row``
    (a 1-D uint64 ``.npy`` of the hashes in row order); ``check(sorted_hashes, rows)`` sees each sorted
    range first (the store raises there on a duplicate id). ``range_entries``: :data:`RANGE_ENTRIES`
    unless given."""
    count = _count(by_row)
    bits = bucket_bits(count)
    part_bits = range_bits(count, RANGE_ENTRIES if range_entries is None else range_entries)
    with NpyAppender(directory / "id_hashes.npy", "uint64") as hashes_out, \
            NpyAppender(directory / "id_rows.npy", "int64") as rows_out, \
            NpyAppender(directory / "id_buckets.npy", "int64") as buckets_out:
        for part in range(1 << part_bits):
            hashes, in_range = _range(by_row, count, part, part_bits)
            order = np.argsort(hashes, kind="stable")
            hashes = hashes[order]
            rows = order.astype(np.int64, copy=False) if in_range is None else in_range[order]
            del order, in_range
            check(hashes, rows)
            buckets_out.extend(_bucket_starts(hashes, bits, part, part_bits) + hashes_out.count)
            hashes_out.extend(hashes)
            rows_out.extend(rows)
        if hashes_out.count != count:
            raise RuntimeError(f"{by_row}: {hashes_out.count} hashes read back, {count} written")
        buckets_out.extend(np.array([count], dtype=np.int64))


__all__ = ["RANGE_ENTRIES", "bucket_bits", "range_bits", "write_id_index"]
