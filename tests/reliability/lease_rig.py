"""A one-cell sweep behind a counting gate, for the lease and fence tests (tests/security/test_dups_*).

The sweep is written by the product's own coordinator (sealed, one cell: model `sim`, condition A,
fixture P01) into a SQLite file, without releasing it to a broker: each test delivers its own
"messages" by calling the services a task would call, from several threads or processes. The model
and the judge are the simulator behind a PoisonGate, which counts every request per cell key and can
hold or fail chosen requests. Short timings (hard limit 1 s < visibility 2 s < lease 3 s) let a slow
call outlive its lease in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, text
from sqlmodel import select

from tests.reliability.poison import PoisonGate

LEASE_S = 3
SHORT_TIMING = {
    "AFP_TASK_HARD_TIME_LIMIT_S": "1",
    "AFP_VISIBILITY_TIMEOUT_S": "2",
    "AFP_LEASE_EXPIRY_S": str(LEASE_S),
}


def one_cell_spec(gate: PoisonGate, judged: bool) -> dict:
    model = {"provider": "sim", "model": "sim-dup", "label": "sim-dup (simulated)", "base_url": gate.base_url,
             "timeout_s": 30}
    judge = {"provider": "sim", "model": "sim-dup-judge", "label": "sim-dup-judge (simulated)",
             "base_url": gate.base_url, "timeout_s": 30}
    return {"name": "lease and fence (simulated)", "models": [model], "judges": [judge] if judged else [],
            "conditions": ["A"], "fixtures": {"only": ["P01"]}, "repeats": 1,
            # One call per judge per round: a judge whose call fails makes the scorer give the cell back.
            "dispute_rule": {"max_parse_retries": 0}}


def create_one_cell_sweep(spec_data: dict) -> tuple[str, int]:
    """Seal and write the sweep with the product's coordinator (in this process's settings); no release."""
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.sweeps.coordinator import create_sweep
    from afpbench.workers.sweeps.inputs import load_inputs, remember
    from afpbench.workers.sweeps.spec_loading import parse_spec

    spec = parse_spec(spec_data)
    inputs = load_inputs(spec)
    with session_scope() as session:
        sweep = create_sweep(session, spec, inputs)
        sweep_id, stored, validity = sweep.id, sweep.spec, sweep.validity
    remember(sweep_id, stored, inputs, validity)
    return sweep_id, cell_ids(sweep_id)[0]


def cell_ids(sweep_id: str) -> list[int]:
    from afpbench.workers.store.db import transaction

    with transaction() as conn:
        return [r[0] for r in conn.execute(text("select id from cell where sweep_id = :s order by id"),
                                           {"s": sweep_id})]


@dataclass
class CellNow:
    phase: str
    attempts: int
    lease_owner: str | None
    lease_until: datetime | None  # UTC
    results: int
    outcomes: list[str]  # of the attempt rows, by number
    attempt_rows: list[dict] = field(repr=False)


def cell_now(cell_id: int) -> CellNow:
    """The cell, its attempt rows and how many results it has, as the database holds them now."""
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.store.models import Attempt, Cell, Result, as_utc

    with session_scope() as session:
        cell = session.get(Cell, cell_id)
        session.refresh(cell)
        results = session.exec(select(func.count()).select_from(Result).where(Result.cell_id == cell_id)).one()
        attempts = session.exec(select(Attempt).where(Attempt.cell_id == cell_id).order_by(Attempt.number)).all()
        rows = [{"number": a.number, "worker": a.worker, "outcome": a.outcome, "error": a.error,
                 "rounds": a.rounds} for a in attempts]
        until = as_utc(cell.lease_until) if cell.lease_until else None
        return CellNow(cell.phase, cell.attempts, cell.lease_owner, until, int(results), [r["outcome"] for r in rows],
                       rows)
