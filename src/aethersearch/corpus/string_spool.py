"""Strings written to disk one at a time, then read back by index through a memory map or in order.

Why: the dump importer keeps every redirect's title (about 11M in a full English dump, some 25 bytes each)
to check title lookups exactly and to give the redirects back as page aliases. Held in memory while the
graph is filled, they would be about 23 bytes an article of the import's peak. Spooled, the process holds
nothing per string while writing; reads by index go through a read-only map, whose pages belong to the
page cache and leave the process's memory when the map is closed.

A spool is two files beside ``stem``: ``stem.utf8`` (the strings back to back) and ``stem.ends.npy`` (each
string's end offset, an int64 ``.npy`` written a block at a time by
:class:`~aethersearch.corpus.npy_stream.NpyAppender`).
"""

from __future__ import annotations

import mmap
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from aethersearch.corpus.npy_stream import NpyAppender

#: strings read per block by :meth:`MappedStrings.__iter__`
_READ = 1 << 14


def _paths(stem: Path) -> tuple[Path, Path]:
    return stem.with_name(stem.name + ".utf8"), stem.with_name(stem.name + ".ends.npy")


class StringSpool:
    """Append-only strings on disk; :meth:`close` seals the files, :class:`MappedStrings` reads them."""

    def __init__(self, stem: str | Path) -> None:
        self.stem = Path(stem)
        data, ends = _paths(self.stem)
        self._data = data.open("wb")
        self._ends = NpyAppender(ends, "int64")
        self._size = 0

    def __len__(self) -> int:
        return self._ends.count

    def append(self, value: str) -> None:
        """Add one string."""
        raw = value.encode("utf-8")
        self._data.write(raw)
        self._size += len(raw)
        self._ends.append(self._size)

    def close(self) -> None:
        """Write what is buffered and close both files (the spool is read with :class:`MappedStrings`)."""
        if self._data.closed:
            return
        self._ends.close()
        self._data.close()


class MappedStrings(Sequence[str]):
    """A sealed :class:`StringSpool`, read by index through read-only maps, or in order with plain reads (so
    a pass over every string leaves no mapped pages behind). :meth:`close` unmaps it.

    ``offsets_in_memory=True`` reads the end offsets into an ``array`` (8 bytes a string) instead of mapping
    them: a lookup is then faster again, for a caller that looks up millions of strings in a phase
    where those 8 bytes do not count (the importer's title checks, before the graph grows)."""

    def __init__(self, stem: str | Path, *, offsets_in_memory: bool = False) -> None:
        self._data_path, self._ends_path = _paths(Path(stem))
        # a plain ndarray over the map: np.memmap's own __getitem__ is Python code, about 1 us an index
        self._ends: Sequence[int] | np.ndarray = np.asarray(np.load(self._ends_path, mmap_mode="r"))
        if offsets_in_memory:
            self._ends = array("q", self._ends.tobytes())
        size = self._data_path.stat().st_size
        expected = int(self._ends[-1]) if len(self._ends) else 0
        if size != expected:
            raise ValueError(f"{self._data_path}: {size} bytes, but its ends file says {expected}")
        self._map: mmap.mmap | None = None
        if size:
            with self._data_path.open("rb") as handle:
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, index: int) -> str:  # type: ignore[override]  # slices are not needed
        count = len(self._ends)
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(f"string {index} of {count}")
        ends = self._ends
        start = int(ends[index - 1]) if index else 0
        end = int(ends[index])
        return self._map[start:end].decode("utf-8") if self._map is not None and end > start else ""

    def __iter__(self) -> Iterator[str]:
        with self._ends_path.open("rb") as ends, self._data_path.open("rb") as data:
            version = npy_format.read_magic(ends)
            (npy_format.read_array_header_1_0 if version == (1, 0) else npy_format.read_array_header_2_0)(ends)
            start = 0
            while len(block := np.fromfile(ends, dtype=np.int64, count=_READ)):
                raw = data.read(int(block[-1]) - start)
                cuts = (block - start).tolist()
                at = 0
                for cut in cuts:
                    yield raw[at:cut].decode("utf-8")
                    at = cut
                start = int(block[-1])

    def close(self) -> None:
        """Unmap both files (reading after this is an error)."""
        if self._map is not None:
            self._map.close()
            self._map = None
        self._ends = array("q")


def spooled(values: Sequence[str] | Iterator[str], stem: str | Path) -> MappedStrings:
    """Write ``values`` to a spool at ``stem`` and open it (for tests and small callers)."""
    spool = StringSpool(stem)
    for value in values:
        spool.append(value)
    spool.close()
    return MappedStrings(stem)


__all__ = ["MappedStrings", "StringSpool", "spooled"]
