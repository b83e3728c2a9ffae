"""docs/ARCHITECTURE.md "Protocol rule → code": a reader finds the code for a rule in one hop.

Rules checked: every row names at least one function (or class, or constant) as `path.py:name`; every
`path:name` in the table exists (a top-level def, class or assignment of that file, or `Class.method`);
every file or folder the table names exists; and the rules the issue singled out (the swapped
re-judge, seal verification, the publication gate) point at functions.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import REPO

# A backticked repository path, optionally `:name` (dotted for a method), optionally followed by
# a call's arguments as written in prose, e.g. `workers/sweeps/inputs.py:load_inputs(with_validity=True)`.
REFERENCE = re.compile(
    r"`(?P<path>[\w./*-]+\.(?:py|md|yaml)|[\w-]+(?:/[\w.-]+)+/)(?::(?P<name>[A-Za-z_][\w.]*))?(?:\([^`]*\))?`"
)


def rule_rows() -> list[tuple[str, str]]:
    """(rule, where) for every row of the table."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Protocol rule → code", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and len(cells) == 2 and cells[0] not in ("rule", "---|---") and set(cells[0]) != {"-"}:
            rows.append((cells[0], cells[1]))
    return rows


@cache
def _names(path: Path) -> frozenset[str]:
    """Top-level defs, classes and assigned names of a module, and `Class.member` for class bodies."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def assigned(node: ast.stmt) -> list[str]:
        if isinstance(node, ast.Assign):
            return [t.id for t in node.targets if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [node.target.id]
        return []

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        found.add(f"{node.name}.{member.name}")
                    found.update(f"{node.name}.{n}" for n in assigned(member))
        found.update(assigned(node))
    return frozenset(found)


ROWS = rule_rows()


def test_the_table_is_found():
    assert len(ROWS) > 30, "the table 'Protocol rule → code' was not parsed"


@pytest.mark.parametrize(("rule", "where"), ROWS, ids=[r[:40] for r, _ in ROWS])
def test_every_row_points_at_code_that_exists(rule, where):
    refs = [(m["path"], m["name"]) for m in REFERENCE.finditer(where)]
    assert any(name for _, name in refs), f"{rule!r}: name a function as `path.py:name`"
    for path, name in refs:
        files = sorted(REPO.glob(path)) if "*" in path else [REPO / path]
        assert files and all(f.exists() for f in files), f"{rule!r}: {path} does not exist"
        if name:
            assert path.endswith(".py"), f"{rule!r}: `{path}:{name}` names a function of a non-Python file"
            assert name in _names(REPO / path), f"{rule!r}: {path} has no {name}"


@pytest.mark.parametrize(("rule_start", "function"), [
    ("Disputes → swapped re-judge", "workers/grading/judging.py:judged_verdict"),
    ("Seal (pre-registration) and verify", "workers/sweeps/coordinator.py:verify_sweep"),
    ("Publication gate", "workers/results/export.py:missing_items"),
])
def test_the_rules_singled_out_point_at_their_functions(rule_start, function):
    (where,) = [w for r, w in ROWS if r.startswith(rule_start)]
    assert f"`{function}" in where
