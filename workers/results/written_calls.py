"""The cells whose scored answer is, or contains, a tool call written as text (scoring/written_tool_call.py),
read back from their latest Result for the summary and so the report: a reader must see that such an
answer was scored as text, and that no call was made."""

from __future__ import annotations

from sqlmodel import Session, col, select

from afpbench.workers.results.summary import WrittenToolCallEntry
from afpbench.workers.store.models import Cell, Result, saved_id


def written_tool_call_cells(session: Session, sweep_id: str) -> list[WrittenToolCallEntry]:
    """One entry per cell whose latest scoring run recorded a written tool call, in cell id order."""
    q = (select(Cell, Result.scoring_run, Result.details["written_tool_call"])
         .join(Result, col(Result.cell_id) == Cell.id).where(Result.sweep_id == sweep_id)
         .order_by(col(Cell.id), col(Result.scoring_run)))
    latest: dict[int, tuple[Cell, object]] = {}
    for cell, _, written in session.exec(q).all():  # ordered by run: the last one per cell stays
        latest[saved_id(cell.id)] = (cell, written)
    out = []
    for cell, written in latest.values():
        if not isinstance(written, dict) or not written.get("calls"):
            continue
        calls = [c for c in written["calls"] if isinstance(c, dict)]
        out.append(WrittenToolCallEntry(
            cell_id=saved_id(cell.id), model=cell.model_label, condition=cell.condition,
            fixture=f"{cell.fixture_id}@{cell.fixture_version}", repeat=cell.repeat, state=cell.state,
            tools=[str(c.get("name")) + ("" if c.get("offered") else " (not offered)") for c in calls],
            whole_answer=bool(written.get("whole_answer")),
        ))
    return out
