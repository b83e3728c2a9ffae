"""The prepared cache's keys (workers/sweeps/cache_keys.py): an entry is never read by other code."""

from __future__ import annotations

from afpbench.workers.sweeps import cache_keys


def test_the_fingerprint_covers_the_code_that_parses_and_gates():
    labels = [label for label, _ in cache_keys.code_files()]
    for needed in ("afpbench.fixtures/loader.py", "afpbench.fixtures/schema.py", "afpbench.scoring/validity.py",
                   "afpbench.scoring/numbers.py", "afpbench.scoring/render.py", "afpbench.reference/protocol.yaml",
                   "afpbench.workers.sweeps.gate_run", "afpbench.workers.sweeps.fixture_map"):
        assert needed in labels
