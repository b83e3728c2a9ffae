"""SQLite's side of the engine (db.py builds it): each connection's settings, and the writers of a
process (and of the embedded mode's second process) queued on one lock instead of SQLite's busy sleeps.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

SQLITE_CACHE_KB = 256


def sqlite_pragmas(dbapi_connection, _record) -> None:
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    # Each pooled connection keeps its own page cache, 2 MB by default: an embedded run pools a connection
    # per thread (50), and as a big sweep's file grows those caches filled to ~100 MB of the process.
    # The operating system caches the file anyway; 256 KB each made a 10,000-cell run no slower
    # (benchmarks/results/HISTORY.md, session 11).
    cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KB}")
    cur.close()


_WRITE_VERBS = ("INSERT", "UPDATE", "DELETE", "REPLACE")


def serialise_sqlite_writers(engine: Engine, writer_file: str | None) -> None:
    """One writing transaction at a time per process, queued on a Python lock.

    SQLite allows one writer per file; a thread that finds the file locked waits in SQLite's busy
    handler, which sleeps in steps of up to 100 ms whatever happens meanwhile. With 50 embedded threads
    those sleeps, not work, were most of a sweep's time. A thread now takes this lock at its
    transaction's first write (pysqlite opens the write transaction there too) and gives it back as soon
    as the DBAPI commit or rollback has returned (SQLite's own write lock ends there), or, failing that,
    when the connection returns to the pool. Given back at check-in only, the lock also covered what a
    thread did after its commit (the hot path's completion read, the pool's reset) while every other
    writer of both embedded processes queued: without that, a run's total hold fell by 15-20 %
    (benchmarks/results/HISTORY.md, session 16). Reads are never held up (WAL).
    With a shared `writer_file` (db.py:share_sqlite_writer) the lock's holder also takes that file's flock,
    so the writers of two processes queue too; other processes on the same file still meet SQLite's own
    lock and busy timeout.
    """
    writer = threading.Lock()  # not an RLock: the pool may check a connection in from another thread
    shared = os.open(writer_file, os.O_RDWR | os.O_CREAT, 0o600) if writer_file else None
    if shared is not None:
        import fcntl  # POSIX only, as is the fork that shares the file

    holders: set[int] = set()  # id() of each DBAPI connection whose transaction holds the lock

    @event.listens_for(engine, "before_cursor_execute")
    def _take(_conn, cursor, statement, _params, _context, _many):
        raw = id(cursor.connection)
        if raw in holders or not statement.lstrip()[:7].upper().startswith(_WRITE_VERBS):
            return
        if not writer.acquire(timeout=30):
            raise sqlite3.OperationalError("database is locked (waited 30 s for this process's writer lock)")
        if shared is not None:
            try:
                fcntl.flock(shared, fcntl.LOCK_EX)  # blocks without the GIL; a dead holder's lock is freed
            except BaseException:
                writer.release()
                raise
        holders.add(raw)

    def _give_back(dbapi_connection: Any) -> None:
        raw = id(dbapi_connection)
        if raw in holders:
            holders.discard(raw)
            if shared is not None:
                fcntl.flock(shared, fcntl.LOCK_UN)
            writer.release()

    def _then_give_back(end: Callable[[Any], None]) -> Callable[[Any], None]:
        # SQLAlchemy has no event after a commit, so the dialect's own step is wrapped; it is handed the
        # pool's proxy of the DBAPI connection. A commit that raises keeps the lock: the rollback that
        # follows gives it back.
        def ended(proxy: Any) -> None:
            end(proxy)
            _give_back(getattr(proxy, "dbapi_connection", proxy))

        return ended

    for step in ("do_commit", "do_rollback"):  # on this engine's own dialect instance
        setattr(engine.dialect, step, _then_give_back(getattr(engine.dialect, step)))
    # The fallbacks: a connection returned to the pool, or dropped, while it still holds the lock.
    event.listen(engine.pool, "checkin", lambda dbapi_connection, _record: _give_back(dbapi_connection))
    event.listen(engine.pool, "invalidate", lambda dbapi_connection, _record, _exc: _give_back(dbapi_connection))
