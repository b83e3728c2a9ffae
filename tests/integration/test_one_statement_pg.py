"""On PostgreSQL the hot path's claim and record are one statement each (workers/cells/claim.py:
CLAIM_AND_START and record_in_one), on SQLite a transaction of several. Rule (every attempt is a row,
nothing overwritten; one result per cell): both write exactly the same rows for the same events — a
worker lost mid-try and the claim that takes over, an answer scored with its result row, and a record
that arrives after its lease was taken over (superseded: the attempt kept, the cell left to the new
holder, no result). Real PostgreSQL, a real simulated model over HTTP; answers are SIMULATED."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.reliability.lease_rig import create_one_cell_sweep

pytestmark = pytest.mark.integration
LEASE_S = 60.0


@pytest.fixture(scope="module")
def sim():
    with SimServer(SimConfig(faults=FaultConfig())).start() as server:
        yield server


def _one_cell(base_url: str) -> int:
    _, cell_id = create_one_cell_sweep({
        "name": "one statement (simulated)", "judges": [], "conditions": ["A"], "fixtures": {"only": ["P01"]},
        "models": [{"provider": "sim", "model": "sim-1", "label": "sim-1 (simulated)", "base_url": base_url}]})
    return cell_id


def _lease_runs_out(cell_id: int) -> None:
    from afpbench.workers.store.db import transaction
    from afpbench.workers.store.models import Cell, utcnow

    with transaction() as conn:
        conn.execute(update(Cell.__table__).where(Cell.__table__.c.id == cell_id)
                     .values(lease_until=utcnow() - timedelta(seconds=1)))


def _rows(cell_id: int) -> dict:
    """The cell's rows as the events left them, without ids, times and the sim's random parts."""
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.store.models import Attempt, Cell, Result

    with session_scope() as session:
        cell = session.get(Cell, cell_id)
        attempts = session.exec(select(Attempt).where(Attempt.cell_id == cell_id).order_by(Attempt.number)).all()
        results = session.exec(select(Result).where(Result.cell_id == cell_id)).all()
        return {
            "cell": (cell.phase, cell.state, cell.attempts, cell.lease_owner),
            "attempts": [(a[0].number, a[0].worker, a[0].outcome, a[0].error, a[0].output_text is not None,
                          a[0].finished_at is not None, len(a[0].rounds), a[0].simulated) for a in attempts],
            "results": [(r[0].scoring_run, r[0].state, r[0].rationale, r[0].scorer_version, r[0].total)
                        for r in results],
        }


def _events(base_url: str) -> dict:
    """A try lost with its worker, the try that takes over and is scored, and, on a second cell, a record
    that comes after another worker took the cell over."""
    from afpbench.workers.cells.claim import Claimed, claim_cell, load_cell
    from afpbench.workers.cells.conversation import converse
    from afpbench.workers.cells.decisions import Finished
    from afpbench.workers.cells.execution import execute_cell
    from afpbench.workers.cells.recording import record_try
    from afpbench.workers.cells.retry import RetryPolicy
    from afpbench.workers.store.lease import hold_execution

    lost = _one_cell(base_url)
    assert isinstance(claim_cell(lost, "killed-worker", LEASE_S, 5), Claimed)
    _lease_runs_out(lost)
    decision = execute_cell(lost, "worker-2")
    assert isinstance(decision, Finished) and decision.state in ("GRADER_DISPUTE", "MODEL_PASS", "MODEL_FAIL")

    late = _one_cell(base_url)
    row, inputs, validity = load_cell(late)
    first = claim_cell(late, "slow-worker", LEASE_S, 5)
    assert isinstance(first, Claimed)
    with hold_execution(late, first.number) as hold:
        result, rounds, tools, tokens = converse(inputs.spec.models[0], inputs, row, hold)
    _lease_runs_out(late)
    second = claim_cell(late, "worker-3", LEASE_S, 5)
    assert isinstance(second, Claimed) and second.number == 2
    superseded = record_try(row, first, inputs.spec.models[0], inputs, validity, result, rounds, tools, tokens,
                            RetryPolicy(max_attempts=5))
    assert isinstance(superseded, Finished) and superseded.reason == "attempt 1 superseded", superseded
    return {"lost then scored": _rows(lost), "superseded": _rows(late)}


def test_postgres_one_statement_paths_write_exactly_what_sqlite_transactions_write(sim, sqlite_url, postgres_url,
                                                                                  settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://", AFP_CACHE_DIR="off")
    on_sqlite = _events(sim.base_url)
    settings_env(AFP_DATABASE_URL=postgres_url, AFP_BROKER_URL="memory://", AFP_CACHE_DIR="off")
    on_postgres = _events(sim.base_url)
    assert on_postgres == on_sqlite
    lost = on_postgres["lost then scored"]
    assert [a[:4] for a in lost["attempts"]] == [
        (1, "killed-worker", "interrupted",
         "worker lost before the attempt finished; attempt 2 took over after its lease"),
        (2, "worker-2", "answer", None)]
    assert lost["cell"][0] == "done" and len(lost["results"]) == 1 and lost["results"][0][0] == 1
    late = on_postgres["superseded"]
    assert late["cell"] == ("executing", None, 2, "worker-3"), "the record moved a cell another worker holds"
    assert [a[:4] for a in late["attempts"]] == [(1, "slow-worker", "answer", "superseded by attempt 2"),
                                                (2, "worker-3", "started", None)]
    assert late["results"] == []
