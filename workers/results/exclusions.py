"""Which of a finished sweep's cells were excluded for reasons outside the model's output: what makes
`afpbench run` exit 3 instead of 0 (README, "Exit status").

Decided from the data every cell carries (its state; for disputes, its judgement rows):

- MODEL_PASS, MODEL_FAIL: model quality.
- PROVIDER_BLOCK (the provider refused this content), INVALID_TEST (the fixture failed the validity
  gate), GRADER_DISPUTE (judges disagree, a judgement was unusable, or no judge is configured:
  each awaits a human by design): excluded, but for what the model, the fixture or the sealed scoring
  rules produced. Exit 0.
- INFRA_ERROR, whatever its reason: no output of the model was obtained (a model stopped for a bad
  key, an unknown model or an exhausted quota; a prompt longer than the model's context; provider or
  harness failures after the attempt budget). Exit 3.
- GRADER_DISPUTE with a failed judge call among its judgements: the judge could not be reached for it.
  Exit 3.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from sqlalchemy import func
from sqlmodel import col, select

from afpbench.scoring.states import ResultState
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import CALL_FAILED, Cell, JudgementRow

_MAX_GROUPS = 4  # the line names the largest groups; the rest are counted


@dataclass(frozen=True)
class Exclusions:
    total: int  # cells in the sweep
    groups: dict[str, int]  # "model m: INFRA_ERROR (auth_error)" -> cells

    @property
    def count(self) -> int:
        return sum(self.groups.values())

    def __bool__(self) -> bool:
        return self.count > 0

    def line(self) -> str:
        ranked = sorted(self.groups.items(), key=lambda kv: (-kv[1], kv[0]))
        named = [f"{group} x{n}" for group, n in ranked[:_MAX_GROUPS]]
        if len(ranked) > _MAX_GROUPS:
            named.append(f"{len(ranked) - _MAX_GROUPS} more groups")
        return (
            f"{self.count} of {self.total} cells excluded for reasons outside the model's output (exit 3): "
            + "; ".join(named)
        )


def cause_of(state_reason: str | None) -> str:
    """The head of an INFRA_ERROR reason ('auth_error: 401 ...' -> 'auth_error'), without the
    'model stopped: ' the model's other cells carry, so one stop is one group."""
    reason = (state_reason or "no reason recorded").removeprefix("model stopped: ")
    return reason.split(":", 1)[0].strip()[:80] or "no reason recorded"


def configuration_exclusions(sweep_id: str) -> Exclusions:
    with session_scope() as session:
        total = session.exec(select(func.count()).select_from(Cell).where(Cell.sweep_id == sweep_id)).one()
        infra = session.exec(
            select(Cell.model_label, Cell.state_reason).where(
                Cell.sweep_id == sweep_id, Cell.state == ResultState.INFRA_ERROR.value
            )
        ).all()
        unjudged = session.exec(
            select(Cell.model_label, func.count(func.distinct(Cell.id)))
            .join(JudgementRow, col(JudgementRow.cell_id) == Cell.id)
            .where(
                Cell.sweep_id == sweep_id,
                Cell.state == ResultState.GRADER_DISPUTE.value,
                col(JudgementRow.parse_error).startswith(CALL_FAILED),
            )
            .group_by(Cell.model_label)
        ).all()
    groups: Counter[str] = Counter(f"model {label}: INFRA_ERROR ({cause_of(reason)})" for label, reason in infra)
    for label, n in unjudged:
        groups[f"model {label}: GRADER_DISPUTE (judge call failed)"] += n
    return Exclusions(total, dict(groups))
