"""The embedded mode's SQLite writer lock (store/sqlite_writers.py:serialise_sqlite_writers): a process's writing
transactions queue on one lock, taken at a transaction's first write and given back the moment its commit
or rollback has returned, not when its connection goes back to the pool."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Engine, text

from afpbench.workers.store.db import get_engine

INSERT = text("INSERT INTO scratch (x) VALUES (:x)")


@pytest.fixture
def engine(sqlite_url, settings_env) -> Engine:
    settings_env(AFP_DATABASE_URL=sqlite_url)
    engine = get_engine()
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE scratch (x INTEGER)"))
    return engine


def _writer(engine: Engine, value: int, *,
            wait_in_sqlite: bool = True) -> tuple[threading.Thread, list, threading.Event]:
    """A thread writing `value` in a transaction of its own; its error, if any, lands in the list.
    `wait_in_sqlite=False`: SQLite's busy timeout is 0 on its connection, so if the file is locked when its
    INSERT reaches SQLite it fails at once instead of waiting: only the Python lock can hold it back."""
    errors: list[BaseException] = []
    about_to_write = threading.Event()

    def write() -> None:
        try:
            with engine.connect() as conn:
                if not wait_in_sqlite:
                    conn.execute(text("PRAGMA busy_timeout=0"))
                    conn.commit()  # ends the transaction SQLAlchemy began for the PRAGMA
                try:
                    with conn.begin():
                        about_to_write.set()
                        conn.execute(INSERT, {"x": value})
                finally:
                    conn.execute(text("PRAGMA busy_timeout=30000"))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread, errors, about_to_write


def _values(engine: Engine) -> list[int]:
    with engine.connect() as conn:
        return sorted(conn.execute(text("SELECT x FROM scratch")).scalars())


def test_a_committed_writer_lets_the_next_one_in_while_it_still_holds_its_connection(engine):
    with engine.connect() as first:
        with first.begin():
            first.execute(INSERT, {"x": 1})
        # Committed, and the connection still checked out: the hot path reads on it after its record.
        assert first.execute(text("SELECT count(*) FROM scratch")).scalar_one() == 1
        thread, errors, _ = _writer(engine, 2)
        thread.join(10)
        assert not thread.is_alive(), "the second writer waited until the first connection went back to the pool"
    assert errors == []
    assert _values(engine) == [1, 2]


def test_a_rolled_back_writer_gives_the_lock_back_at_once(engine):
    with engine.connect() as first:
        with pytest.raises(ZeroDivisionError), first.begin():
            first.execute(INSERT, {"x": 1})
            _ = 1 / 0
        thread, errors, _ = _writer(engine, 2)
        thread.join(10)
        assert not thread.is_alive(), "the lock stayed with a transaction that was rolled back"
    assert errors == []
    assert _values(engine) == [2]


def test_each_transaction_holds_the_lock_from_its_first_write_to_its_commit(engine):
    """Two transactions one after the other on one connection: the second takes the lock again, and a
    writer of another thread meets the Python lock, not SQLite's lock (with no busy timeout it would fail)."""
    with engine.connect() as first:
        with first.begin():
            first.execute(INSERT, {"x": 1})
        transaction = first.begin()
        first.execute(INSERT, {"x": 2})
        thread, errors, about_to_write = _writer(engine, 3, wait_in_sqlite=False)
        assert about_to_write.wait(10)
        time.sleep(0.2)  # time for its INSERT to reach the lock; not a measurement
        assert thread.is_alive(), "the other writer did not wait for this open transaction"
        first.execute(INSERT, {"x": 4})  # still holding: nothing of the other writer's is in between
        transaction.commit()
        thread.join(10)
        assert not thread.is_alive()
    assert errors == [], f"the other writer reached SQLite's lock: {errors}"
    assert _values(engine) == [1, 2, 3, 4]
