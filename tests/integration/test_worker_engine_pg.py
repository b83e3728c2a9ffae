"""A worker process's PostgreSQL engine checks out connections without a liveness ping (workers/store/db.py:
for_worker_process): a ping is a round trip before every transaction, three or four a cell. That holds
whatever was built before the call: an engine a command built with the ping is replaced, not kept."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def _pings(engine, checkouts: int) -> int:
    """How many liveness pings the engine's pool sends over `checkouts` checkouts (SQLAlchemy's dialect
    pings through `do_ping`, on the raw DBAPI connection)."""
    sent = []
    ping = engine.dialect.do_ping

    def counted(dbapi_connection):
        sent.append(dbapi_connection)
        return ping(dbapi_connection)

    engine.dialect.do_ping = counted
    try:
        for _ in range(checkouts):
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT 42").scalar_one() == 42
    finally:
        engine.dialect.do_ping = ping
    return len(sent)


def test_an_engine_built_before_the_worker_setup_gives_way_to_one_that_does_not_ping(postgres_url, settings_env,
                                                                                      monkeypatch):
    from afpbench.workers.store import db

    monkeypatch.setattr(db, "_pre_ping", True)  # as in any command, before it becomes a worker
    settings_env(AFP_DATABASE_URL=postgres_url, AFP_BROKER_URL="memory://")
    monkeypatch.setattr(db, "_pool_size", 10)
    before = db.get_engine()
    assert _pings(before, 3) >= 2  # a command's engine pings at checkout (the first may be a new connection)

    db.for_worker_process(4)  # 4 threads: the pool keeps its size (10), so resizing rebuilds nothing

    after = db.get_engine()
    assert after is not before
    assert _pings(after, 3) == 0
