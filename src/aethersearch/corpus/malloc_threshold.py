"""Fix glibc's mmap threshold, so that a build's large temporaries are given back to the system when freed.

Why: glibc serves an allocation of at least the *mmap threshold* with a memory map of its own, returned
to the system on ``free``; anything smaller comes from the heap, whose freed pages stay in the process.
By default the threshold is dynamic: each mapped block freed raises it to that block's size (up to 32
MiB). The dump importer's link resolution sorts and searches arrays of a few bytes per title (12 MB each
at a million articles); once the first is freed, the next ones land on the heap, and the heap's top
cannot shrink past what was allocated after them. Their pages, free but resident, are then reused by
pass 2 and stay in RSS: 27 MiB at a million articles, a slope of about 30 bytes an article. With a
fixed threshold of 1 MiB they are maps, and the heap stays at 16 MiB.

The setting is process-wide and stays (glibc has no call that turns the dynamic threshold back on); it
only moves blocks of 1 MiB or more from the heap to their own maps. It is applied where there is glibc
(``gnu_get_libc_version`` is present) and is a no-op elsewhere.
"""

from __future__ import annotations

import ctypes
import sys

#: ``M_MMAP_THRESHOLD`` in glibc's ``malloc.h``
_M_MMAP_THRESHOLD = -3
#: blocks of this size or more get their own map
THRESHOLD = 1 << 20

_applied: int | None = None


def fix_mmap_threshold(size: int = THRESHOLD) -> bool:
    """Set glibc's mmap threshold to ``size`` bytes, once per process. True when it is set (now or before),
    False where the C library is not glibc."""
    global _applied
    if _applied is not None:
        return True
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None)  # the C library this process already runs on
    # dynamic by nature: whether this C library is glibc with mallopt is known only by asking it
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return False
    if libc.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(size)) != 1:
        return False
    _applied = size
    return True


__all__ = ["THRESHOLD", "fix_mmap_threshold"]
