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
before = libc.mallinfo2().hblkhd
block = libc.malloc(2 << 20)
print(libc.mallinfo2().hblkhd - before >= 2 << 20)
libc.free(block)
"""


def _glibc_with_mallinfo2() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None)
    return hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallinfo2")


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc 2.33 or later (mallinfo2)")
def test_a_2_mib_block_is_mapped_after_an_8_mib_one_was_freed_only_with_the_fixed_threshold() -> None:
    def mapped(mode: str) -> bool:
        out = subprocess.run([sys.executable, "-c", _PROBE, mode], check=True, capture_output=True, text=True)
        return out.stdout.strip() == "True"

    assert not mapped("dynamic"), "glibc's dynamic threshold should have put the 2 MiB block on the heap"
    assert mapped("fixed")

