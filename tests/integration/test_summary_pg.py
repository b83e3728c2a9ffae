"""The stored summary on PostgreSQL: pydantic's JSON text (store/db.py:JsonText) lands in the json columns
(the summary, its per-fixture rows apart) as JSON the server can read, and reads back whole or as a part
(RunSummary)."""

from __future__ import annotations

from sqlalchemy import text

from afpbench.workers.results.aggregation import aggregate_sweep, stored_summary
from afpbench.workers.results.summary import RunSummary, SweepSummary
from afpbench.workers.store.db import get_engine, session_scope
from afpbench.workers.store.models import Aggregate
from tests.unit.sweep_builder import CellMaker, make_sweep


def test_the_summary_is_json_to_postgresql_and_reads_back_whole_and_in_part(postgres_url, settings_env):
    settings_env(AFP_DATABASE_URL=postgres_url)
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "pg1"))
        for r, state in enumerate(["MODEL_PASS", "MODEL_FAIL", "MODEL_PASS"], start=1):
            cells.add("C", "P01", state, repeat=r)
        cells.add("B", "P02", "INFRA_ERROR", reason="reset \u2014 caf\u00e9")
        s.add(Aggregate(sweep_id="pg1", claimed_by="test"))
    summary = aggregate_sweep("pg1")
    with get_engine().connect() as connection:
        kind, passed, inside, rows_kind, rows, version = connection.execute(text(
            "SELECT json_typeof(summary), summary->'totals'->>'pass', summary->'by_fixture_condition',"
            " json_typeof(fixture_rows), json_array_length(fixture_rows), fixture_rows->0->>'fixture_version'"
            " FROM aggregate WHERE sweep_id = 'pg1'")).one()
    assert (kind, passed) == ("object", "2")
    # The per-fixture rows in their own column (migration 0005), JSON the server reads too.
    assert inside is None and rows_kind == "array" and rows == len(summary.by_fixture_condition) == 2
    assert version == summary.by_fixture_condition[0].fixture_version
    assert stored_summary("pg1") == summary and isinstance(summary, SweepSummary)
    assert stored_summary("pg1", RunSummary) == RunSummary.model_validate(summary.model_dump())
