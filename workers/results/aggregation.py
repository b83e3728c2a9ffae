"""Aggregate a sweep: the SQL half. GROUP BY queries over cell state, the latest result per cell and
the scored attempt per cell; the grouped rows become named records (scoring.rates StateRow, folded
into StateCounts as they stream, ScoredGroup, PairUnit) and the pure arithmetic there turns them into
the readings (the queries: summary_queries.py). 100k cells aggregate in seconds because Python only
ever sees grouped rows.

The result is a typed SweepSummary (workers/results/summary.py); the Aggregate row stores its JSON.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast

from sqlalchemy import Text, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import QueryableAttribute, defer
from sqlmodel import Session, col

from afpbench.reference.protocol_facts import HIGH_RISK_MIN_REPEATS
from afpbench.scoring.balance import exclusion_balance
from afpbench.scoring.measures import score_summary
from afpbench.scoring.rates import (
    FAIL,
    NOT_RUN,
    PASS,
    UNFINISHED,
    Contract,
    high_risk_readiness,
    rate_block,
    rate_blocks,
)
from afpbench.workers.errors import SweepNotFound
from afpbench.workers.results.comparison_rows import paired_comparisons
from afpbench.workers.results.human_decisions import human_decisions
from afpbench.workers.results.reliability_queries import sweep_judge_reliability
from afpbench.workers.results.reruns import reruns, superseded
from afpbench.workers.results.summary import (
    FIXTURE_ROWS,
    Budget,
    ComputedSummary,
    ConditionRow,
    Cost,
    FixtureRows,
    ModelConditionRow,
    ModelEntry,
    SweepSummary,
    joined,
    labelled,
)
from afpbench.workers.results.summary_queries import scored_groups, state_counts, sweep_cost
from afpbench.workers.results.unscored import why_unscored
from afpbench.workers.results.written_calls import written_tool_call_cells
from afpbench.workers.store.db import JsonText, session_scope
from afpbench.workers.store.models import Aggregate, Sweep, SweepStatus, utcnow
from afpbench.workers.sweeps.coordinator import PLAN
from afpbench.workers.sweeps.spec_loading import parse_spec

Stored = TypeVar("Stored", bound=Contract)

__all__ = ["SweepSummary", "aggregate_sweep", "snapshot", "store_summary", "stored_summary"]



# ---------------------------------------------------------------- public entry points


def store_summary(sweep_id: str) -> ComputedSummary:
    """Compute the summary and store it in the sweep's one Aggregate row, overwritten on re-run.

    The Aggregate row is the completion claim (workers.cells.completion): whoever finishes the sweep
    claims it first, then calls this. Without the row the summary is computed and not stored.
    The per-fixture rows go to the column as JSON without ever being models (summary.FixtureRows).
    """
    with session_scope() as session:
        computed = _compute(session, _sweep(session, sweep_id), interim=None)
        rows_json = computed.fixture_rows.json()
        session.execute(update(Aggregate).where(col(Aggregate.sweep_id) == sweep_id)
                        .values(summary=JsonText(computed.head_json()),
                                fixture_rows=JsonText(rows_json), finished_at=utcnow()))
    return computed


def aggregate_sweep(sweep_id: str) -> SweepSummary:
    """store_summary, and the whole summary back (the report's and the `aggregate` command's)."""
    return store_summary(sweep_id).whole()


def snapshot(sweep_id: str, interim: bool | None = True) -> SweepSummary:
    """The same computation, not stored; labelled interim (for a running sweep). interim=None labels it
    from the sweep itself (interim unless every cell is done and the sweep is complete)."""
    with session_scope() as session:
        return _compute(session, _sweep(session, sweep_id), interim=interim).whole()


def stored_summary(sweep_id: str, contract: type[Stored] = SweepSummary) -> Stored | None:  # type: ignore[assignment]
    """The stored summary (read as `contract`: the whole SweepSummary, or a part such as RunSummary);
    None when none is stored yet, or when the stored JSON does not fit this version's contract (an older
    afpbench wrote it): callers then compute it afresh."""
    # As text, validated by pydantic from the JSON itself. The per-fixture rows are stored apart and
    # read only for a contract that has them: a part (RunSummary) never parses them.
    columns = [sql_cast(col(Aggregate.summary), Text)]
    if FIXTURE_ROWS in contract.model_fields:
        columns.append(sql_cast(col(Aggregate.fixture_rows), Text))
    with session_scope() as session:
        stored = session.execute(select(*columns).where(col(Aggregate.sweep_id) == sweep_id)).first()
    if stored is None or stored[0] is None or stored[0] == "null":
        return None
    head, *rows = stored
    try:
        if rows and rows[0] not in (None, "null"):  # SQL NULL or JSON null: no rows stored apart
            return contract.model_validate_json(joined(head, rows[0]))
        return contract.model_validate_json(head)  # a part, or a summary stored before 0005 (rows inside)
    except ValueError:  # pydantic.ValidationError, or a head that is no JSON object
        return None


def _column(attribute: Any) -> QueryableAttribute[Any]:
    """A SQLModel field as the mapped attribute it is at run time (its declared type is the value's)."""
    return cast(QueryableAttribute[Any], attribute)


def _sweep(session: Session, sweep_id: str) -> Sweep:
    # Without its stored inputs and reports (every fixture text: tens of MB at 10,000 fixtures, 0.4 s to
    # decode); the summary reads neither, and a deferred column still loads if something touches it.
    sweep = session.get(Sweep, sweep_id, options=[defer(_column(Sweep.inputs)), defer(_column(Sweep.validity))])
    if sweep is None:
        raise SweepNotFound(f"no sweep with id {sweep_id!r}")
    return sweep


# ---------------------------------------------------------------- the summary


def _compute(session: Session, sweep: Sweep, interim: bool | None) -> ComputedSummary:
    spec = parse_spec(sweep.spec, f"sweep {sweep.id} spec")
    models = {m.model_hash: m for m in spec.models}
    counts = state_counts(session, sweep.id)
    # Cells carry the display label their model had at creation; the spec gives it without a scan.
    labels = {h: m.display for h, m in models.items()} | {h: h for h, _ in counts.by_model_condition
                                                          if h not in models}
    unfinished = counts.total.get(UNFINISHED, 0)
    complete = unfinished == 0 and sweep.status == SweepStatus.complete
    conditions = counts.conditions
    family = spec.comparison_family()
    high_risk = high_risk_readiness(counts, labels, HIGH_RISK_MIN_REPEATS)
    simulated_parts: list[Literal["models", "judges"]] = []
    if any(m.simulated for m in spec.models):
        simulated_parts.append("models")
    if any(m.simulated for m in spec.judges):
        simulated_parts.append("judges")
    dims, tokens, fatal = score_summary(scored_groups(session, sweep.id), labels)
    decisions = human_decisions(session, sweep.id)
    by_condition = rate_blocks(counts.by_condition)
    by_model_condition = rate_blocks({(labels[h], h, c): n for (h, c), n in counts.by_model_condition.items()})
    by_fixture_condition = rate_blocks(counts.by_fixture_condition)
    cost = sweep_cost(session, sweep.id, models, labels, spec.judges).model_copy(
        update={"estimate_usd": ((sweep.seal_components.get(PLAN) or {}).get("cost") or {}).get("sync_usd")})
    head = SweepSummary(
        sweep_id=sweep.id,
        name=sweep.name,
        status=sweep.status,
        complete=complete,
        interim=(not complete) if interim is None else interim,
        simulated=bool(sweep.simulated or simulated_parts),
        simulated_parts=simulated_parts,
        seal_hash=sweep.seal_hash,
        afpbench_version=sweep.afpbench_version,
        computed_at=datetime.now(UTC).isoformat(timespec="seconds"),
        pass_rule=sweep.spec.get("pass_rule"),
        notices=list(sweep.notices or []),
        conditions=conditions,
        models=[ModelEntry(model_hash=h, model=labels.get(h) or m.display, provider=m.provider,
                           simulated=m.simulated) for h, m in models.items()],
        cells=counts.cells,
        unfinished=unfinished,
        totals=rate_block(counts.total),
        by_condition=[labelled(ConditionRow, b, condition=c) for c, b in by_condition.items()],
        by_model_condition=[labelled(ModelConditionRow, b, model_hash=h, model=labels[h], condition=c)
                            for (_, h, c), b in by_model_condition.items()],
        by_fixture_condition=[],  # apart, below
        dimensions=dims,
        fatal_by_criterion=fatal,
        output_tokens=tokens,
        cost=cost,
        budget=_budget(spec.budget.usd, cost, counts.total.get(NOT_RUN, 0)) if spec.budget else None,
        high_risk=high_risk,
        comparisons=paired_comparisons(session, sweep.id, family, conditions, labels, high_risk.ready,
                                       (sweep.seal_components or {}).get("plan")),
        exclusion_balance=exclusion_balance(counts.by_model_condition, labels, family),
        human_decisions=decisions,
        # Read only when the counts show no scored cell: the reasons need a pass over the cells.
        no_scored_cell=why_unscored(session, sweep.id) if _nothing_scored(counts.total) else None,
        written_tool_calls=written_tool_call_cells(session, sweep.id),
        reruns=reruns(session, sweep.id),
        superseded=superseded(session, sweep.id),
        judge_reliability=sweep_judge_reliability(session, sweep.id, spec, decisions),
    )
    return ComputedSummary(head, FixtureRows(by_fixture_condition, frozenset(counts.high_risk_fixtures)))


def _budget(usd: float, cost: Cost, not_run: int) -> Budget:
    return Budget(usd=usd, spent_usd=cost.sweep_usd, reached=not_run > 0, not_run=not_run)


def _nothing_scored(total: dict[str, int]) -> bool:
    return total.get(PASS, 0) + total.get(FAIL, 0) == 0 and sum(total.values()) > total.get(UNFINISHED, 0)
