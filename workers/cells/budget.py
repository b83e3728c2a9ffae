"""A sweep's budget during the run (spec `budget: {usd: N}`, sealed): the release sends a cell only while
what was spent, plus the reservation of every cell in flight, plus this cell's stays within the budget.

Spent is the actual cost so far (workers/results/summary_queries.py:sweep_cost: every attempt and judge
call at the declared prices). A cell's reservation is the ceiling of the cost plan sealed with the sweep
(workers/planning/cost.py: its model's calls with the declared max_tokens, every judge asked twice); a cell
counts as in flight from its release until it is done. Once nothing is in flight and not one more cell fits, the
pending cells are finished "not run": phase done, no result state, the reason saying so. They are in no
denominator and never INFRA_ERROR (scoring/rates.py: NOT_RUN), and the sweep completes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from afpbench.workers.planning.cost import cost_plan, sealed_cost
from afpbench.workers.results.summary_queries import sweep_cost
from afpbench.workers.store.models import NOT_RUN_REASON, Cell, Phase, Sweep, utcnow
from afpbench.workers.sweeps.inputs import SweepInputs

IN_FLIGHT = (Phase.queued, Phase.executing, Phase.awaiting_score, Phase.scoring)


@dataclass(frozen=True)
class Allowance:
    budget_usd: float
    spent_usd: float
    reserved_usd: float  # the cells in flight
    cells: dict[str, int]  # model hash -> cells that may be released now
    in_flight: int
    next_cell_usd: float  # the smallest reservation of one more cell


def spent_usd(session: Session, sweep_id: str, inputs: SweepInputs) -> float:
    models = inputs.models_by_hash
    return sweep_cost(session, sweep_id, dict(models), {h: m.display for h, m in models.items()},
                      inputs.spec.judges).sweep_usd


def allowance(session: Session, sweep_id: str, inputs: SweepInputs) -> Allowance | None:
    """How many cells of each model the budget lets the release send now; None without a budget. Locks
    the sweep's row (PostgreSQL) so that two releasers never both spend the same room."""
    budget = inputs.spec.budget
    if budget is None:
        return None
    sealed = session.exec(select(Sweep.seal_components).where(Sweep.id == sweep_id).with_for_update()).one()
    plan = sealed_cost(sealed) or cost_plan(inputs.spec, inputs)
    ceilings = {m.model_hash: plan.ceiling_per_cell(m.display) or 0.0 for m in inputs.spec.models}
    flying = dict(session.exec(select(Cell.model_hash, func.count()).where(
        Cell.sweep_id == sweep_id, col(Cell.phase).in_(IN_FLIGHT)).group_by(Cell.model_hash)).all())
    spent = spent_usd(session, sweep_id, inputs)
    reserved = sum(ceilings.get(h, 0.0) * n for h, n in flying.items())
    room = budget.usd - spent - reserved
    cells: dict[str, int] = {}
    for model_hash, ceiling in ceilings.items():
        n = max(0, math.floor(room / ceiling)) if ceiling > 0 else 0
        cells[model_hash] = n
        room -= n * ceiling
    return Allowance(budget.usd, spent, reserved, cells, sum(flying.values()), min(ceilings.values(), default=0.0))


def stop_if_spent(session: Session, sweep_id: str, room: Allowance) -> int:
    """Nothing in flight and no room for one more cell: the pending cells end "not run" (a notice says
    the budget was reached). Returns how many."""
    if room.in_flight or any(room.cells.values()):
        return 0
    reason = (f"{NOT_RUN_REASON}: spent ${room.spent_usd:.4f} of the ${room.budget_usd:.2f} budget; one more "
              f"cell reserves up to ${room.next_cell_usd:.4f}")
    moved = session.exec(update(Cell).where(col(Cell.sweep_id) == sweep_id, col(Cell.phase) == Phase.pending)  # type: ignore[call-overload]
                         .values(phase=Phase.done, state=None, state_reason=reason, updated_at=utcnow())).rowcount
    if moved:
        sweep = session.get(Sweep, sweep_id)
        assert sweep is not None, "a sweep with cells exists"
        notice = f"budget reached: {moved} cells not run ({reason})"
        sweep.notices = [*sweep.notices, notice]
        session.add(sweep)
    return moved
