"""Claiming a cell for execution: the hot path's SQL, built once.

Per cell that is a read (`load_cell`), a claim (`claim`) and a record transaction (recording.py), each a
few hundred microseconds on a Core connection. The attempt row is written with the claim, in the same
transaction, so a try whose worker is killed mid-call stays on record (outcome "started", then
"interrupted" once the next claim takes over) instead of leaving only a bumped counter.

The claim is also where the attempt budget (AFP_MAX_ATTEMPTS) is enforced: it never starts attempt
max_attempts + 1 (counted since the cell's latest rerun, if any: cell.attempt_base, workers/cells/rerun.py).
A cell that is due again with its budget spent (its last try was lost with its worker,
or its record could not be written) ends INFRA_ERROR instead, saying so. Task retries, reconciler
resends and duplicate messages all go through this claim, so none of them can exceed the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

from sqlalchemy import Connection, Insert, Select, String, bindparam, cast, insert, literal, or_, select, update

from afpbench.scoring.states import ResultState
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import autocommit, autocommitted, get_engine, transaction
from afpbench.workers.store.models import (
    Attempt,
    Cell,
    Phase,
    Result,
    Sweep,
    SweepStatus,
    cell_key,
    phase_in,
    table_of,
    utcnow,
)
from afpbench.workers.sweeps.inputs import SweepInputs, inputs_for, validity_for

# Outcomes of an attempt row that has no provider answer recorded (not OutcomeClass values).
ATTEMPT_STARTED = "started"  # claimed, the call under way (or its worker died: see below)
ATTEMPT_INTERRUPTED = "interrupted"  # its worker was lost mid-try; a later claim took the cell over
ATTEMPT_NOT_SENT = "not_sent"  # claimed, but no request was made (its error says why)
# The provider answered but the attempt's row could not be written (recording.py); counts as an attempt.
ATTEMPT_STORAGE_ERROR = "storage_error"


@dataclass(frozen=True)
class Claimed:
    attempt_id: int
    number: int  # the cell's attempt count after this claim: the fence checked when recording


@dataclass(frozen=True)
class Exhausted:
    """The cell was due for another try but its attempt budget is spent: it is now done, INFRA_ERROR."""

    reason: str


CELL, ATTEMPT, RESULT, SWEEP = table_of(Cell), table_of(Attempt), table_of(Result), table_of(Sweep)

# The hot path's statements are built once (compiled once, cache key memoised) and run on a Core
# connection: per cell that is a read, a claim and a record transaction, a few hundred microseconds each.
CLAIMABLE = or_(  # not started, waiting for a retry, or held under a lease that has run out
    phase_in(CELL.c.phase, [Phase.pending, Phase.queued]),
    (CELL.c.phase == Phase.executing.value) & (CELL.c.lease_until < bindparam("b_now")),
)
# The sweep's cancel is read in the claim itself: round one of a try is sent right after it, so this is
# the last moment to refuse a cancelled sweep's cell without a read of its own per cell.
SWEEP_CANCELLED = (
    select(SWEEP.c.id)
    .where(SWEEP.c.id == CELL.c.sweep_id, SWEEP.c.status == SweepStatus.cancelled.value)
    .exists()
)
_TAKE = (
    update(CELL)
    .where(CELL.c.id == bindparam("b_cell"), CLAIMABLE, CELL.c.attempts - CELL.c.attempt_base < bindparam("b_max"),
           ~SWEEP_CANCELLED)
    .values(
        phase=Phase.executing.value,
        lease_owner=bindparam("b_worker"),
        lease_until=bindparam("b_lease_until"),
        attempts=CELL.c.attempts + 1,
        updated_at=bindparam("b_now"),
    )
)
CLAIM = _TAKE.returning(CELL.c.attempts)
EXHAUST = (
    update(CELL)
    .where(CELL.c.id == bindparam("b_cell"), CLAIMABLE, CELL.c.attempts - CELL.c.attempt_base >= bindparam("b_max"))
    .values(phase=Phase.done.value, state=ResultState.INFRA_ERROR.value, state_reason=bindparam("b_reason"),
            lease_owner=None, lease_until=None, updated_at=bindparam("b_now"))
)
LAST_ATTEMPT = (
    select(ATTEMPT.c.id, ATTEMPT.c.number, ATTEMPT.c.outcome, ATTEMPT.c.error)
    .where(ATTEMPT.c.cell_id == bindparam("b_cell"))
    .order_by(ATTEMPT.c.number.desc(), ATTEMPT.c.id.desc())
    .limit(1)
)
INTERRUPT = (
    update(ATTEMPT)
    .where(ATTEMPT.c.cell_id == bindparam("b_cell"), ATTEMPT.c.outcome == ATTEMPT_STARTED)
    .values(outcome=ATTEMPT_INTERRUPTED, finished_at=bindparam("b_now"), error=bindparam("b_error"))
)
NEW_ATTEMPT = insert(ATTEMPT).returning(ATTEMPT.c.id)
# An attempt row as the claim starts it (NEW_ATTEMPT's values besides cell, number, worker and time).
_STARTED = {"outcome": ATTEMPT_STARTED, "tool_calls": [], "reasoning_params": {}, "rounds": [], "simulated": False}
_STARTED_PARAMS = {f"b_{k}": v for k, v in _STARTED.items()}  # the same, as CLAIM_AND_START's parameters
_LOST = "worker lost before the attempt finished; attempt {} took over after its lease"


def _claim_and_start() -> Insert:
    """CLAIM, INTERRUPT and NEW_ATTEMPT as one PostgreSQL statement (data-modifying WITH): one round trip
    in autocommit, where the three in a transaction took five. Every part sees the snapshot taken before
    the statement, so the INTERRUPT never meets the attempt row this statement inserts; a cell claimed for
    its first try has no attempt to interrupt."""
    claimed = _TAKE.returning(CELL.c.id, CELL.c.attempts).cte("claimed")
    before, after = _LOST.split("{}")
    interrupted = (
        update(ATTEMPT)
        .where(ATTEMPT.c.cell_id == claimed.c.id, ATTEMPT.c.outcome == ATTEMPT_STARTED)
        .values(outcome=ATTEMPT_INTERRUPTED, finished_at=bindparam("b_now"),
                error=literal(before) + cast(claimed.c.attempts, String) + literal(after))
        .cte("interrupted")
    )
    columns = ["cell_id", "number", "worker", "started_at", *_STARTED]
    values = [claimed.c.id, claimed.c.attempts, bindparam("b_worker", type_=ATTEMPT.c.worker.type),
              bindparam("b_now", type_=ATTEMPT.c.started_at.type),
              *(bindparam(f"b_{k}", type_=ATTEMPT.c[k].type) for k in _STARTED)]
    return (insert(ATTEMPT).from_select(columns, select(*values)).returning(ATTEMPT.c.id, ATTEMPT.c.number)
            .add_cte(interrupted))


CLAIM_AND_START = _claim_and_start()
INSERT_RESULT = insert(RESULT)
FILL_ATTEMPT = update(ATTEMPT).where(ATTEMPT.c.id == bindparam("b_attempt"))  # SET: the params' columns
MOVE_CELL = update(CELL).where(  # the fence: still ours, still executing
    CELL.c.id == bindparam("b_cell"),
    CELL.c.phase == Phase.executing.value,
    CELL.c.attempts == bindparam("b_number"),
)


@lru_cache(maxsize=64)
def record_in_one(attempt_columns: tuple[str, ...], cell_columns: tuple[str, ...],
                  result_columns: tuple[str, ...]) -> Select:
    """FILL_ATTEMPT, MOVE_CELL and, if the cell moved, INSERT_RESULT (when `result_columns` are given) as one
    PostgreSQL statement: one round trip in autocommit, where a transaction of the three took five. It
    returns the cell's id if the cell moved (the fence held), no row if not. Parameters: b_attempt,
    b_cell, b_number, and each column's value as a_<column> (attempt), c_<column> (cell), r_<column>
    (result). Built once per set of columns (a decision fills a few fixed sets)."""
    moved = (MOVE_CELL.values({c: bindparam(f"c_{c}", type_=CELL.c[c].type) for c in cell_columns})
             .returning(CELL.c.id).cte("moved"))
    filled = FILL_ATTEMPT.values({c: bindparam(f"a_{c}", type_=ATTEMPT.c[c].type) for c in attempt_columns})
    parts = [filled.cte("filled")]
    if result_columns:
        values = select(*(bindparam(f"r_{c}", type_=RESULT.c[c].type) for c in result_columns))
        parts.append(insert(RESULT).from_select(list(result_columns), values.where(select(moved.c.id).exists()),
                                                include_defaults=False).cte("scored"))
    return select(moved.c.id).add_cte(*parts)


LOAD = (
    select(
        CELL.c.id, CELL.c.sweep_id, CELL.c.model_hash, CELL.c.model_label, CELL.c.condition, CELL.c.fixture_id,
        CELL.c.fixture_version, CELL.c.repeat, CELL.c.phase, CELL.c.state, CELL.c.lease_until, CELL.c.not_before,
        CELL.c.attempt_base, CELL.c.result_base, SWEEP.c.status.label("sweep_status"),
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
    attempt_base: int  # attempts before the cell's latest rerun: the budget counts those after it
    result_base: int  # the scoring run an execution result takes (0 unless a rerun reopened the cell)
    sweep_status: str

    @property
    def key(self) -> str:
        return cell_key(self)


def claim(
    conn: Connection, cell_id: int, worker: str, lease_s: float, max_attempts: int | None = None
) -> Claimed | Exhausted | None:
    """Atomically move a cell into `executing` under our lease, with its attempt row; None if someone
    else holds it or its sweep was cancelled; Exhausted (and the cell finished) if it is due but
    `max_attempts` (default: AFP_MAX_ATTEMPTS) are spent. `conn` is in a transaction."""
    if max_attempts is None:
        max_attempts = get_settings().max_attempts
    now = utcnow()
    return _claimed(conn, cell_id, worker, lease_s, max_attempts, now) or _exhaust(conn, cell_id, max_attempts, now)


def claim_cell(cell_id: int, worker: str, lease_s: float,
               max_attempts: int | None = None) -> Claimed | Exhausted | None:
    """`claim` on a connection of its own: the hot path's. On PostgreSQL a claim that succeeds is one
    statement in autocommit (one round trip); only a cell it cannot take is looked at again in a
    transaction (held by someone else, or due with its budget spent)."""
    if max_attempts is None:
        max_attempts = get_settings().max_attempts
    engine = get_engine()
    if engine.dialect.name == "postgresql":
        with engine.connect() as conn:  # one statement, atomic by itself: no BEGIN, no COMMIT
            claimed = _claimed(autocommitted(conn), cell_id, worker, lease_s, max_attempts, utcnow())
        if claimed is not None:
            return claimed
    with transaction() as conn:
        return claim(conn, cell_id, worker, lease_s, max_attempts)


def _claimed(conn: Connection, cell_id: int, worker: str, lease_s: float, max_attempts: int,
             now: datetime) -> Claimed | None:
    """The claim and its attempt row (an earlier try left `started` marked interrupted), or None."""
    params = {"b_cell": cell_id, "b_now": now, "b_worker": worker, "b_max": max_attempts,
              "b_lease_until": now + timedelta(seconds=lease_s)}
    if conn.dialect.name == "postgresql":
        row = conn.execute(CLAIM_AND_START, params | _STARTED_PARAMS).first()
        return None if row is None else Claimed(row.id, row.number)
    number = conn.execute(CLAIM, params).scalar_one_or_none()
    if number is None:
        return None
    if number > 1:
        conn.execute(INTERRUPT, {"b_cell": cell_id, "b_now": now, "b_error": _LOST.format(number)})
    attempt_id = conn.execute(NEW_ATTEMPT, {
        "cell_id": cell_id, "number": number, "worker": worker, "started_at": now, **_STARTED}).scalar_one()
    return Claimed(attempt_id, number)


def _exhaust(conn: Connection, cell_id: int, max_attempts: int, now: datetime) -> Exhausted | None:
    """End a cell that is due again with its budget spent: INFRA_ERROR, naming the budget and how the
    last attempt ended; None when the cell is simply held by someone else (or already done)."""
    last = conn.execute(LAST_ATTEMPT, {"b_cell": cell_id}).first()
    if last is None or last.outcome == ATTEMPT_STARTED:
        how = "was lost with its worker" if last is not None else "never started"
    else:
        how = f"ended {last.outcome}" + (f": {last.error}" if last.error else "")
    cell = conn.execute(select(CELL.c.sweep_id, CELL.c.attempts, CELL.c.attempt_base, CELL.c.result_base)
                        .where(CELL.c.id == cell_id)).one()
    number = cell.attempts - cell.attempt_base if last is not None else max_attempts
    since = " since its rerun" if cell.attempt_base else ""
    reason = (f"attempt budget spent after {number} attempts{since} (AFP_MAX_ATTEMPTS={max_attempts}): "
              f"the last {how}")
    moved = conn.execute(EXHAUST, {"b_cell": cell_id, "b_now": now, "b_max": max_attempts, "b_reason": reason})
    if not moved.rowcount:
        return None
    conn.execute(INTERRUPT, {
        "b_cell": cell_id, "b_now": now,
        "b_error": "worker lost before the attempt finished; no attempt took over: the attempt budget is spent",
    })
    conn.execute(INSERT_RESULT, [Result(
        cell_id=cell_id, sweep_id=cell.sweep_id, scoring_run=cell.result_base, state=ResultState.INFRA_ERROR.value,
        rationale=reason,
        details={"attempt_id": last.id if last is not None else None, "decided_at": "claim"},
        scorer_version="execution",
    ).model_dump(exclude={"id"})])
    return Exhausted(reason)


def load_cell(cell_id: int) -> tuple[CellRow, SweepInputs, dict] | None:
    """The cell, its sweep's status, inputs and validity reports: one statement when the caches are warm
    (autocommit: a read needs no transaction of its own)."""
    with autocommit() as conn:
        row = conn.execute(LOAD, {"b_cell": cell_id}).first()
        if row is None:
            return None
        cell = CellRow(**row._mapping)
        return cell, inputs_for(conn, cell.sweep_id), validity_for(conn, cell.sweep_id)
