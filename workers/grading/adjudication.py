"""Human adjudication and re-scoring: both add rows, neither overwrites.

A human decision adds an Adjudication row and a Result row (a new scoring run whose details name the
adjudication, the state it changed from, whether it was an override and why); the cell's state follows
the latest result. Judge rows and earlier results stay as history; the seal is never touched.
Decisions act on GRADER_DISPUTE cells; any other finished cell needs an explicit override with a reason.
Re-scoring reads the stored raw output and calls judges again, never the tested model.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from sqlmodel import col, select

from afpbench.scoring.evidence import answer_record
from afpbench.scoring.states import ResultState
from afpbench.scoring.verdict import HumanDecision, apply_human_decision
from afpbench.workers.errors import AdjudicationError
from afpbench.workers.grading.scorer import next_scoring_run, score_answer, write_result
from afpbench.workers.results.aggregation import store_summary
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Adjudication, Aggregate, Cell, Phase, Result, Sweep
from afpbench.workers.sweeps.inputs import inputs_for_sweep
from afpbench.workers.sweeps.spec import ModelSpec

RESCORABLE_EXCLUDED = {
    ResultState.PROVIDER_BLOCK.value,
    ResultState.INFRA_ERROR.value,
    ResultState.INVALID_TEST.value,
}


def list_disputes(sweep_id: str | None = None) -> list[dict]:
    with session_scope() as session:
        q = select(Cell).where(Cell.state == ResultState.GRADER_DISPUTE.value)
        if sweep_id:
            q = q.where(Cell.sweep_id == sweep_id)
        return [
            {
                "cell_id": c.id,
                "sweep_id": c.sweep_id,
                "model": c.model_label,
                "condition": c.condition,
                "fixture": f"{c.fixture_id}@{c.fixture_version}",
                "repeat": c.repeat,
                "reason": c.state_reason,
            }
            for c in session.exec(q.order_by(col(Cell.id)))
        ]


def record_human_decision(
    cell_id: int,
    reviewer: str,
    state: str,
    note: str,
    scores: dict[str, int] | None = None,
    fatal_criterion: str | None = None,
    override: bool = False,
    reason: str | None = None,
) -> dict:
    """Record a human decision on a finished cell.

    Its scope is the GRADER_DISPUTE cells. Any other cell carries a verdict the sealed rules already
    reached (a judged pass or fail, an infrastructure error...); changing it is an override, which must
    be asked for explicitly with a non-empty reason, and stays on record (from, to, reviewer, reason,
    time) in the report, the export bundle and the run record."""
    try:
        result_state = ResultState(state)
    except ValueError:
        raise AdjudicationError(
            f"state {state!r} is not one of {', '.join(s.value for s in ResultState)}"
        ) from None
    reason = (reason or "").strip() or None
    if override and reason is None:
        raise AdjudicationError("override needs a non-empty reason (--reason; HTTP: reason)")
    with session_scope() as session:
        cell = session.get(Cell, cell_id)
        if cell is None:
            raise AdjudicationError(f"no cell with id {cell_id}")
        if cell.phase != Phase.done:
            raise AdjudicationError(f"cell {cell_id} is still {cell.phase}; adjudicate once it is scored")
        from_state = cell.state
        if from_state != ResultState.GRADER_DISPUTE.value and not override:
            raise AdjudicationError(
                f"cell {cell_id} is {from_state}, not GRADER_DISPUTE: deciding it overrides its verdict "
                "and needs --override with --reason (HTTP: override: true and reason)"
            )
        sweep = session.get(Sweep, cell.sweep_id)
        pass_rule = inputs_for_sweep(session, sweep).spec.pass_rule
        try:
            verdict = apply_human_decision(
                HumanDecision(reviewer, result_state, note, scores, fatal_criterion), pass_rule
            )
        except ValueError as exc:
            raise AdjudicationError(str(exc)) from None
        row = Adjudication(
            cell_id=cell_id, reviewer=reviewer, state=verdict.state.value, scores=scores, note=note
        )
        session.add(row)
        session.flush()
        run = next_scoring_run(session, cell_id)
        # the answer the decision is about and what the scorer read off it (the scored attempt, a tool call
        # written as text, provenance, assertions) stay on the decided cell's latest row
        details = {**_answer_record(session, cell_id), "source": "human", "adjudication_id": row.id,
                   "reviewer": reviewer, "note": note, "from_state": from_state, "override": override,
                   "reason": reason or note}
        write_result(session, cell_id, run, verdict, details)
        aggregated = session.get(Aggregate, cell.sweep_id) is not None
        out = {
            "cell_id": cell_id,
            "from_state": from_state,
            "state": verdict.state.value,
            "override": override,
            "adjudication_id": row.id,
            "scoring_run": run,
        }
    if aggregated:  # keep the published summary in step with the decision
        store_summary(cell.sweep_id)
    return out


def _answer_record(session, cell_id: int) -> dict:
    latest = session.exec(
        select(Result).where(Result.cell_id == cell_id).order_by(col(Result.scoring_run).desc()).limit(1)
    ).first()
    return answer_record(latest.details) if latest else {}


def history(cell_id: int) -> dict:
    with session_scope() as session:
        results = session.exec(
            select(Result).where(Result.cell_id == cell_id).order_by(col(Result.scoring_run))
        ).all()
        decisions = session.exec(
            select(Adjudication).where(Adjudication.cell_id == cell_id).order_by(col(Adjudication.id))
        ).all()
        return {
            "results": [r.model_dump(mode="json") for r in results],
            "adjudications": [a.model_dump(mode="json") for a in decisions],
        }


@dataclass(frozen=True)
class RescoreOutcome:
    """What `rescore` did: new states by count, and the cells it left alone because a human decided them."""

    counts: dict[str, int]
    kept_decisions: tuple[int, ...]  # cell ids whose latest result is a human decision, not rescored


def rescore_cell(cell_id: int, judges: list[ModelSpec] | None = None) -> str:
    with session_scope() as session:
        verdict, details, run = score_answer(session, cell_id, judges)
        details["rescore"] = True
        write_result(session, cell_id, run, verdict, details)
        return verdict.state.value


def rescore_sweep(
    sweep_id: str, judges: list[ModelSpec] | None = None, threads: int = 8, *, over_decisions: bool = False
) -> RescoreOutcome:
    """New scoring run for every cell that has a model answer.

    A cell whose latest result is a human decision keeps it: a judge re-run does not silently replace a
    reviewer's verdict. `over_decisions` rescores those cells too (the decision stays in the history)."""
    with session_scope() as session:
        if session.get(Sweep, sweep_id) is None:
            raise AdjudicationError(f"no sweep with id {sweep_id!r}")
        ids = [
            c.id
            for c in session.exec(select(Cell).where(Cell.sweep_id == sweep_id, Cell.phase == Phase.done))
            if c.state not in RESCORABLE_EXCLUDED and c.id is not None
        ]
        decided = {cell_id for cell_id in ids if _latest_is_human(session, cell_id)}
    kept = () if over_decisions else tuple(sorted(decided))
    todo = [i for i in ids if i not in kept]
    counts: dict[str, int] = {}
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for state in pool.map(lambda i: rescore_cell(i, judges), todo):
            counts[state] = counts.get(state, 0) + 1
    return RescoreOutcome(counts, kept)


def _latest_is_human(session, cell_id: int) -> bool:
    latest = session.exec(
        select(Result).where(Result.cell_id == cell_id).order_by(col(Result.scoring_run).desc()).limit(1)
    ).first()
    return bool(latest and (latest.details or {}).get("source") == "human")
