"""Where a sweep stands: progress by phase and result state, attempts, the latest sweep.

Read-only and kept apart from workers/runs.py (which sends tasks and so imports Celery): `afpbench status`,
`cells` and the HTTP API read progress without loading the broker client.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import bindparam, case, func
from sqlmodel import col, select

from afpbench.workers.errors import SweepNotFound
from afpbench.workers.store.db import autocommit, session_scope
from afpbench.workers.store.models import SLOT_WAIT, Attempt, Cell, Phase, Sweep, SweepStatus


def is_cancelled(sweep_id: str) -> bool:
    """Whether `afpbench cancel` (or the API) has stopped the sweep: read on a connection of its own,
    since a transaction already open (SQLite's snapshot) would not see a cancel recorded after it began.
    Checked before each later tool round and each judge call (round one: in the claim, claim.py), so
    nothing starts after a cancel."""
    with autocommit() as conn:
        return conn.execute(_STATUS, {"b_sweep": sweep_id}).scalar() == SweepStatus.cancelled


_STATUS = select(Sweep.status).where(Sweep.id == bindparam("b_sweep"))  # built once: read per round and judge call


@dataclass(frozen=True)
class Stages:
    """A sweep's cells by where they stand, named for a reader: the phases a cell really passes
    (workers/store/models.py:Phase) grouped as the bar, `status`, the viewer and the API show them."""

    waiting: int  # pending + queued: the tested model not asked yet
    answering: int  # executing: the tested model's call (and its tool rounds) in flight
    answered: int  # awaiting_score: the answer is stored, no judge is working on it yet
    judging: int  # scoring: judges are being asked (their rows appear as each call ends)
    decided: int  # done: a result state is recorded

    @classmethod
    def of(cls, phases: dict[str, int]) -> Stages:
        n = phases.get
        return cls(waiting=n(Phase.pending, 0) + n(Phase.queued, 0), answering=n(Phase.executing, 0),
                   answered=n(Phase.awaiting_score, 0), judging=n(Phase.scoring, 0), decided=n(Phase.done, 0))

    def line(self) -> str:
        """e.g. "waiting 4, answering 2, answered 3, judging 1, decided 10"."""
        return ", ".join(f"{name} {n}" for name, n in self.__dict__.items())


@dataclass
class Progress:
    sweep_id: str
    total: int
    done: int
    phases: dict[str, int]
    states: dict[str, int]
    status: str
    waiting_for_slot: int = 0  # open cells whose scoring waits for its pool's slot (store/models.py:SLOT_WAIT)

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    @property
    def stages(self) -> Stages:
        return Stages.of(self.phases)


# An open cell whose scoring waits for its pool's slot says so in its state_reason (grading/scorer.py).
_WAITING = case(((col(Cell.phase) != Phase.done.value) & col(Cell.state_reason).startswith(SLOT_WAIT), 1),
                else_=0)


def counts_by_phase_and_state(session, sweep_id: str) -> dict[str, dict[str, int]]:
    """Cells by phase and by result state, and (under "waiting") the open ones waiting for a slot."""
    rows = session.execute(
        select(Cell.phase, Cell.state, _WAITING, func.count())
        .where(Cell.sweep_id == sweep_id)
        .group_by(col(Cell.phase), col(Cell.state), _WAITING)
    ).all()
    phases: dict[str, int] = {}
    states: dict[str, int] = {}
    waiting = 0
    for phase, state, waits, n in rows:
        phases[phase] = phases.get(phase, 0) + n
        if state:
            states[state] = states.get(state, 0) + n
        waiting += n if waits else 0
    return {"phases": phases, "states": states, "waiting": {"for_slot": waiting}}


def progress(sweep_id: str) -> Progress:
    with session_scope() as session:
        # Only the status column: the sweep row's JSON (every fixture text) is large and this is polled.
        status = session.exec(select(Sweep.status).where(Sweep.id == sweep_id)).first()
        if status is None:
            raise SweepNotFound(f"no sweep with id {sweep_id!r}")
        counts = counts_by_phase_and_state(session, sweep_id)
        total = sum(counts["phases"].values())
        return Progress(
            sweep_id,
            total,
            counts["phases"].get(Phase.done, 0),
            counts["phases"],
            counts["states"],
            status,
            counts["waiting"]["for_slot"],
        )


def attempts_count(sweep_id: str) -> int:
    with session_scope() as session:
        return session.exec(
            select(func.count()).select_from(Attempt).join(Cell).where(Cell.sweep_id == sweep_id)
        ).one()


def latest_sweep_id() -> str | None:
    with session_scope() as session:
        return session.exec(select(Sweep.id).order_by(col(Sweep.created_at).desc()).limit(1)).first()
