"""glibc's mmap threshold, fixed: a block of 1 MiB or more is a map of its own even after larger ones were freed."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

_PROBE = """
import ctypes, sys
from aethersearch.corpus.malloc_threshold import fix_mmap_threshold

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
libc.free(libc.malloc(8 << 20))  # a mapped block freed: glibc's own rule raises the threshold to 8 MiB
def mapped(size):
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    grew = libc.mallinfo2().hblkhd - before >= size
    libc.free(block)
    return grew
print(mapped(2 << 20), mapped(512 << 10))
"""


def _glibc_with_mallinfo2() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None)
    return hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallinfo2")


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc 2.33 or later (mallinfo2)")
def test_a_2_mib_block_is_mapped_after_an_8_mib_one_was_freed_only_with_the_1_mib_threshold() -> None:
    def mapped(mode: str) -> str:
        """Whether a 2 MiB and a 512 KiB block got maps of their own."""
        out = subprocess.run([sys.executable, "-c", _PROBE, mode], check=True, capture_output=True, text=True)
        return out.stdout.strip()

    assert mapped("dynamic") == "False False", "glibc's dynamic threshold should have put both on the heap"
    assert mapped("fixed") == "True False", "the fixed threshold is 1 MiB: the 2 MiB block mapped, not the 512 KiB"

