"""Schema migrations (Alembic), configured from code so that `pip install .` ships them.

The migration scripts live in workers/migrations/ (package data). Every database, SQLite or PostgreSQL,
gets its tables from the same revisions, so a schema change is one new file in
workers/migrations/versions/ and `afpbench db upgrade` on each deployment.

- `upgrade(url)` brings a database to the newest revision (head), one process at a time.
- `current_revision(url)` / `head_revision()`: where the database is, and where this code is.
- `check_schema_current(engine)` refuses a database that is behind (or ahead of) the code.
- `ensure_schema(engine)` is what the engine factory runs once per engine whose schema is not already at
  head (workers/store/schema_version.py answers that without importing this module).
- `schema_differences(engine)`: what a migration would still have to change (empty = no drift).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, pool, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel

from afpbench.workers.errors import SchemaAhead, SchemaBehind, SchemaMismatch
from afpbench.workers.settings import get_settings
from afpbench.workers.store import (
    batch_models,  # noqa: F401  (the batch lane's tables)
    models,  # noqa: F401  (registers the tables on SQLModel.metadata)
)
from afpbench.workers.store.schema_version import MIGRATIONS_DIR, VERSION_TABLE

# The revision that creates the tables below; a database holding exactly these tables without a version
# table was made by create_all before migrations existed, and is adopted by stamping it at this revision.
INITIAL_REVISION = "0001"
INITIAL_TABLES = frozenset({"sweep", "cell", "attempt", "judgement", "result", "adjudication", "aggregate"})
# PostgreSQL advisory lock key (a signed 64-bit number derived from a fixed name).
_LOCK_KEY = int.from_bytes(hashlib.sha256(b"afpbench.migrate").digest()[:8], "big", signed=True)


def alembic_config(url: str | None = None) -> Config:
    """An Alembic Config pointing at the packaged scripts; no alembic.ini is read."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("version_table", VERSION_TABLE)
    if url is not None:
        # Passed as an attribute, not an ini option: ini interpolation would mangle '%' in passwords.
        cfg.attributes["url"] = url
    return cfg


@lru_cache(maxsize=1)
def _script() -> ScriptDirectory:
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The revision this code needs (the single head of workers/migrations/versions)."""
    head = _script().get_current_head()
    if head is None:  # pragma: no cover - the package always ships 0001
        raise SchemaMismatch(f"no migration scripts found in {MIGRATIONS_DIR}")
    return head


def known_revisions() -> set[str]:
    return {rev.revision for rev in _script().walk_revisions()}


def _engine_for(url: str | Engine | None) -> tuple[Engine, bool]:
    """(engine, whether we made it and must dispose it)."""
    if isinstance(url, Engine):
        return url, False
    if url is None:
        url = get_settings().database_url
    return create_engine(url, poolclass=pool.NullPool), True


def _revision_of(connection: Connection) -> str | None:
    context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
    return context.get_current_revision()


def current_revision(url: str | Engine | None = None) -> str | None:
    """The revision the database is stamped at; None for a database never migrated."""
    engine, owned = _engine_for(url)
    try:
        with engine.connect() as connection:
            return _revision_of(connection)
    finally:
        if owned:
            engine.dispose()


def _lock(connection: Connection) -> None:
    """Serialize migrations: the first process migrates, the others wait and then find head."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    elif connection.dialect.name == "sqlite":
        # A write lock held for the whole upgrade, which also makes the DDL one atomic transaction
        # (pysqlite would otherwise run each DDL statement on its own).
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _afp_tables(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names()) & INITIAL_TABLES


def _adopt_unversioned(connection: Connection) -> None:
    """Stamp a pre-migration database (all initial tables, no version) so upgrade continues from there."""
    if _revision_of(connection) is not None:
        return
    present = _afp_tables(connection)
    if not present:
        return
    if present != INITIAL_TABLES:
        raise SchemaMismatch(
            f"database has afpbench tables ({', '.join(sorted(present))}) but neither all of them nor a "
            f"migration history ({VERSION_TABLE}); restore it from a backup or start a new database"
        )
    cfg = alembic_config()
    cfg.attributes["connection"] = connection
    command.stamp(cfg, INITIAL_REVISION)


def upgrade(url: str | Engine | None = None, revision: str = "head") -> str:
    """Migrate the database (default: AFP_DATABASE_URL) to `revision`; returns the revision reached."""
    engine, owned = _engine_for(url)
    try:
        with engine.connect() as connection, _sqlite_references_checked_at_the_end(connection):
            with connection.begin():
                _lock(connection)
                _adopt_unversioned(connection)
                cfg = alembic_config()
                cfg.attributes["connection"] = connection
                command.upgrade(cfg, revision)
                reached = _revision_of(connection)
                _check_references(connection)
        return reached or "base"
    finally:
        if owned:
            engine.dispose()


@contextmanager
def _sqlite_references_checked_at_the_end(connection: Connection) -> Iterator[None]:
    """SQLite alters a table by copying it (Alembic's batch mode: create, copy, DROP, rename); with foreign
    keys on (the engine's setting, workers/store/sqlite_writers.py) the DROP of a table other rows point at
    is refused. As SQLite's own procedure for altering tables says: references off for the migration (the
    pragma must be set outside a transaction), checked once before it commits, the setting put back."""
    if connection.dialect.name != "sqlite":
        yield
        return
    was_on = connection.exec_driver_sql("PRAGMA foreign_keys").scalar()
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
    connection.commit()  # ends SQLAlchemy's autobegun transaction (pysqlite sent no BEGIN for a pragma)
    try:
        yield
    finally:
        connection.exec_driver_sql(f"PRAGMA foreign_keys={'ON' if was_on else 'OFF'}")
        connection.commit()


def _check_references(connection: Connection) -> None:
    if connection.dialect.name != "sqlite":
        return  # PostgreSQL checks every reference as the migration runs
    bad = connection.exec_driver_sql("PRAGMA foreign_key_check").first()
    if bad is not None:  # rolled back by the caller's transaction
        raise SchemaMismatch(f"a migration left a row of {bad[0]} pointing at a missing {bad[2]} row; "
                             "the database is left as it was")


def check_schema_current(engine: Engine) -> None:
    """Raise SchemaBehind / SchemaAhead unless the database is at exactly the revision this code needs."""
    current = current_revision(engine)
    head = head_revision()
    if current == head:
        return
    if current is None or current in known_revisions():
        shown = current or "base (never migrated)"
        raise SchemaBehind(f"database schema is at {shown}, code needs {head}: run `afpbench db upgrade`")
    raise SchemaAhead(
        f"database schema is at {current}, which this afpbench does not know (it needs {head}): "
        "the database was upgraded by a newer afpbench; install that version here"
    )


def ensure_schema(engine: Engine) -> None:
    """Run once per engine by workers/db.py.

    SQLite (embedded, one machine, zero configuration) is upgraded in place. A database with no afpbench
    tables and no history (a fresh PostgreSQL) is created through the migrations. Anything else must
    already be at head: a shared PostgreSQL is upgraded deliberately, by `afpbench db upgrade`, before
    new code runs against it.
    """
    current = current_revision(engine)
    if current == head_revision():
        return
    if engine.dialect.name == "sqlite" or (current is None and not _has_afp_tables(engine)):
        upgrade(engine)
    check_schema_current(engine)


def _has_afp_tables(engine: Engine) -> bool:
    """Whether the database holds any afpbench table (False: a fresh database)."""
    with engine.connect() as connection:
        return bool(_afp_tables(connection))


def schema_differences(engine: Engine) -> list:
    """Alembic's comparison of the live schema with workers/models.py; [] means the migrations and the
    models describe the same tables, columns, types, keys and indexes."""

    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "version_table": VERSION_TABLE}
        )
        return compare_metadata(context, SQLModel.metadata)
