"""What `afpbench run` and `status` report about a sweep, typed: the sweep's facts and progress around the
parts of its summary the terminal shows (workers/results/summary.py RunSummary). `run --json` prints it;
api/display.py renders it."""

from __future__ import annotations

from pydantic import ConfigDict, Field

from afpbench.scoring.rates import EXCLUDED, FAIL, NOT_RUN, PASS, Contract
from afpbench.scoring.states import pass_rate
from afpbench.workers.results.batch_listing import BatchState, batch_states
from afpbench.workers.results.summary import RunSummary
from afpbench.workers.sweeps.progress import Progress, Stages


class ConditionRate(Contract):
    """Cells of one condition by state: PASS/(PASS+FAIL) and the excluded states beside it."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)

    passed: int = Field(serialization_alias="pass")
    n: int
    pass_rate: float | None
    excluded: dict[str, int] = Field(description="the excluded states met, by state")


class RunOverview(RunSummary):
    model_config = ConfigDict(extra="forbid")

    sweep_id: str
    name: str
    simulated: bool
    status: str
    seal: str | None
    cells: int
    done: int
    by_phase: dict[str, int]
    stages: Stages = Field(description="cells by stage: waiting, answering, answered (awaiting a judge), "
                                       "judging, decided")
    by_state: dict[str, int]
    waiting_for_slot: int = Field(0, description="open cells whose scoring waits for its pool's rate or in-flight "
                                                 "slot (a wait is not a failed try)")
    by_condition: dict[str, dict[str, int]] = Field(description="cells by state, '(phase)' for an unfinished one")
    pass_rate_by_condition: dict[str, ConditionRate]
    attempts: int
    human_decisions: int = Field(description="human decisions recorded on the sweep's cells (adjudicate)")
    notices: list[str]
    database: str = Field(description="the database URL without its password")
    judges: list[str]
    batches: list[BatchState] = Field(default_factory=list, description="the batch lane's batches, if any")


def run_overview(sweep_id: str, progress: Progress, attempts: int, database_url: str) -> RunOverview:
    """The sweep's overview. The rates per model and condition, the comparisons and the exclusion balance
    are the sweep summary's own (workers/results/aggregation.py: the report's reading)."""
    from sqlalchemy import func
    from sqlalchemy import select as select_columns  # sqlmodel's select takes at most four columns
    from sqlmodel import col, select

    from afpbench.workers.errors import SweepNotFound
    from afpbench.workers.results.aggregation import snapshot, stored_summary
    from afpbench.workers.results.human_decisions import decision_count
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.store.models import Cell, Phase, Sweep

    # A finished sweep has its summary stored (only the parts shown are read); a running one is computed now.
    summary = (stored_summary(sweep_id, RunSummary) if progress.finished else None) or snapshot(sweep_id, interim=None)
    with session_scope() as session:
        # The columns shown, not the row: its stored inputs hold every fixture text (70 MB at 10,000).
        sweep = session.execute(
            select_columns(col(Sweep.name), col(Sweep.simulated), col(Sweep.seal_hash), col(Sweep.notices),
                           col(Sweep.spec)).where(col(Sweep.id) == sweep_id)
        ).first()
        if sweep is None:
            raise SweepNotFound(f"no sweep with id {sweep_id!r}")
        decisions = decision_count(session, sweep_id)
        rows = session.execute(
            select(col(Cell.condition), col(Cell.phase), col(Cell.state), func.count())
            .where(col(Cell.sweep_id) == sweep_id)
            .group_by(Cell.condition, Cell.phase, col(Cell.state))
        ).all()
    by_condition: dict[str, dict[str, int]] = {}
    for condition, phase, state, n in rows:
        slot = by_condition.setdefault(condition, {})
        key = state or (NOT_RUN if phase == Phase.done else f"({phase})")  # done without a state: the budget
        slot[key] = slot.get(key, 0) + n
    by_condition = dict(sorted(by_condition.items()))
    return RunOverview(
        sweep_id=sweep_id, name=sweep.name, simulated=sweep.simulated, status=progress.status, seal=sweep.seal_hash,
        cells=progress.total, done=progress.done, by_phase=progress.phases, stages=progress.stages,
        by_state=progress.states, waiting_for_slot=progress.waiting_for_slot,
        by_condition=by_condition,
        pass_rate_by_condition={c: _condition_rate(counts) for c, counts in by_condition.items()},
        attempts=attempts, human_decisions=decisions, notices=list(sweep.notices or []), database=database_url,
        judges=[j.get("label") or f"{j['provider']}/{j['model']}" for j in sweep.spec.get("judges", [])],
        exclusion_balance=summary.exclusion_balance, by_model_condition=summary.by_model_condition,
        comparisons=summary.comparisons, no_scored_cell=summary.no_scored_cell, cost=summary.cost,
        budget=summary.budget, batches=batch_states(sweep_id),
    )


def _condition_rate(counts: dict[str, int]) -> ConditionRate:
    p, f = counts.get(PASS, 0), counts.get(FAIL, 0)
    return ConditionRate(passed=p, n=p + f, pass_rate=pass_rate(p, f),
                         excluded={s: counts[s] for s in EXCLUDED if counts.get(s)})
