"""The keys of the prepared cache (workers/sweeps/prepared_cache.py): everything a parsed fixture or a gate
report depends on, so an edited checkout or an upgraded library never meets an old entry."""

from __future__ import annotations

import hashlib
import importlib
import sys
from functools import lru_cache
from pathlib import Path

import pydantic
import yaml

from afpbench.fixtures.loader import FixtureFile

# The modules whose code decides what a parse or a gate gives (packages: every .py file in them).
_CODE = ("afpbench.fixtures", "afpbench.scoring", "afpbench.reference", "afpbench.workers.sweeps.gate_run",
         "afpbench.workers.sweeps.fixture_map")

def code_files() -> list[tuple[str, Path]]:
    """(label, path) of every source file whose code decides what a parse or a gate gives."""
    found = []
    for name in _CODE:
        where = Path(str(importlib.import_module(name).__file__))
        if where.name == "__init__.py":  # a package: its modules and its data (protocol.yaml)
            files = sorted([*where.parent.glob("*.py"), *where.parent.glob("*.yaml")])
            found += [(f"{name}/{p.name}", p) for p in files]
        else:
            found.append((name, where))
    return found


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    digest = hashlib.sha256()
    for label, path in code_files():
        digest.update(f"{label}\0".encode())
        digest.update(path.read_bytes())
    libyaml = hasattr(yaml, "CSafeLoader")
    digest.update(f"yaml {yaml.__version__} {libyaml}; pydantic {pydantic.VERSION}; {sys.version_info[:2]}".encode())
    return digest.hexdigest()


def parse_key(file: FixtureFile) -> str:
    """The key of a file's parsed fixture: its exact text (the name only labels messages) and the code."""
    return hashlib.sha256(f"{code_fingerprint()}\0".encode() + file.text.encode("utf-8", "surrogatepass")).hexdigest()


def report_key(parsed: str, gate: str) -> str:
    return hashlib.sha256(f"{parsed}\0{gate}".encode()).hexdigest()
