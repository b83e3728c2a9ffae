"""No runtime module over 300 lines (the team's standard: one job per module, readable in one sitting).

Runtime modules are every .py under the five top packages except the Alembic revisions. The few that are
over today are named below with why; an entry that fits again must leave the list.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO

LIMIT = 300
PACKAGES = ("api", "workers", "scoring", "fixtures", "reference")
KNOWN_OVER: dict[str, str] = {}  # none today


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _runtime_modules() -> dict[str, int]:
    found = {}
    for top in PACKAGES:
        for path in (REPO / top).rglob("*.py"):
            if "migrations" not in path.parts:
                found[path.relative_to(REPO).as_posix()] = _lines(path)
    return found


def test_no_runtime_module_is_over_300_lines():
    over = {p: n for p, n in _runtime_modules().items() if n > LIMIT and p not in KNOWN_OVER}
    assert over == {}, "split these by job (docs/ARCHITECTURE.md names where each job lives)"


def test_every_known_exception_is_still_over():
    sizes = _runtime_modules()
    fits = sorted(p for p in KNOWN_OVER if sizes.get(p, 0) <= LIMIT)
    assert fits == [], "these fit now (or are gone): drop them from KNOWN_OVER"
