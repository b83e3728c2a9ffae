"""Engine and sessions: one engine per process and URL, built once (never per task).

SQLite runs in WAL mode with a busy timeout so the embedded worker threads and the coordinator can
write concurrently; PostgreSQL is used through psycopg 3 (postgresql+psycopg://...).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path

from sqlalchemy import Table, event, insert, pool, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, InterfaceError, OperationalError
from sqlmodel import Session, create_engine

from afpbench.workers.errors import DatabaseConfigError, ServiceUnavailable
from afpbench.workers.settings import get_settings
from afpbench.workers.store import (
    batch_models,  # noqa: F401  (the batch lane's tables)
    models,  # noqa: F401  (registers the tables)
)
from afpbench.workers.store.schema_version import at_head
from afpbench.workers.store.sqlite_writers import serialise_sqlite_writers, sqlite_pragmas

_engines: dict[str, Engine] = {}
_lock = threading.Lock()
_pre_ping = True
_pool_size = 10
_writer_file: str | None = None  # see share_sqlite_writer
_pool_timeout_s = 30.0  # SQLAlchemy's default wait for a pooled connection; the HTTP server shortens it


class JsonText:
    """A value already serialised as JSON (pydantic's model_dump_json), for a JSON column: stored as the
    text it is. A 10,000-fixture summary went through ~15 MB of dicts on its way to json.dumps.

    It holds the text, not a copy: as a subclass of str it copied the text when made and again when the
    serialiser took str() of it, and a 10,000-fixture sweep's rows are a 2.8 MB text written while SQLite
    holds two copies of its own (benchmarks/results/HISTORY.md, session 14)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _to_json(value: object) -> str:
    """Every engine's JSON serialiser: a JsonText as it is, anything else as SQLAlchemy's default would."""
    return value.text if isinstance(value, JsonText) else json.dumps(value)


def for_worker_process(threads: int = 10) -> None:
    """In a worker: no liveness ping before every checkout (a round trip per transaction, three or four
    per cell). Tasks already retry any database error with backoff, and the first error after a server
    restart invalidates the whole pool, so one task per process pays for a restart instead of every
    transaction paying for the ping. Commands and the HTTP API keep the ping. The engine is built here,
    so the schema check and its imports happen before the first task, not inside it; a database that
    does not answer, or whose schema is behind, stops the worker before it consumes a message (every
    message it took would only be retried until someone noticed).

    The pool keeps a connection for each of the worker's `threads`: a connection beyond the pool's size
    is closed when it is checked in, so 50 threads on a pool of 10 opened a new PostgreSQL connection
    (a server process) for most transactions."""
    global _pre_ping
    if _pre_ping:
        _pre_ping = False
        dispose_engines()  # an engine built before this call would go on pinging at every checkout
    size_pool(threads)
    check_database()


def size_pool(threads: int) -> None:
    """Keep a pooled connection for each of `threads` worker threads (and a few for the rest of the
    process), in this process's engines from now on; engines built before are dropped and rebuilt."""
    global _pool_size
    if max(10, threads) == _pool_size:
        return
    _pool_size = max(10, threads)
    dispose_engines()


def set_pool_timeout(seconds: float) -> None:
    """How long a checkout may wait for a pooled PostgreSQL connection, in this process's engines from now
    on (engines built before are dropped). The HTTP server sets AFP_HTTP_POOL_TIMEOUT_S, and answers 503
    when the wait runs out (api/http/app.py): a request queued behind a full pool for SQLAlchemy's 30 s
    holds its thread, and threads were what the held connections waited for (docs/RELIABILITY.md, "The API
    under a burst"). Workers keep the default: their tasks do not retry a pool timeout."""
    global _pool_timeout_s
    if seconds != _pool_timeout_s:
        _pool_timeout_s = seconds
        dispose_engines()


def share_sqlite_writer(path: str | None) -> None:
    """Queue this process's SQLite writers also on an flock of the file at `path`, which another process
    writing the same database takes too (the embedded mode's second process, workers/embedded_pair.py);
    None: this process alone. The engines built so far are dropped and rebuilt (call it before a fork,
    so no pooled connection crosses it). The kernel frees a dead holder's flock."""
    global _writer_file
    _writer_file = path
    dispose_engines()


def check_database(url: str | None = None, timeout_s: int = 5, *, schema: bool = True) -> None:
    """Raise ServiceUnavailable unless the database answers within `timeout_s`; with `schema`, also
    build the engine (a SQLite file is created and migrated) and raise SchemaBehind / SchemaAhead unless
    the schema is the one this code needs. schema=False writes nothing, not even a SQLite file: a
    command checks that first and the schema once its input has been read."""
    url = url or get_settings().database_url
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseConfigError(f"AFP_DATABASE_URL is not a database URL: {exc}") from None
    shown = parsed.render_as_string(hide_password=True)
    if parsed.drivername.startswith("sqlite"):
        folder = Path(parsed.database).parent if parsed.database not in (None, "", ":memory:") else None
        if folder is not None and not folder.is_dir():
            raise ServiceUnavailable(f"database {shown}: folder {folder} does not exist; check AFP_DATABASE_URL")
    try:
        if not parsed.drivername.startswith("sqlite"):
            # A short connect timeout first: libpq's default waits for the OS (minutes) on a silent host.
            probe = create_engine(url, poolclass=pool.NullPool, connect_args={"connect_timeout": timeout_s})
            try:
                with probe.connect() as connection:
                    connection.execute(text("SELECT 1"))
            finally:
                probe.dispose()
        if schema:
            get_engine(url)
    except (OperationalError, InterfaceError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
        if parsed.password:
            reason = reason.replace(parsed.password, "***")
        raise ServiceUnavailable(f"database {shown} does not answer ({reason}); check AFP_DATABASE_URL") from None


def get_engine(url: str | None = None) -> Engine:
    url = url or get_settings().database_url
    engine = _engines.get(url)  # built already: no lock (several per cell); building is under the lock
    if engine is not None:
        return engine
    with _lock:
        engine = _engines.get(url)
        if engine is not None:
            return engine
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise DatabaseConfigError(f"AFP_DATABASE_URL is not a database URL: {exc}") from None
        if parsed.drivername.startswith("sqlite"):
            # No cap on pooled SQLite connections (they are file handles): with the default 5 + 10, an
            # embedded run with --threads 50 timed out waiting for a connection (QueuePool TimeoutError,
            # not retried) while other threads waited on the write lock. Writers still queue in SQLite.
            # One kept per worker thread and a few more: an overflow connection is closed at check-in,
            # so 50 threads on a pool of 16 opened a file and ran the pragmas for most transactions.
            engine = create_engine(
                url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=max(16, _pool_size + 4),
                max_overflow=-1, json_serializer=_to_json,
            )
            event.listen(engine, "connect", sqlite_pragmas)
            serialise_sqlite_writers(engine, _writer_file)
        else:
            engine = create_engine(url, pool_pre_ping=_pre_ping, pool_size=_pool_size, max_overflow=60,
                                   pool_timeout=_pool_timeout_s, json_serializer=_to_json)
        # The schema comes from the migrations (store/migrations/), never from create_all: SQLite and a
        # fresh PostgreSQL are brought to head here; a database behind the code raises SchemaBehind.
        # Alembic is imported only then: a database already at head is told by one query.
        try:
            if not at_head(engine):
                from afpbench.workers.store.migrate import ensure_schema

                ensure_schema(engine)
        except BaseException:
            engine.dispose()
            raise
        _engines[url] = engine
        return engine


def dispose_engines() -> None:
    """After a fork (prefork pool) or in tests: drop pooled connections."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


@contextmanager
def transaction(url: str | None = None) -> Iterator[Connection]:
    """A Core connection in one transaction (commit on success, rollback on error), for the per-cell hot
    path: statements on tables, no ORM unit of work, no identity map."""
    with get_engine(url).begin() as connection:
        yield connection


@contextmanager
def autocommit(url: str | None = None) -> Iterator[Connection]:
    """A Core connection for the hot path's single-statement reads (see `for_reads`)."""
    with get_engine(url).connect() as connection:
        yield for_reads(connection)


def for_reads(connection: Connection) -> Connection:
    """`connection` for single-statement reads outside any transaction: on PostgreSQL in autocommit, so a
    read gets no BEGIN and no ROLLBACK (one round trip instead of three). SQLite is left as it is: its
    driver opens a transaction only at a write, so a read is already its own, and switching the isolation
    level there and back cost about 0.1 ms each time (a fifth of the per-cell reads). Reads only: on
    SQLite a write here would be rolled back when the connection closes."""
    if connection.dialect.name == "sqlite":
        return connection
    return autocommitted(connection)


def autocommitted(connection: Connection) -> Connection:
    """`connection` (changed in place) in autocommit: each statement is its own transaction, committed as
    it ends, in one round trip. For single statements that are atomic by themselves."""
    if connection.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        return connection  # already (it cannot be set again inside SQLAlchemy's transaction object)
    return connection.execution_options(isolation_level="AUTOCOMMIT")


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A session that commits on success and rolls back on any error: no half-written rows."""
    session = Session(get_engine(url), expire_on_commit=False)
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def insert_in_chunks(connection, table: Table, rows: Iterable[dict], chunk: int) -> int:
    """Plain executemany of `rows` into `table`, `chunk` rows a statement, through `connection` (an ORM
    session or a Core connection). Rows are taken as they are made, so no list of all of them exists:
    the ORM's unit of work and giant multi-row statements were the 100k-cell bottleneck, and a list of
    every row held ~1 KB a cell until the commit. Into the table, not the ORM entity: the ORM's bulk
    path still inspected every row (1.0 s at 10,000 cells)."""
    rows, written = iter(rows), 0
    while True:
        batch = list(islice(rows, chunk))
        if not batch:
            return written
        connection.execute(insert(table), batch)
        written += len(batch)
        del batch  # before the next is built: two chunks of fixture texts were held at once


BULK_ROWS = 10_000  # a write this large can leave PostgreSQL's planner statistics far from the table


def refresh_statistics(connection, table: Table, written: int) -> None:
    """ANALYZE `table` on PostgreSQL after a bulk write of `written` rows, inside the writing transaction
    (ANALYZE counts the transaction's own new rows, and its statistics commit with them). Autovacuum's
    analyze comes late or never (it is off on some servers, this machine's among them): a planner that
    still believes the cell table holds a few hundred pending rows scans the whole phase index for every
    batch a release forms (1,000,000 cells: 0.5 batches/s before, 4 after; docs/PERFORMANCE.md, "Scale")."""
    dialect = connection.get_bind().dialect if isinstance(connection, Session) else connection.dialect
    if written >= BULK_ROWS and dialect.name == "postgresql":
        connection.execute(text(f"ANALYZE {table.name}"))
