"""Claiming a cell for execution: the hot path's SQL, built once.

Per cell that is a read (`load_cell`), a claim (`claim`) and a record transaction (execution.py), each a
few hundred microseconds on a Core connection. The attempt row is written with the claim, in the same
transaction, so a try whose worker is killed mid-call stays on record (outcome "started", then
"interrupted" once the next claim takes over) instead of leaving only a bumped counter.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, Table, bindparam, insert, inspect, or_, select, update
from sqlmodel import SQLModel

from afpbench.workers.store.db import transaction
from afpbench.workers.store.models import Attempt, Cell, Phase, Result, Sweep, cell_key, utcnow
from afpbench.workers.sweeps.inputs import SweepInputs, inputs_for, validity_for

# Outcomes of an attempt row that has no provider answer recorded (not OutcomeClass values).
ATTEMPT_STARTED = "started"  # claimed, the call under way (or its worker died: see below)
ATTEMPT_INTERRUPTED = "interrupted"  # its worker was lost mid-try; a later claim took the cell over


@dataclass(frozen=True)
class Claimed:
    attempt_id: int
    number: int  # the cell's attempt count after this claim: the fence checked when recording


def _table(model: type[SQLModel]) -> Table:
    """A table model's Core Table: the `__table__` SQLModel sets at class creation, which mypy cannot see."""
    table = inspect(model).local_table
    assert isinstance(table, Table), f"{model.__name__} maps no single table"
    return table


CELL, ATTEMPT, RESULT, SWEEP = _table(Cell), _table(Attempt), _table(Result), _table(Sweep)

# The hot path's statements are built once (compiled once, cache key memoised) and run on a Core
# connection: per cell that is a read, a claim and a record transaction, a few hundred microseconds each.
CLAIM = (
    update(CELL)
    .where(
        CELL.c.id == bindparam("b_cell"),
        or_(
            CELL.c.phase.in_([Phase.pending.value, Phase.queued.value]),
            (CELL.c.phase == Phase.executing.value) & (CELL.c.lease_until < bindparam("b_now")),
        ),
    )
    .values(
        phase=Phase.executing.value,
        lease_owner=bindparam("b_worker"),
        lease_until=bindparam("b_lease_until"),
        attempts=CELL.c.attempts + 1,
        updated_at=bindparam("b_now"),
    )
    .returning(CELL.c.attempts)
)
INTERRUPT = (
    update(ATTEMPT)
    .where(ATTEMPT.c.cell_id == bindparam("b_cell"), ATTEMPT.c.outcome == ATTEMPT_STARTED)
    .values(outcome=ATTEMPT_INTERRUPTED, finished_at=bindparam("b_now"), error=bindparam("b_error"))
)
NEW_ATTEMPT = insert(ATTEMPT).returning(ATTEMPT.c.id)
FILL_ATTEMPT = update(ATTEMPT).where(ATTEMPT.c.id == bindparam("b_attempt"))  # SET: the params' columns
MOVE_CELL = update(CELL).where(  # the fence: still ours, still executing
    CELL.c.id == bindparam("b_cell"),
    CELL.c.phase == Phase.executing.value,
    CELL.c.attempts == bindparam("b_number"),
)
LOAD = (
    select(
        CELL.c.id, CELL.c.sweep_id, CELL.c.model_hash, CELL.c.model_label, CELL.c.condition, CELL.c.fixture_id,
        CELL.c.fixture_version, CELL.c.repeat, CELL.c.phase, CELL.c.state, CELL.c.lease_until, CELL.c.not_before,
        SWEEP.c.status.label("sweep_status"),
    )
    .join(SWEEP, SWEEP.c.id == CELL.c.sweep_id)
    .where(CELL.c.id == bindparam("b_cell"))
)


@dataclass(frozen=True)
class CellRow:
    """The cell's columns the hot path reads, and its sweep's status (one statement, no ORM object)."""

    id: int
    sweep_id: str
    model_hash: str
    model_label: str
    condition: str
    fixture_id: str
    fixture_version: str
    repeat: int
    phase: str
    state: str | None
    lease_until: datetime | None
    not_before: datetime | None
    sweep_status: str

    @property
    def key(self) -> str:
        return cell_key(self)


def claim(conn: Connection, cell_id: int, worker: str, lease_s: float) -> Claimed | None:
    """Atomically move a cell into `executing` under our lease, with its attempt row; None if someone
    else holds it."""
    now = utcnow()
    number = conn.execute(
        CLAIM, {"b_cell": cell_id, "b_now": now, "b_worker": worker,
                 "b_lease_until": now + timedelta(seconds=lease_s)}
    ).scalar_one_or_none()
    if number is None:
        return None
    if number > 1:
        conn.execute(INTERRUPT, {
            "b_cell": cell_id, "b_now": now,
            "b_error": f"worker lost before the attempt finished; attempt {number} took over after its lease",
        })
    attempt_id = conn.execute(NEW_ATTEMPT, {
        "cell_id": cell_id, "number": number, "worker": worker, "started_at": now, "outcome": ATTEMPT_STARTED,
        "tool_calls": [], "reasoning_params": {}, "rounds": [], "simulated": False,
    }).scalar_one()
    return Claimed(attempt_id, number)


def load_cell(cell_id: int) -> tuple[CellRow, SweepInputs, dict] | None:
    """The cell, its sweep's status, inputs and validity reports: one statement when the caches are warm."""
    with transaction() as conn:
        row = conn.execute(LOAD, {"b_cell": cell_id}).first()
        if row is None:
            return None
        cell = CellRow(**row._mapping)
        return cell, inputs_for(conn, cell.sweep_id), validity_for(conn, cell.sweep_id)
