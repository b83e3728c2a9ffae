"""The cells whose scored answer is, or contains, a tool call written as text (scoring/written_tool_call.py),
read back from their latest Result for the summary and so the report: a reader must see that such an
answer was scored as text, and that no call was made."""

from __future__ import annotations

from sqlmodel import Session, col, select

from afpbench.workers.results.summary import WrittenToolCallEntry
from afpbench.workers.store.models import Cell, Result, saved_id

_CHUNK = 500  # ids per IN (...): below SQLite's oldest limit of 999 parameters


def written_tool_call_cells(session: Session, sweep_id: str) -> list[WrittenToolCallEntry]:
    """One entry per cell whose latest scoring run recorded a written tool call, in cell id order."""
    # Ids and the one JSON field first, ordered by run so that the last one per cell stays; cell rows only
    # for the few cells with a written call (building every cell as an object cost ~0.5 s at 10,000).
    # Streamed, keeping only the cells whose latest run has a call: every result's field held at once
    # was ~3 MB at 10,000 cells, at the end of a run.
    q = (select(Result.cell_id, Result.details["written_tool_call"]).where(Result.sweep_id == sweep_id)
         .order_by(col(Result.cell_id), col(Result.scoring_run)).execution_options(yield_per=1000))
    found: dict[int, dict] = {}
    for cell_id, written in session.exec(q):
        if isinstance(written, dict) and written.get("calls"):
            found[cell_id] = written
        else:  # a later scoring run without a written call replaces an earlier one with it
            found.pop(cell_id, None)
    if not found:
        return []
    ids = sorted(found)
    cells = [cell for start in range(0, len(ids), _CHUNK) for cell in session.exec(
        select(Cell).where(col(Cell.id).in_(ids[start:start + _CHUNK])).order_by(col(Cell.id))).all()]
    out = []
    for cell in cells:
        written = found[saved_id(cell.id)]
        assert isinstance(written, dict)  # kept above only when it is one
        calls = [c for c in written["calls"] if isinstance(c, dict)]
        out.append(WrittenToolCallEntry(
            cell_id=saved_id(cell.id), model=cell.model_label, condition=cell.condition,
            fixture=f"{cell.fixture_id}@{cell.fixture_version}", repeat=cell.repeat, state=cell.state,
            tools=[str(c.get("name")) + ("" if c.get("offered") else " (not offered)") for c in calls],
            whole_answer=bool(written.get("whole_answer")),
        ))
    return out
