"""The C heap, where glibc is the allocator: fewer per-thread arenas, and free pages given back after a burst.

Python's large objects (note texts, pickles) and all of SQLite's memory come from malloc. glibc gives each
thread that allocates an arena of its own (up to 8 per core), and keeps freed memory inside its arenas
(only the top of the main heap is trimmed by itself). After a burst of work, a batch of notes read or a
start-up catch-up, several MiB sit free in the heap and still count in the process's memory (issue 15).
Elsewhere (macOS, Windows, musl) both calls do nothing: those allocators return memory by themselves.
"""

from __future__ import annotations

import ctypes
import functools
import sys

M_ARENA_MAX = -8  # mallopt parameter number, from glibc's malloc.h


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")  # glibc's name; musl's differs, and has no malloc_trim
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def release_free_heap() -> None:
    """Give the heap's free pages back to the operating system (glibc's malloc_trim; ~2 ms, more after a
    big burst). Call it after a burst, not on every small unit of work."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def limit_arenas(arenas: int = 2) -> None:
    """Let at most `arenas` malloc arenas serve all threads; call it before threads start. Each arena keeps
    its own free memory: the server's ten threads held ~3 MiB more with the default (8 per core)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, arenas)
