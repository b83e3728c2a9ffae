"""Start, watch, resume and cancel sweeps: the service both front doors (CLI, HTTP API) call."""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import func
from sqlmodel import select

from afpbench.workers.cells.dispatch import release, resend
from afpbench.workers.cells.finish import finish_if_done
from afpbench.workers.errors import SealMismatch, SweepNotFound
from afpbench.workers.providers.preflight import preflight
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase, Sweep, SweepStatus
from afpbench.workers.sweeps.coordinator import create_sweep, verify_sweep
from afpbench.workers.sweeps.inputs import load_inputs, remember

# Read-only progress lives in progress.py (no Celery import); re-exported for callers of runs.*.
from afpbench.workers.sweeps.progress import Progress as Progress
from afpbench.workers.sweeps.progress import attempts_count as attempts_count
from afpbench.workers.sweeps.progress import latest_sweep_id as latest_sweep_id
from afpbench.workers.sweeps.progress import progress as progress
from afpbench.workers.sweeps.spec import SweepSpec


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
                Cell.phase.in_([Phase.queued, Phase.executing, Phase.awaiting_score, Phase.scoring]),
            )
        ).all()
    return resend([tuple(r) for r in rows]) + release(sweep_id)


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
