"""The protocol's rerun: "INFRA_ERROR / PROVIDER_BLOCK: fix or document the environment and rerun".

`rerun` gives a sweep's chosen finished cells new attempts and nothing else. In one transaction it
writes a Rerun row (what was chosen, how many cells, the note saying what was fixed), reopens the cells
(pending, no state) with `attempt_base` = their attempts so far (the attempt budget counts from there:
claim.py) and `result_base` = the scoring run after their latest result (the next result is newer than
every earlier one, so "the latest result is the one reported" holds), and drops the sweep's aggregate
row (a derived summary: completion is claimed again when the last reopened cell is done). The earlier
attempts and results stay as they were; `superseded` below says which they are. The reopened cells
then go through the release, claim and lease of any cell: the budget, the lease and the duplicate
guarantees are the claim's, unchanged.

Only INFRA_ERROR and PROVIDER_BLOCK cells can be rerun: rerunning a scored cell would let a run pick
the answers it keeps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import delete, func, update
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from afpbench.scoring.states import ResultState
from afpbench.workers.errors import RerunConflict, RerunRefused
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Aggregate, Cell, Phase, Rerun, Result, Sweep, SweepStatus, saved_id, utcnow
from afpbench.workers.sweeps.coordinator import verified_sweep
from afpbench.workers.sweeps.inputs import inputs_for
from afpbench.workers.sweeps.spec import ModelSpec

RERUNNABLE = (ResultState.INFRA_ERROR.value, ResultState.PROVIDER_BLOCK.value)
NOTE_MAX = 2000


@dataclass(frozen=True)
class RerunChoice:
    """Which finished cells a rerun reopens: their states (some of RERUNNABLE), optionally one model
    (its label) and one fixture (its id); the note says what was fixed or documented."""

    states: tuple[str, ...] = RERUNNABLE
    model: str | None = None
    fixture: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Reopened:
    sweep_id: str
    number: int  # the sweep's rerun number (1, 2, ...)
    cells: int


@dataclass(frozen=True)
class NothingToRerun:
    sweep_id: str
    reason: str


def check_choice(choice: RerunChoice) -> RerunChoice:
    bad = [s for s in choice.states if s not in RERUNNABLE]
    if bad or not choice.states:
        raise RerunRefused(f"--state {','.join(bad) or '(empty)'}: only {' and '.join(RERUNNABLE)} cells can be "
                           "rerun (the protocol reruns what the environment caused, never a scored answer)")
    if choice.note is not None and len(choice.note) > NOTE_MAX:
        raise RerunRefused(f"--note: {len(choice.note)} characters; at most {NOTE_MAX}")
    return choice


def chosen_cells(session: Session, sweep_id: str, choice: RerunChoice) -> list[int]:
    """The finished cells the choice names, refusing a model or fixture the sweep does not have."""
    _check_known(session, sweep_id, "--model", choice.model, select(Cell.model_label))
    _check_known(session, sweep_id, "--fixture", choice.fixture, select(Cell.fixture_id))
    where = [col(Cell.sweep_id) == sweep_id, col(Cell.phase) == Phase.done, col(Cell.state).in_(choice.states)]
    if choice.model is not None:
        where.append(col(Cell.model_label) == choice.model)
    if choice.fixture is not None:
        where.append(col(Cell.fixture_id) == choice.fixture)
    return [saved_id(i) for i in session.exec(select(Cell.id).where(*where).order_by(col(Cell.id)))]


def _check_known(session: Session, sweep_id: str, flag: str, value: str | None, column: SelectOfScalar[str]) -> None:
    if value is None:
        return
    known = sorted(session.exec(column.where(Cell.sweep_id == sweep_id).distinct()).all())
    if value not in known:
        raise RerunRefused(f"{flag} {value!r}: sweep {sweep_id} has {', '.join(known)}")


def rerun(sweep_id: str, choice: RerunChoice, preflight: Callable[[ModelSpec], None] | None = None
          ) -> Reopened | NothingToRerun:
    """Reopen the chosen finished cells (see the module's docstring); `preflight` is called for each of
    their models before anything is written (a rerun after fixing a key checks the fix first). The
    caller releases the cells."""
    check_choice(choice)
    with session_scope() as session:
        sweep = verified_sweep(session, sweep_id, "; a rerun runs the sealed inputs only")
        if sweep.status == SweepStatus.cancelled:
            raise RerunConflict(f"sweep {sweep_id} is cancelled: `afpbench resume {sweep_id}` first")
        ids = chosen_cells(session, sweep_id, choice)
        if not ids:
            return NothingToRerun(sweep_id, f"sweep {sweep_id} has no finished {' or '.join(choice.states)} cell"
                                            + _scope(choice) + ": nothing to rerun")
        labels = set(session.exec(select(Cell.model_label).where(col(Cell.id).in_(ids)).distinct()))
        models = [m for m in inputs_for(session, sweep_id).spec.models if m.display in labels]
    if preflight is not None:
        for model in models:
            preflight(model)
    return _reopen(sweep_id, choice, ids)


def _scope(choice: RerunChoice) -> str:
    return "".join(f" of {what} {value}" for what, value in (("model", choice.model), ("fixture", choice.fixture))
                   if value is not None)


def _reopen(sweep_id: str, choice: RerunChoice, ids: list[int]) -> Reopened:
    now = utcnow()
    with session_scope() as session:
        number = session.exec(select(func.count()).select_from(Rerun).where(Rerun.sweep_id == sweep_id)).one() + 1
        row = Rerun(sweep_id=sweep_id, number=number, created_at=now, states=list(choice.states), model=choice.model,
                    fixture=choice.fixture, cells=len(ids), note=choice.note)
        session.add(row)
        session.flush()
        next_run = (select(func.coalesce(func.max(Result.scoring_run) + 1, 0))
                    .where(col(Result.cell_id) == col(Cell.id)).scalar_subquery())
        reopened = 0
        for start in range(0, len(ids), 500):
            reopened += session.exec(  # type: ignore[call-overload]  # an UPDATE: its rowcount
                update(Cell)
                .where(col(Cell.id).in_(ids[start:start + 500]), col(Cell.phase) == Phase.done)
                .values(phase=Phase.pending, state=None, state_reason=None, attempt_base=col(Cell.attempts),
                        result_base=next_run, rerun_id=row.id, lease_owner=None, lease_until=None,
                        not_before=None, updated_at=now)
            ).rowcount
        row.cells = reopened
        session.add(row)
        session.execute(delete(Aggregate).where(col(Aggregate.sweep_id) == sweep_id))
        session.execute(update(Sweep).where(col(Sweep.id) == sweep_id)
                        .values(status=SweepStatus.running, finished_at=None))
    return Reopened(sweep_id, number, reopened)
