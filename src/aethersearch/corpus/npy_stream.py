"""One-dimensional ``.npy`` files written a block at a time, so a writer holds no more than its last block.

Why: a store of 21M passages (or an import of 6.8M articles) keeps two offsets a row; held in
``array``\\ s until the end they are 16 bytes a row of resident memory at the moment the build is
largest. A 1-D ``.npy`` header has the same length for any element count (numpy pads it so the
count can grow), so the header is written first for an empty array and written again, in place,
with the count at :meth:`NpyAppender.close`; the file is then what ``np.save`` would have written.
"""

from __future__ import annotations

import os
from array import array
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

import numpy as np
from numpy.lib import format as npy_format

#: values :meth:`NpyAppender.append` buffers before writing them as one block
APPEND_BUFFER = 1 << 16
#: what an appender writes, and the ``array`` type code its one-value appends are buffered in
_TYPECODES = {np.dtype(np.int32): "i", np.dtype(np.int64): "q", np.dtype(np.uint64): "Q"}

def _header(handle: BinaryIO, dtype: np.dtype, count: int) -> None:
    npy_format.write_array_header_1_0(handle, {"descr": npy_format.dtype_to_descr(dtype),
                                                "fortran_order": False, "shape": (count,)})


class NpyAppender:
    """A 1-D ``.npy`` file of ``dtype`` (``int32``, ``int64`` or ``uint64``), appended to a block or a value at
    a time (values are buffered :data:`APPEND_BUFFER` at a time) and closed once (on an error inside
    ``with`` it is closed unfinished: the caller deletes the folder it writes in)."""

    def __init__(self, path: str | Path, dtype: str) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        if self.dtype not in _TYPECODES:
            raise ValueError(f"NpyAppender writes int32, int64 or uint64, not {self.dtype}")
        self._pending = array(_TYPECODES[self.dtype])
        self._written = 0
        self._handle = self.path.open("wb")
        _header(self._handle, self.dtype, 0)
        self._header_size = self._handle.tell()

    @property
    def count(self) -> int:
        """Values appended so far."""
        return self._written + len(self._pending)

    def append(self, value: int) -> None:
        """Append one value (buffered: a value at a time, the file is still written a block at a time)."""
        self._pending.append(value)
        if len(self._pending) >= APPEND_BUFFER:
            self._write_pending()

    def extend(self, values: np.ndarray) -> None:
        """Append a block of values."""
        self._write_pending()
        block = np.ascontiguousarray(values, dtype=self.dtype)
        self._handle.write(block.data)
        self._written += len(block)

    def _write_pending(self) -> None:
        if self._pending:
            self._handle.write(memoryview(self._pending).cast("B"))
            self._written += len(self._pending)
            self._pending = array(self._pending.typecode)

    def close(self) -> None:
        """Write the header with the final count and sync the file."""
        if self._handle.closed:
            return
        self._write_pending()
        self._handle.seek(0)
        _header(self._handle, self.dtype, self._written)
        if self._handle.tell() != self._header_size:  # numpy pads a 1-D header to one length for any count
            raise RuntimeError(f"{self.path}: the .npy header changed length with the count")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()

    def __enter__(self) -> NpyAppender:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if error is None:
            self.close()
        else:
            self._handle.close()


__all__ = ["NpyAppender"]
