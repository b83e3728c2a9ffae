"""Keep what a many-threaded process holds, and what its cyclic garbage collector walks, near what it uses.

One lever on glibc's allocator, a no-op on another C library (musl, macOS): `limit_heap_arenas`, before
threads start. By default glibc gives threads that meet in malloc heaps (arenas) of their own, up to eight
per core, and each arena keeps the blocks freed in it: a 10,000-prompt embedded run's peak RSS is 1.21 x
as high without the limit (benchmarks/results/startup_pieces.json; benchmarks/results/HISTORY.md, session
11). Two are enough: the GIL serialises most allocation anyway, and Python's own allocator serves the
small objects.

And one on Python's cyclic collector, `freeze_what_is_loaded`, once a command has imported what it needs.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import os

HEAP_ARENAS = 2
_M_ARENA_MAX = -8  # mallopt's parameter number (glibc's malloc.h)


@functools.cache
def _glibc(function: str):
    """A glibc allocator function, or None on another C library: there is nothing to tune. Looked up
    among the symbols the process already has (the C library is one of them), not by
    ctypes.util.find_library, which runs `ldconfig -p` (29 ms at every command's start)."""
    try:
        return getattr(ctypes.CDLL(None), function)
    except (OSError, AttributeError, TypeError):
        return None


def limit_heap_arenas() -> None:
    """At most HEAP_ARENAS malloc arenas from now on. An operator's own MALLOC_ARENA_MAX (which glibc
    reads at start) is left as it is."""
    mallopt = _glibc("mallopt")
    if mallopt is not None and "MALLOC_ARENA_MAX" not in os.environ:
        mallopt(_M_ARENA_MAX, HEAP_ARENAS)


def freeze_what_is_loaded() -> None:
    """Leave every object alive now (modules, classes, compiled patterns, settings: ~100,000 after a
    run's imports) out of all later cyclic collections: they live as long as the process. Each full
    collection walked them all again (~60 ms), and parsing and gating a sweep's fixtures, which make no
    cyclic garbage, set off several: a fifth of that work's CPU (benchmarks/results/HISTORY.md,
    session 16). Called before the command forks (the fixture gate's helper, the embedded pair), the children
    leave the inherited objects' pages untouched too. No full collection first: the imports leave a few
    dozen unreachable objects, not worth its 60 ms."""
    gc.freeze()
