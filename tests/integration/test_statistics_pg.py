"""A large sweep's cell rows leave PostgreSQL's planner statistics true (workers/store/db.py:
refresh_statistics, called by workers/sweeps/coordinator.py:create_sweep). Without them the planner kept
believing the new cell table held a few hundred pending rows and scanned the whole phase index for every
batch the release formed: 1,000,000 cells on the batch lane formed 0.5 batches/s instead of 4
(docs/PERFORMANCE.md, "Scale"). Real PostgreSQL; the models are simulated and never called."""

from __future__ import annotations

import pytest
from sqlalchemy import text

pytestmark = pytest.mark.integration

MODELS = 100  # x 8 fixtures x 4 repeats x 4 conditions = 12,800 cells: a bulk write (>= BULK_ROWS)


def test_a_bulk_expansion_analyzes_the_cell_table_in_its_transaction(postgres_url, settings_env):
    settings_env(AFP_DATABASE_URL=postgres_url, AFP_BROKER_URL="memory://")
    from afpbench.workers.runs import start_sweep
    from afpbench.workers.store.db import BULK_ROWS, get_engine
    from afpbench.workers.sweeps.spec_loading import parse_spec

    spec = parse_spec({"name": "statistics (simulated)", "judges": [], "repeats": 4, "high_risk_repeats": 4,
                       "models": [{"provider": "sim", "model": f"sim-{i}", "label": f"sim-{i} (simulated)",
                                   "lane": "batch"} for i in range(MODELS)]})
    sweep_id = start_sweep(spec, check_endpoints=False, judge_check=False)
    with get_engine().connect() as conn:
        cells = conn.execute(text("select count(*) from cell where sweep_id = :s"), {"s": sweep_id}).scalar_one()
        analyzed = conn.execute(text("select analyze_count from pg_stat_user_tables where relname = 'cell'"))
        believed = conn.execute(text("select reltuples from pg_class where relname = 'cell'")).scalar_one()
    assert cells == 12_800 >= BULK_ROWS
    assert analyzed.scalar_one() >= 1, "ANALYZE ran on the cell table"
    assert abs(believed - cells) <= 0.05 * cells, f"the planner believes {believed} rows, the table holds {cells}"
