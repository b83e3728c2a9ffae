"""A run's threads share two malloc arenas, and after the run command's imports no cyclic collection walks
them again (workers/memory.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from afpbench.workers.memory import _glibc

# Twelve threads allocate at once, then glibc's malloc_info says how many heaps (arenas) serve them.
_ARENA_PROBE = """
import ctypes, ctypes.util, os, sys, tempfile, threading
from afpbench.workers.memory import limit_heap_arenas

if sys.argv[1] == "limit":
    limit_heap_arenas()
libc = ctypes.CDLL(ctypes.util.find_library("c"))
barrier = threading.Barrier(12)
held = []

def work():
    barrier.wait()
    held.append([bytearray(64_000) for _ in range(20)])  # above pymalloc's sizes, below mmap's threshold

threads = [threading.Thread(target=work) for _ in range(12)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc.fopen.restype = ctypes.c_void_p
fd, path = tempfile.mkstemp()
os.close(fd)
stream = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
print(open(path).read().count("<heap nr="))
os.unlink(path)
"""


def _heaps(mode: str, **env: str) -> int:
    import os

    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env
    done = subprocess.run([sys.executable, "-c", _ARENA_PROBE, mode], capture_output=True, text=True, timeout=120,
                          check=True, env=environment)
    return int(done.stdout)


@pytest.mark.skipif(_glibc("mallopt") is None or not sys.platform.startswith("linux"), reason="needs glibc (Linux)")
def test_a_run_s_threads_share_two_malloc_arenas_and_an_operator_setting_wins():
    from afpbench.workers.memory import HEAP_ARENAS

    assert _heaps("none") > HEAP_ARENAS, "glibc's default gives the threads heaps of their own"
    assert _heaps("limit") <= HEAP_ARENAS
    assert _heaps("limit", MALLOC_ARENA_MAX="1") == 1, "MALLOC_ARENA_MAX set by the operator is left as it is"


# What a full collection walks after the run command's freeze: gc.get_objects() lists the objects in the
# collector's generations, which is what every full collection visits.
_FREEZE_PROBE = """
import gc
import afpbench.api.cli, afpbench.workers.runs, afpbench.workers.embedded_pair  # the run command's imports
from afpbench.workers.memory import freeze_what_is_loaded

before = len(gc.get_objects())
freeze_what_is_loaded()
after = len(gc.get_objects())
print(before, after, gc.get_freeze_count())
"""


def test_after_the_freeze_no_collection_walks_what_the_command_had_imported():
    done = subprocess.run([sys.executable, "-c", _FREEZE_PROBE], capture_output=True, text=True, timeout=120,
                          check=True)
    before, after, frozen = map(int, done.stdout.split())
    assert before > 20_000, f"the probe imported less than the run command does ({before} objects)"
    assert frozen >= before, "objects alive at the freeze are still in the collector's generations"
    assert after < before / 100, f"a full collection would still walk {after} of {before} objects"
