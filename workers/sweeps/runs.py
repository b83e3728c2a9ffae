"""Start, watch, resume and cancel sweeps: the service both front doors (CLI, HTTP API) call."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import col, select

from afpbench.workers.cells.dispatch import release, resend
from afpbench.workers.cells.finish import finish_if_done
from afpbench.workers.errors import SealMismatch, SweepNotFound
from afpbench.workers.providers.preflight import preflight
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Attempt, Cell, Phase, Sweep, SweepStatus, saved_id
from afpbench.workers.sweeps.coordinator import counts_by_phase_and_state, create_sweep, verify_sweep
from afpbench.workers.sweeps.inputs import load_inputs, remember
from afpbench.workers.sweeps.spec import SweepSpec


@dataclass
class Progress:
    sweep_id: str
    total: int
    done: int
    phases: dict[str, int]
    states: dict[str, int]
    status: str

    @property
    def finished(self) -> bool:
        return self.done >= self.total


def start_sweep(spec: SweepSpec, *, check_endpoints: bool = True) -> str:
    """Validate inputs, preflight endpoints, then seal and write the sweep and all its cells at once."""
    inputs = load_inputs(spec)  # raises FixtureError / ReferenceFileError naming the file
    if check_endpoints:
        for model in [*spec.models, *spec.judges]:
            preflight(model)
    with session_scope() as session:
        sweep = create_sweep(session, spec, inputs)
        sweep_id = sweep.id
    remember(sweep_id, sweep.spec, inputs, sweep.validity)
    release(sweep_id)
    return sweep_id


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
        )


def wait_for(
    sweep_id: str,
    on_progress: Callable[[Progress], None] | None = None,
    poll_s: float = 0.2,
    timeout_s: float | None = None,
) -> Progress:
    """Poll SQL until every cell is done, topping up the release window as cells finish."""
    started = time.monotonic()
    last_release = 0.0
    while True:
        p = progress(sweep_id)
        if on_progress:
            on_progress(p)
        if p.finished:
            finish_if_done(sweep_id, "runner", aggregate_here=True)  # no worker claimed it: aggregate here
            return progress(sweep_id)
        if time.monotonic() - last_release > 2.0:
            release(sweep_id)
            last_release = time.monotonic()
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            return p
        time.sleep(poll_s)


def attempts_count(sweep_id: str) -> int:
    with session_scope() as session:
        return session.exec(
            select(func.count()).select_from(Attempt).join(Cell).where(Cell.sweep_id == sweep_id)
        ).one()


def resume(sweep_id: str) -> int:
    """Re-send every non-terminal cell (lost messages after a broker restart); refuses changed inputs."""
    with session_scope() as session:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None:
            raise SweepNotFound(f"no sweep with id {sweep_id!r}")
        changed = verify_sweep(sweep)
        if changed:
            raise SealMismatch(f"sweep {sweep_id}: inputs changed since the seal: {', '.join(changed)}")
        if sweep.status == SweepStatus.cancelled:
            sweep.status = SweepStatus.running
            session.add(sweep)
        rows = session.exec(
            select(Cell.id, Cell.provider, Cell.phase).where(
                Cell.sweep_id == sweep_id,
                col(Cell.phase).in_([Phase.queued, Phase.executing, Phase.awaiting_score, Phase.scoring]),
            )
        ).all()
    return resend([(saved_id(i), provider, phase) for i, provider, phase in rows]) + release(sweep_id)


def cancel(sweep_id: str) -> int:
    """Stop releasing cells; queued messages find the sweep cancelled and do nothing."""
    with session_scope() as session:
        sweep = session.get(Sweep, sweep_id)
        if sweep is None:
            raise SweepNotFound(f"no sweep with id {sweep_id!r}")
        sweep.status = SweepStatus.cancelled
        session.add(sweep)
        return session.exec(
            select(func.count()).select_from(Cell).where(Cell.sweep_id == sweep_id, Cell.phase != Phase.done)
        ).one()


def latest_sweep_id() -> str | None:
    with session_scope() as session:
        return session.exec(select(Sweep.id).order_by(col(Sweep.created_at).desc()).limit(1)).first()
