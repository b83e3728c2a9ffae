"""The house's shape (docs/ARCHITECTURE.md): imports flow api -> workers -> scoring -> fixtures/reference,
inside workers/ its sub-packages and top-level modules import only down the order below, the import graph
has no circle, and only the Celery app and the front doors import the task module.

Every import counts, function-local ones included: a local import that hides a circle is still a circle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("api", "workers", "scoring", "fixtures", "reference")
TASKS = "afpbench.workers.tasks"
# Who may send tasks through the task module's objects: the app that registers them, the embedded
# worker, and the front doors. Everything else sends by registered name (afpbench.workers.celery_app).
MAY_IMPORT_TASKS = ("afpbench.workers.celery_app", "afpbench.api.")
LAYER = {"reference": 0, "fixtures": 1, "scoring": 2, "workers": 3, "api": 4}
# The order inside workers/, lowest first (the table "Order inside workers/" in docs/ARCHITECTURE.md): each
# sub-package or top-level module may import its own rank and those below it, never one above.
WORKERS_ORDER: tuple[tuple[str, ...], ...] = (
    ("settings", "errors", "redact", "memory", "spec_values"),
    ("store",),
    ("limits",),
    ("providers",),
    ("celery_app", "message_replay", "memory_broker"),
    ("sweeps",),
    ("sim", "localmodel"),
    ("results",),
    ("planning",),
    ("grading",),
    ("cells",),
    ("runs",),
    ("tasks", "embedded", "embedded_pair"),
)


def _modules() -> dict[str, Path]:
    found = {}
    for top in PACKAGES:
        for path in (REPO / top).rglob("*.py"):
            if "migrations" in path.parts:
                continue  # Alembic scripts are loaded by Alembic, not imported
            rel = path.relative_to(REPO).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            found["afpbench." + ".".join(parts)] = path
    return found


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    out: set[str] = set()
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: _imports(p, m, known) for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _package_parents(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """A package's __init__ is imported with each of its modules; drop those edges (not a dependency)."""
    return {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}


def test_the_import_graph_has_no_circle():
    graph = _package_parents(_graph())
    assert _cycles(graph) == []


def test_only_the_celery_app_and_the_front_doors_import_the_task_module():
    offenders = sorted(m for m, ts in _graph().items() if TASKS in ts and not m.startswith(MAY_IMPORT_TASKS))
    assert offenders == []


def test_imports_flow_one_way_between_the_top_packages():
    wrong = []
    for mod, targets in _graph().items():
        layer = LAYER[mod.split(".")[1]]
        for t in targets:
            if LAYER[t.split(".")[1]] > layer:
                wrong.append(f"{mod} -> {t}")
    assert wrong == []


def _workers_unit(module: str) -> str | None:
    """The sub-package or top-level module of workers/ a module belongs to (None: not in workers/, or
    workers/__init__ itself)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "workers" else None


def upward_imports(graph: dict[str, set[str]], order: tuple[tuple[str, ...], ...]) -> list[str]:
    """Every import from a workers/ unit into a unit of a higher rank; an unranked unit is reported too."""
    rank = {unit: i for i, units in enumerate(order) for unit in units}
    wrong = []
    for mod, targets in sorted(graph.items()):
        here = _workers_unit(mod)
        for t in sorted(targets):
            there = _workers_unit(t)
            if here is None or there is None or here == there:
                continue
            if here not in rank or there not in rank:
                wrong.append(f"{mod} -> {t} (unranked: add it to WORKERS_ORDER)")
            elif rank[there] > rank[here]:
                wrong.append(f"{mod} -> {t}")
    return wrong


def test_every_workers_sub_package_and_module_has_a_rank():
    units = {u for u in map(_workers_unit, _modules()) if u is not None}
    ranked = [u for units in WORKERS_ORDER for u in units]
    assert len(ranked) == len(set(ranked)), "a unit is ranked twice"
    assert sorted(units - set(ranked)) == [], "new in workers/: give it a rank in WORKERS_ORDER"
    assert sorted(set(ranked) - units) == [], "ranked but gone from workers/"


def test_workers_sub_packages_import_only_downwards():
    """Function-local imports count (the graph holds every import statement)."""
    assert upward_imports(_graph(), WORKERS_ORDER) == []


def test_the_order_check_refuses_one_upward_import():
    """The checker itself: one import from the store up to the cells is refused, named with both ends;
    imports down the order, within one sub-package and within one rank are let through."""
    graph = {
        "afpbench.workers.cells.claim": {"afpbench.workers.store.db", "afpbench.workers.cells.completion",
                                         "afpbench.scoring.states"},
        "afpbench.workers.store.db": {"afpbench.workers.settings", "afpbench.workers.errors"},
        "afpbench.workers.settings": {"afpbench.workers.redact"},
        "afpbench.workers.tasks": {"afpbench.workers.embedded", "afpbench.workers.cells.claim"},
    }
    assert upward_imports(graph, WORKERS_ORDER) == []
    graph["afpbench.workers.store.models"] = {"afpbench.workers.cells.claim"}
    assert upward_imports(graph, WORKERS_ORDER) == ["afpbench.workers.store.models -> afpbench.workers.cells.claim"]


def test_an_unranked_workers_unit_is_refused():
    graph = {"afpbench.workers.newjob.thing": {"afpbench.workers.store.db"}}
    assert upward_imports(graph, WORKERS_ORDER) == [
        "afpbench.workers.newjob.thing -> afpbench.workers.store.db (unranked: add it to WORKERS_ORDER)"]


_ORDER_ROW = re.compile(r"^\| (\d+) \| ([^|]+) \|", re.MULTILINE)


def test_the_architecture_page_shows_the_same_order():
    """docs/ARCHITECTURE.md's order table lists each rank's units, highest rank first, as WORKERS_ORDER has them."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("### Order inside workers/", 1)[1].split("\n#", 1)[0]
    rows = {int(n): sorted(re.findall(r"`workers/(\w+)", units)) for n, units in _ORDER_ROW.findall(section)}
    assert rows == {i + 1: sorted(units) for i, units in enumerate(WORKERS_ORDER)}


# It imports the unrelated `fixtures` project from PyPI on purpose, to show it lives beside ours.
_PYPI_FIXTURES_TEST = REPO / "tests" / "packaging" / "test_wheel.py"
# An import written in a string: code for `python -c` or a probe a benchmark or test runs in another process.
_IMPORT_IN_TEXT = re.compile(rf"(?:^|[;\n])\s*(?:from|import)\s+((?:{'|'.join(PACKAGES)})(?:\.\w+)*)\b")


def test_no_code_imports_a_bare_top_level_name():
    """Everything lives under afpbench.*: a bare `import workers` works in the clone and breaks in the wheel.
    Code in strings counts too (`python -c "from workers..."`, a benchmark's probe)."""
    bare = []
    roots = [REPO / p for p in (*PACKAGES, "tests", "benchmarks")]
    for root in roots:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                elif isinstance(node, ast.Constant) and isinstance(node.value, str) and path != _PYPI_FIXTURES_TEST:
                    names = _IMPORT_IN_TEXT.findall(node.value)
                bare += [f"{path.relative_to(REPO)}: {n}" for n in names if n.split(".")[0] in PACKAGES]
    assert bare == []
