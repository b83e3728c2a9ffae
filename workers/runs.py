"""Start, watch, resume and cancel sweeps: the service both front doors (CLI, HTTP API) call."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlmodel import col, select

from afpbench.workers.celery_app import check_broker
from afpbench.workers.cells.claim import ATTEMPT_INTERRUPTED, ATTEMPT_STARTED
from afpbench.workers.cells.completion import open_cells
from afpbench.workers.cells.dispatch import release, resend
from afpbench.workers.cells.finish import aggregate_now, finish_if_done
from afpbench.workers.cells.rerun import NothingToRerun, Reopened, RerunChoice
from afpbench.workers.cells.rerun import rerun as reopen
from afpbench.workers.errors import RunCancelled, SweepNotFound
from afpbench.workers.errors import SealMismatch as SealMismatch  # the resume route catches it as runs.SealMismatch
from afpbench.workers.grading.judge_check import JudgeCheck, run_judge_check
from afpbench.workers.limits.shared import require_shared_limiter
from afpbench.workers.planning.cost import cost_plan
from afpbench.workers.planning.pilot import measured
from afpbench.workers.planning.plan import Plan
from afpbench.workers.planning.power_plan import power_plan
from afpbench.workers.settings import get_settings
from afpbench.workers.store.db import check_database, session_scope
from afpbench.workers.store.models import Attempt, Cell, Phase, Sweep, SweepStatus, saved_id, utcnow
from afpbench.workers.sweeps.coordinator import create_sweep, verified_sweep
from afpbench.workers.sweeps.endpoints import preflight_model
from afpbench.workers.sweeps.inputs import load_inputs, remember

# Read-only progress lives in progress.py (no Celery import); re-exported for callers of runs.*.
from afpbench.workers.sweeps.progress import Progress as Progress
from afpbench.workers.sweeps.progress import attempts_count as attempts_count
from afpbench.workers.sweeps.progress import latest_sweep_id as latest_sweep_id
from afpbench.workers.sweeps.progress import progress as progress
from afpbench.workers.sweeps.spec import SweepSpec


@dataclass(frozen=True)
class Cancelled:
    status: str  # the sweep's status afterwards
    unfinished: int
    changed: bool  # False: it was already complete or cancelled, or had nothing left to run


@dataclass(frozen=True)
class Resumed:
    resent: int
    status: str  # the sweep's status afterwards
    completed: bool  # nothing was left to run: the sweep was completed here and its summary recomputed


def check_services(*, schema: bool = True, spec: SweepSpec | None = None) -> None:
    """Broker (distributed mode) and database answer, and (with `schema`) the schema is current; else
    one error, before anything is written (an unanswered release left a written sweep for the
    reconciler to run later). schema=False writes nothing (see check_database). With `spec`: the limits
    it declares are shared by every worker (limits/shared.py:require_shared_limiter)."""
    limited = [m.display for m in [*spec.models, *spec.judges] if m.limits.declared] if spec else []
    if spec is not None and limited:
        require_shared_limiter(f"sweep {spec.name!r} (limits declared by {', '.join(limited)})")
    if not get_settings().embedded:
        check_broker()
    check_database(schema=schema)


def start_sweep(spec: SweepSpec, *, check_endpoints: bool = True, judge_check: bool = True,
                on_plan: Callable[[Plan], None] | None = None,
                on_judge_check: Callable[[JudgeCheck], None] | None = None, pilot: str | None = None) -> str:
    """Validate inputs, plan (`pilot`: a pilot sweep's measurements go into it), check our services,
    preflight endpoints, show the plan (on_plan), try the judges on the calibration answers (`judge_check:` in the spec;
    judge_check=False: `--no-judge-check`), then seal the sweep with its plan (its cost part included: the
    estimate shown beside the actual cost, a budget's reservation) and write it and all its cells at once."""
    inputs = load_inputs(spec, with_validity=True)  # raises FixtureError / ReferenceFileError naming the file
    plan = power_plan(spec, inputs.fixture_facts(), pilot).model_copy(
        update={"cost": cost_plan(spec, inputs, measured(pilot))})
    # Writes nothing, so bad input or a refused endpoint leaves no file behind; the schema is checked
    # when the engine is first built, inside create_sweep's transaction, before its first row.
    check_services(schema=False, spec=spec)
    if check_endpoints:
        for model in [*spec.models, *spec.judges]:
            preflight_model(model)
    if on_plan is not None:  # after the checks, so a refused input or endpoint is the only line printed
        on_plan(plan)
    if judge_check:
        run_judge_check(spec, inputs.judge_prompt, on_judge_check)  # raises JudgeCheckFailed: nothing written
    with session_scope() as session:
        sweep = create_sweep(session, spec, inputs, plan.model_dump(mode="json"))
        sweep_id = sweep.id
    remember(sweep_id, sweep.spec, inputs, sweep.validity)
    del inputs, sweep  # every fixture text read for the creation: the run reads them from their rows
    release(sweep_id)
    return sweep_id


def wait_for(
    sweep_id: str,
    on_progress: Callable[[Progress], None] | None = None,
    poll_s: float = 0.2,
    timeout_s: float | None = None,
) -> Progress:
    """Poll SQL until every cell is done, topping up the release window as cells finish. A sweep
    cancelled meanwhile (`afpbench cancel`, the API) raises RunCancelled: the caller stops waiting, and
    leaving its context stops the embedded worker."""
    started = time.monotonic()
    last_release = 0.0
    while True:
        p = progress(sweep_id)
        if on_progress:
            on_progress(p)
        if p.status == SweepStatus.cancelled:
            raise RunCancelled(
                f"sweep {sweep_id} was cancelled with {p.done} of {p.total} cells done; "
                f"`afpbench resume {sweep_id}` continues it"
            )
        if p.finished:
            finish_if_done(sweep_id, "runner", aggregate_here=True)  # no worker claimed it: aggregate here
            return progress(sweep_id)
        if time.monotonic() - last_release > 2.0:
            release(sweep_id)
            last_release = time.monotonic()
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            return p
        time.sleep(poll_s)


def resume(sweep_id: str) -> Resumed:
    """Re-send every non-terminal cell (lost messages after a broker restart); refuses changed inputs.

    The inverse of cancel: a cancelled sweep runs again, and one with nothing left to run (cancelled
    after its last cell, or left running by an older afpbench) is completed and aggregated here; no
    message would ever do it."""
    with session_scope() as session:
        sweep = verified_sweep(session, sweep_id)
        status = sweep.status
        if open_cells(session, sweep_id) == 0:
            if status == SweepStatus.complete:
                return Resumed(0, status, False)
            sweep.status, sweep.finished_at = SweepStatus.complete, utcnow()
            session.add(sweep)
            rows = None
        else:
            if status == SweepStatus.cancelled:
                sweep.status = status = SweepStatus.running
                session.add(sweep)
            rows = session.exec(
                select(Cell.id, Cell.provider, Cell.phase).where(
                    Cell.sweep_id == sweep_id,
                    col(Cell.phase).in_([Phase.queued, Phase.executing, Phase.awaiting_score, Phase.scoring]),
                )
            ).all()
    if rows is None:
        aggregate_now(sweep_id, "resume")  # claims the aggregate if nobody did, and stores the summary
        return Resumed(0, SweepStatus.complete, True)
    resent = resend([(saved_id(i), provider, phase) for i, provider, phase in rows], sweep_id)
    return Resumed(resent + release(sweep_id), status, False)


def rerun(sweep_id: str, choice: RerunChoice, *, check_endpoints: bool = True) -> Reopened | NothingToRerun:
    """The protocol's rerun of a sweep's finished INFRA_ERROR / PROVIDER_BLOCK cells (workers/cells/rerun.py):
    refused if a sealed input changed; the chosen models' endpoints are preflighted (the environment
    was fixed: check it); the reopened cells are then released like any pending cell."""
    done = reopen(sweep_id, choice, preflight_model if check_endpoints else None)
    if isinstance(done, Reopened):
        release(sweep_id)
    return done


def cancel(sweep_id: str) -> Cancelled:
    """Stop releasing cells; queued messages find the sweep cancelled and do nothing. A sweep that is
    complete, already cancelled or has nothing left to run is left as it is (resume would have nothing
    to undo), and the answer says so."""
    with session_scope() as session:
        status = session.exec(select(Sweep.status).where(Sweep.id == sweep_id)).first()
        if status is None:
            raise SweepNotFound(f"no sweep with id {sweep_id!r}")
        unfinished = open_cells(session, sweep_id)
        if unfinished == 0 or status in (SweepStatus.complete, SweepStatus.cancelled):
            return Cancelled(status, unfinished, False)
        moved = session.exec(
            update(Sweep)
            .where(col(Sweep.id) == sweep_id, col(Sweep.status).notin_([SweepStatus.complete, SweepStatus.cancelled]))
            .values(status=SweepStatus.cancelled)
        ).rowcount
        if moved != 1:  # completed between the read and the update
            status = session.exec(select(Sweep.status).where(Sweep.id == sweep_id)).one()
            return Cancelled(status, unfinished, False)
    return Cancelled(SweepStatus.cancelled, unfinished, True)


def abandon_in_flight(sweep_id: str, owned: Callable[[Any], Any] | None = None,
                      why: str = "sweep cancelled while this request was in flight; the run stopped without "
                                 "waiting for the answer") -> int:
    """After a cancel, the tries an embedded run still has in flight (a slow provider call it will not
    wait for; in embedded mode the run's workers are the sweep's only ones): each attempt ends
    "interrupted" saying so, and its cell goes back to queued, so the record shows a request that was
    sent and never answered, and `resume` runs it again. A late answer, if its thread still records it,
    loses the fence (the cell is no longer executing) and is kept as a superseded attempt. A score try
    in flight goes back to awaiting_score (its uncommitted judgements roll back with it). `owned`: only
    the cells it selects (a condition on Cell.id: the share of a second embedded process that died,
    workers/embedded_pair.py); `why`: the attempts' error. Returns how many execution tries were abandoned."""
    mine = [col(Cell.sweep_id) == sweep_id] + ([owned(col(Cell.id))] if owned is not None else [])
    with session_scope() as session:
        held = list(session.exec(select(Cell.id).where(*mine, col(Cell.phase) == Phase.executing)))
        if held:
            session.execute(update(Attempt)
                            .where(col(Attempt.cell_id).in_(held), col(Attempt.outcome) == ATTEMPT_STARTED)
                            .values(outcome=ATTEMPT_INTERRUPTED, finished_at=utcnow(), error=why))
            session.execute(update(Cell).where(col(Cell.id).in_(held), col(Cell.phase) == Phase.executing)
                            .values(phase=Phase.queued, lease_owner=None, lease_until=None, updated_at=utcnow()))
        session.execute(update(Cell).where(*mine, col(Cell.phase) == Phase.scoring)
                        .values(phase=Phase.awaiting_score, lease_owner=None, lease_until=None))
    return len(held)


def take_over(sweep_id: str, worker: str, owned: Callable[[Any], Any]) -> int:
    """`worker` (the embedded mode's second process, workers/embedded_pair.py) died with cells of this
    sweep in its queue: its tries in flight end "interrupted" and every open cell it owned (`owned`: a
    condition on Cell.id; every message of such a cell lived in that process) is sent again here.
    Returns how many messages were sent."""
    abandon_in_flight(sweep_id, owned,
                      why=f"the embedded worker process {worker} stopped while this request was in flight")
    with session_scope() as session:
        rows = session.exec(select(Cell.id, Cell.provider, Cell.phase).where(
            Cell.sweep_id == sweep_id, owned(col(Cell.id)),
            col(Cell.phase).in_([Phase.queued, Phase.executing, Phase.awaiting_score, Phase.scoring]))).all()
    return resend([(saved_id(i), provider, phase) for i, provider, phase in rows], sweep_id)
