"""Memory freed after creating a sweep goes back to the operating system (workers/memory.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from afpbench.workers.memory import _malloc_trim

_PROBE = """
import sys
from afpbench.workers.memory import return_freed_memory

def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

texts = [("x" * 7000) + str(i) for i in range(30_000)]  # ~210 MB in 7 KB blocks, as fixture texts are
keep = texts[::50]  # survivors spread through the heap, so free() alone cannot shrink it from the top
del texts
before = rss_mb()
return_freed_memory()
print(before, rss_mb())
"""


@pytest.mark.skipif(_malloc_trim() is None or not sys.platform.startswith("linux"),
                    reason="needs glibc's malloc_trim and /proc (Linux)")
def test_freed_fixture_sized_blocks_are_handed_back_to_the_system():
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=True)
    before, after = map(float, done.stdout.split())
    assert before > 150, f"the freed blocks stayed resident before the trim ({before:.0f} MB)"
    assert after < before - 100, f"the trim gave back too little: {before:.0f} -> {after:.0f} MB"
