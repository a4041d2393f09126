"""An append-only run of int32 values kept in fixed-size blocks of their own memory, joined into one numpy
array once, at the end.

Why: the dump importer appends every kept link's row (80 MB at a million articles, 600 MB for a full
English dump) and one length per page. One ``array`` grown to that size is reallocated, and so moved, at
every step of its growth; below glibc's mmap threshold (which rises to 32 MB as large blocks are freed)
each old copy is left behind as a hole in the heap: at 1M articles, 87 MiB free in the heap at the end of
pass 2, a quarter of the import's peak. Blocks allocated on the heap stop the holes but cannot be given
back when joined, so the join would hold the run twice. Here each block is its own anonymous
memory map: it never moves while filled, and it is returned to the system as soon as it is copied out.
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

import numpy as np

#: values per block (1 MiB)
BLOCK = 1 << 18


def _block(size: int) -> np.ndarray:
    """``size`` int32 slots in a fresh anonymous map (unmapped when the array is let go)."""
    return np.frombuffer(mmap.mmap(-1, size * 4), dtype=np.int32)


class BlockedInt32:
    """int32 values appended in blocks; :meth:`take` hands them over as one array and empties the run."""

    def __init__(self, block: int = BLOCK) -> None:
        self._size = block
        self._full: list[np.ndarray] = []
        self._last = _block(block)
        self._filled = 0

    def __len__(self) -> int:
        return len(self._full) * self._size + self._filled

    def append(self, value: int) -> None:
        """Add one value."""
        if self._filled == self._size:
            self._next()
        self._last[self._filled] = value
        self._filled += 1

    def extend(self, values: Sequence[int] | np.ndarray) -> None:
        """Add values in order."""
        at = 0
        while at < len(values):
            if self._filled == self._size:
                self._next()
            room = min(self._size - self._filled, len(values) - at)
            self._last[self._filled:self._filled + room] = values[at:at + room]
            self._filled += room
            at += room

    def _next(self) -> None:
        self._full.append(self._last)
        self._last, self._filled = _block(self._size), 0

    def take(self) -> np.ndarray:
        """Every value, in order, as one int32 array. Each block is unmapped once copied, so the hand-over
        holds the whole array plus one block, not two copies of it."""
        blocks = [*self._full, self._last[:self._filled]]
        out = np.empty(len(self), dtype=np.int32)
        self._full, self._last, self._filled = [], _block(self._size), 0
        at = 0
        for k in range(len(blocks)):
            part = blocks[k]
            out[at:at + len(part)] = part
            at += len(part)
            blocks[k] = part = np.zeros(0, np.int32)  # the last reference: its map is closed here
        return out


__all__ = ["BLOCK", "BlockedInt32"]
