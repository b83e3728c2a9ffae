"""Why a sweep has no scored cell: one line for the top of its report and the terminal summary.

A sweep whose finished cells are all outside the denominator (every one GRADER_DISPUTE, say, because
the judges could not agree or their output could not be read) has no pass rate to show: its charts are
empty and its tables hold only headers. Calling such figures "final" would hide that nothing was
measured, so the summary carries this line and the readers put it first.
"""

from __future__ import annotations

from collections import Counter

from sqlmodel import Session, col, select

from afpbench.scoring.states import ResultState
from afpbench.workers.store.models import Cell

_SCORED = (ResultState.MODEL_PASS.value, ResultState.MODEL_FAIL.value)
_MAX_CAUSES = 3


def cause(state_reason: str | None) -> str:
    """The head of a cell's reason: its first clause, without the details in brackets."""
    head = (state_reason or "no reason recorded").split(";", 1)[0].split(" (", 1)[0].strip()
    return head[:100] or "no reason recorded"


def why_unscored(session: Session, sweep_id: str) -> str | None:
    """None when a finished cell was scored (MODEL_PASS or MODEL_FAIL) or none is finished yet; else
    e.g. "no cell was scored: all 17 finished cells GRADER_DISPUTE; why: judges disagree on ... x11"."""
    # Streamed and counted as read (a list of every finished cell's reason was ~2 MB at 10,000 cells).
    finished = (select(Cell.state, Cell.state_reason).where(Cell.sweep_id == sweep_id, col(Cell.state).is_not(None))
                .execution_options(yield_per=1000))
    states: Counter[str | None] = Counter()  # never None: the query asks for a state
    causes: Counter[str] = Counter()
    rows = session.exec(finished)
    try:
        for state, reason in rows:
            if state in _SCORED:
                return None
            states[state] += 1
            causes[f"{state}: {cause(reason)}"] += 1
    finally:
        rows.close()  # a return midway leaves no open cursor behind
    if not states:
        return None
    named = [f"{c} x{n}" for c, n in sorted(causes.items(), key=lambda kv: (-kv[1], kv[0]))[:_MAX_CAUSES]]
    if len(causes) > _MAX_CAUSES:
        named.append(f"{len(causes) - _MAX_CAUSES} more causes")
    which = " and ".join(f"{n} {state}" for state, n in states.most_common())
    return (f"no cell was scored: all {states.total()} finished cells are outside the pass-rate denominator "
            f"({which}); why: " + "; ".join(named))
