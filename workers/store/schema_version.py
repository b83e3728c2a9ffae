"""Is the database already at the schema this code needs? Answered without Alembic.

Importing Alembic (and Mako, Pygments, configparser through it) costs ~0.1-0.2 s, most runs' databases
are already at head, and a run needs Alembic only when the schema must change. So the engine factory
asks here first, with one plain query of Alembic's version table, and imports workers/store/migrate.py
only for anything else: a new SQLite file, a database behind or ahead, an odd version table.

The head is read from the migration scripts themselves (each names its `revision` and `down_revision`),
not written down a second time; tests/unit/workers/store/test_schema_version.py checks it against Alembic's own head.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from afpbench.workers.errors import SchemaMismatch

# Alembic wants a directory on disk: the package data of an installed (or editable) afpbench.
MIGRATIONS_DIR = Path(str(resources.files("afpbench.workers.store").joinpath("migrations")))
VERSION_TABLE = "alembic_version"


# A script's top-level `revision = '0002'` / `down_revision: str | None = '0001'` lines (Alembic writes each on
# one line; a merge's down_revision is a one-line tuple). A regex, not ast.parse: ~0.4 ms, not ~4 ms.
_REVISION_LINE = re.compile(r"^(revision|down_revision)\b[^=\n]*=\s*([^#\n]+?)\s*(?:#.*)?$", re.MULTILINE)


def _revision_ids(script: Path) -> tuple[str, tuple[str, ...]]:
    """(revision, the revisions it follows) as the script's top-level assignments state them."""
    lines = _REVISION_LINE.findall(script.read_text(encoding="utf-8"))
    found = {name: ast.literal_eval(value) for name, value in lines}
    revision, down = found.get("revision"), found.get("down_revision")
    if not isinstance(revision, str):
        raise SchemaMismatch(f"migration script {script} names no revision")
    follows = () if down is None else (down,) if isinstance(down, str) else tuple(down)
    return revision, follows


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The one revision no other migration script follows (the head Alembic would find)."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for script in (MIGRATIONS_DIR / "versions").glob("*.py"):
        revision, follows = _revision_ids(script)
        revisions.add(revision)
        followed.update(follows)
    heads = sorted(revisions - followed)
    if len(heads) != 1:
        raise SchemaMismatch(f"migration scripts in {MIGRATIONS_DIR} have {len(heads)} heads ({', '.join(heads)})")
    return heads[0]


def at_head(engine: Engine) -> bool:
    """Whether the database is stamped at exactly the head revision; False for anything else (no version
    table, another revision, several rows), which workers/store/migrate.py then handles and names."""
    with engine.connect() as connection:
        if not inspect(connection).has_table(VERSION_TABLE):
            return False
        stamped = connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    return stamped == [head_revision()]
