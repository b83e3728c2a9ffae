"""What every SQLite connection of the engine is set to (store/sqlite_writers.py:sqlite_pragmas), and JSON that is
already text going into a JSON column as it is (store/db.py:JsonText)."""

from __future__ import annotations

import json

from sqlalchemy import text

from afpbench.workers.store.db import JsonText, get_engine, session_scope
from afpbench.workers.store.models import Aggregate
from afpbench.workers.store.sqlite_writers import SQLITE_CACHE_KB
from tests.unit.sweep_builder import make_sweep


def test_each_pooled_connection_has_wal_a_busy_timeout_foreign_keys_and_a_small_page_cache(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    engine = get_engine()
    with engine.connect() as first, engine.connect() as second:  # two connections of the pool
        for connection in (first, second):
            settings = [connection.execute(text(f"PRAGMA {name}")).scalar_one()
                        for name in ("journal_mode", "busy_timeout", "foreign_keys", "cache_size")]
            assert settings == ["wal", 30000, 1, -SQLITE_CACHE_KB]


def test_json_text_is_stored_as_the_json_it_is_and_other_values_as_before(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    with session_scope() as s:
        make_sweep(s, "j1")
        make_sweep(s, "j2")
        s.add(Aggregate(sweep_id="j1", claimed_by="t", summary=JsonText('{"a": [1, 2], "b": "caf\u00e9"}')))
        s.add(Aggregate(sweep_id="j2", claimed_by="t", summary={"a": [1, 2]}))
    with get_engine().connect() as connection:
        raw = dict(connection.execute(text("SELECT sweep_id, summary FROM aggregate")).all())
    assert raw["j1"] == '{"a": [1, 2], "b": "caf\u00e9"}', "not encoded a second time"
    assert json.loads(raw["j2"]) == {"a": [1, 2]}
    with session_scope() as s:
        assert s.get(Aggregate, "j1").summary == {"a": [1, 2], "b": "caf\u00e9"}


def test_json_text_reaches_the_driver_as_the_very_text_it_was_given_not_a_copy():
    # A 10,000-fixture sweep's rows are one 2.8 MB text, written at a big run's peak (benchmarks/results/
    # HISTORY.md, session 14): a copy made on the way to the driver held that much more at that moment.
    from afpbench.workers.store.db import _to_json

    rows = "[" + ",".join(f'{{"fixture_id": "B{i:05d}"}}' for i in range(1000)) + "]"
    assert _to_json(JsonText(rows)) is rows
    assert _to_json({"a": [1, 2]}) == '{"a": [1, 2]}'
