"""What a finished (pilot) sweep measured, for the cost plan's output tokens, tool rounds and swapped
re-judges (workers/planning/cost.py): read from its attempts and judgements, by model or judge label."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from afpbench.workers.errors import SweepNotFound
from afpbench.workers.planning.cost import Observed
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Attempt, Cell, JudgementRow, Sweep


def measured(pilot: str | None) -> Observed | None:
    """A pilot sweep's measurements, or None without one."""
    if pilot is None:
        return None
    with session_scope() as session:
        return observed(session, pilot)


def observed(session: Session, sweep_id: str) -> Observed:
    if session.get(Sweep, sweep_id) is None:
        raise SweepNotFound(f"--pilot: no sweep with id {sweep_id!r}")
    answered = (select(Cell.model_label, func.avg(Attempt.output_tokens),
                       func.count(col(Attempt.id)), func.count(func.distinct(Cell.id)))
                .join(Cell, col(Cell.id) == Attempt.cell_id)
                .where(Cell.sweep_id == sweep_id, col(Attempt.output_tokens).is_not(None))
                .group_by(Cell.model_label))
    output: dict[str, float] = {}
    rpc: dict[str, float] = {}
    for label, mean, attempts, cells in session.exec(answered).all():
        output[label] = float(mean)
        rpc[label] = attempts / cells  # tool rounds are rounds of one attempt: see _rounds below
    rounds = (select(Cell.model_label, Attempt.rounds).join(Cell, col(Cell.id) == Attempt.cell_id)
              .where(Cell.sweep_id == sweep_id, col(Attempt.output_tokens).is_not(None)))
    per_label: dict[str, list[int]] = {}
    for label, attempt_rounds in session.exec(rounds).all():
        per_label.setdefault(label, []).append(max(1, len(attempt_rounds or [])))
    for label, counts in per_label.items():
        rpc[label] = rpc.get(label, 1.0) * sum(counts) / len(counts)
    judged = (select(JudgementRow.judge_label, JudgementRow.judge_round, func.count(),
                     func.avg(JudgementRow.output_tokens))
              .join(Cell, col(Cell.id) == JudgementRow.cell_id)
              .where(Cell.sweep_id == sweep_id, col(JudgementRow.judge_round).in_([1, 2]))
              .group_by(col(JudgementRow.judge_label), col(JudgementRow.judge_round)))
    by_round: dict[str, dict[int, int]] = {}
    for label, judge_round, n, mean in session.exec(judged).all():
        by_round.setdefault(label, {})[judge_round] = n
        if judge_round == 1 and mean is not None:
            output[label] = float(mean)
    swap = {label: n.get(2, 0) / n[1] for label, n in by_round.items() if n.get(1)}
    return Observed(sweep_id, output, rpc, swap)
