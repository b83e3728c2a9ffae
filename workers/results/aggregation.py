"""Aggregate a sweep: the SQL half. GROUP BY queries over cell state, the latest result per cell and
the scored attempt per cell; the grouped rows become named records (scoring.rates StateRow, folded
into StateCounts as they stream, ScoredGroup, PairUnit) and the pure arithmetic there turns them into
the readings. 100k cells aggregate in seconds because Python only ever sees grouped rows.

The result is a typed SweepSummary (workers/results/summary.py); the Aggregate row stores its JSON.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, TypeVar, cast

from sqlalchemy import ColumnElement, Text, case, exists, func, select, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import QueryableAttribute, aliased, defer
from sqlmodel import Session, col

from afpbench.scoring.balance import exclusion_balance
from afpbench.scoring.measures import COST_RULE, MEANS, ScoredGroup, Sum, TokenCounts, score_summary, token_cost
from afpbench.scoring.rates import (
    FAIL,
    PASS,
    SCORED,
    UNFINISHED,
    Contract,
    PairUnit,
    StateCounts,
    StateRow,
    compare,
    high_risk_readiness,
    pair_tables,
    pending_reading,
    rate_block,
    rate_blocks,
)
from afpbench.workers.errors import SweepNotFound
from afpbench.workers.memory import return_freed_memory
from afpbench.workers.results.decisions import human_decisions
from afpbench.workers.results.summary import (
    FIXTURE_ROWS,
    Comparison,
    ComparisonHead,
    ComputedSummary,
    ConditionRow,
    Cost,
    CostRow,
    FixtureRows,
    ModelConditionRow,
    ModelEntry,
    PendingComparison,
    SweepSummary,
    comparison,
    joined,
    labelled,
)
from afpbench.workers.results.unscored import why_unscored
from afpbench.workers.results.written_calls import written_tool_call_cells
from afpbench.workers.store.db import JsonText, session_scope
from afpbench.workers.store.models import Aggregate, Attempt, Cell, Phase, Result, Sweep, SweepStatus, utcnow
from afpbench.workers.sweeps.spec import HIGH_RISK_MIN_REPEATS, ModelSpec, parse_spec

Stored = TypeVar("Stored", bound=Contract)

__all__ = ["COMPARISONS", "PENDING_READING", "SweepSummary", "aggregate_sweep", "is_latest_result", "snapshot",
           "store_summary", "stored_summary"]

COMPARISONS = (("C", "B"), ("D", "C"), ("C", "A"), ("B", "A"))
PENDING_READING = pending_reading(HIGH_RISK_MIN_REPEATS)


# ---------------------------------------------------------------- public entry points


def store_summary(sweep_id: str) -> ComputedSummary:
    """Compute the summary and store it in the sweep's one Aggregate row, overwritten on re-run.

    The Aggregate row is the completion claim (workers.cells.completion): whoever finishes the sweep
    claims it first, then calls this. Without the row the summary is computed and not stored.
    The per-fixture rows go to the column as JSON without ever being models (summary.FixtureRows).
    """
    # A big run's last burst: what the cells freed goes back to the system before the computation, and
    # what the computation freed before the write (the rows' text, and SQLite's two copies of it).
    return_freed_memory()
    with session_scope() as session:
        computed = _compute(session, _sweep(session, sweep_id), interim=None)
        rows_json = computed.fixture_rows.json()
        return_freed_memory()
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
    counts = _state_counts(session, sweep.id)
    # Cells carry the display label their model had at creation; the spec gives it without a scan.
    labels = {h: m.display for h, m in models.items()} | {h: h for h, _ in counts.by_model_condition
                                                          if h not in models}
    unfinished = counts.total.get(UNFINISHED, 0)
    complete = unfinished == 0 and sweep.status == SweepStatus.complete
    conditions = counts.conditions
    high_risk = high_risk_readiness(counts, labels, HIGH_RISK_MIN_REPEATS)
    simulated_parts: list[Literal["models", "judges"]] = []
    if any(m.simulated for m in spec.models):
        simulated_parts.append("models")
    if any(m.simulated for m in spec.judges):
        simulated_parts.append("judges")
    dims, tokens, fatal = score_summary(_scored_groups(session, sweep.id), labels)
    by_condition = rate_blocks(counts.by_condition)
    by_model_condition = rate_blocks({(labels[h], h, c): n for (h, c), n in counts.by_model_condition.items()})
    by_fixture_condition = rate_blocks(counts.by_fixture_condition)
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
        cost=_cost(session, sweep.id, models, labels),
        high_risk=high_risk,
        comparisons=_comparisons(session, sweep.id, conditions, labels, high_risk.ready),
        exclusion_balance=exclusion_balance(counts.by_model_condition, labels, COMPARISONS),
        human_decisions=human_decisions(session, sweep.id),
        # Read only when the counts show no scored cell: the reasons need a pass over the cells.
        no_scored_cell=why_unscored(session, sweep.id) if _nothing_scored(counts.total) else None,
        written_tool_calls=written_tool_call_cells(session, sweep.id),
    )
    return ComputedSummary(head, FixtureRows(by_fixture_condition, frozenset(counts.high_risk_fixtures)))


def _nothing_scored(total: dict[str, int]) -> bool:
    return total.get(PASS, 0) + total.get(FAIL, 0) == 0 and sum(total.values()) > total.get(UNFINISHED, 0)


def _state_counts(session: Session, sweep_id: str) -> StateCounts:
    """Cells counted by fixture, condition, model, phase and state, folded into the summary's groupings as
    the grouped rows stream by (scoring.rates.StateCounts), in fixture order: a row per model and fixture,
    never held."""
    fixture_keys = (col(Cell.fixture_id), col(Cell.fixture_version), col(Cell.condition))
    cols = (*fixture_keys, col(Cell.model_hash), col(Cell.high_risk), col(Cell.phase), col(Cell.state))
    q = (select(*cols, func.count().label("cells")).where(col(Cell.sweep_id) == sweep_id).group_by(*cols)
         .order_by(*fixture_keys).execution_options(yield_per=1000))
    return StateCounts.of(
        StateRow(model_hash=r.model_hash, condition=r.condition, fixture_id=r.fixture_id,
                 fixture_version=r.fixture_version, high_risk=bool(r.high_risk), done=r.phase == Phase.done,
                 state=r.state, cells=r.cells)
        for r in session.execute(q))


# ---------------------------------------------------------------- scores, fatal criteria, tokens, cost


def is_latest_result() -> ColumnElement[bool]:
    """Condition: this Result row is its cell's latest scoring run. An anti-join on the (cell_id,
    scoring_run) unique index, so every plan is an index lookup per row, even before the planner
    has statistics (a grouped max() subquery joined back can go quadratic on a fresh PostgreSQL)."""
    newer = aliased(Result)
    return ~exists().where(col(newer.cell_id) == Result.cell_id, col(newer.scoring_run) > Result.scoring_run)


def _scored_groups(session: Session, sweep_id: str) -> list[ScoredGroup]:
    """Scored cells joined to their latest result and the attempt it judged (else the latest attempt),
    grouped by (model_hash, condition, state, fatal_criterion): count, score sums and counts,
    output-token sum and count."""
    newest = aliased(Attempt)
    judged = func.coalesce(Result.details["attempt_id"].as_integer(),
                           select(func.max(newest.id)).where(col(newest.cell_id) == Cell.id).scalar_subquery())
    sums = [agg(getattr(Result, name)).label(f"{name}_{kind}")
            for name in MEANS for kind, agg in (("sum", func.sum), ("n", func.count))]
    keys = (col(Cell.model_hash), col(Cell.condition), col(Cell.state), col(Result.fatal_criterion))
    q = (select(*keys, func.count().label("cells"), *sums,
                func.sum(Attempt.output_tokens).label("tokens_sum"),
                func.count(col(Attempt.output_tokens)).label("tokens_n"))
         .select_from(Cell)
         .join(Result, col(Result.cell_id) == Cell.id)
         .outerjoin(Attempt, col(Attempt.id) == judged)
         .where(col(Cell.sweep_id) == sweep_id, col(Cell.phase) == Phase.done, col(Cell.state).in_(SCORED),
                is_latest_result())
         .group_by(*keys))
    out = []
    for r in session.execute(q).all():
        row = r._mapping
        out.append(ScoredGroup(
            model_hash=r.model_hash, condition=r.condition, state=r.state, fatal_criterion=r.fatal_criterion,
            cells=int(r.cells),
            scores={n: Sum(int(row[f"{n}_sum"] or 0), int(row[f"{n}_n"] or 0)) for n in MEANS},
            output_tokens=Sum(int(r.tokens_sum or 0), int(r.tokens_n or 0))))
    return out


def _cost(session: Session, sweep_id: str, models: dict[str, ModelSpec], labels: dict[str, str]) -> Cost:
    kinds = {"input": Attempt.input_tokens, "output": Attempt.output_tokens, "cached": Attempt.cached_tokens,
             "reasoning": Attempt.reasoning_tokens}
    q = (select(col(Cell.model_hash), func.count(col(Attempt.id)).label("attempts"),
                *[func.coalesce(func.sum(column), 0).label(kind) for kind, column in kinds.items()])
         .join(Cell, col(Cell.id) == Attempt.cell_id).where(col(Cell.sweep_id) == sweep_id).group_by(Cell.model_hash))
    rows = []
    for r in session.execute(q).all():
        row = r._mapping
        tokens = TokenCounts.model_validate({kind: int(row[kind]) for kind in kinds})
        model = models.get(r.model_hash)
        rows.append(CostRow(model=labels.get(r.model_hash, r.model_hash), model_hash=r.model_hash,
                            attempts=r.attempts, tokens=tokens,
                            usd=token_cost(model.family, model.prices, tokens) if model else None,
                            prices=model.prices if model else None))
    return Cost(by_model=rows, sweep_usd=sum(r.usd for r in rows if r.usd is not None), rule=COST_RULE)


# ---------------------------------------------------------------- paired comparisons


def _pair_units(session: Session, sweep_id: str, conditions: list[str]) -> list[PairUnit]:
    """Matched units (model, fixture, version, repeat) with each condition's scored state, counted by
    (model_hash, state under each condition). One GROUP BY over the cell table, no self-join: the
    plan cannot turn quadratic, whatever the planner's statistics."""
    per_condition = [func.max(case((col(Cell.condition) == c, Cell.state))).label(f"s_{c}") for c in conditions]
    units = (select(col(Cell.model_hash), *per_condition)
             .where(col(Cell.sweep_id) == sweep_id, col(Cell.phase) == Phase.done, col(Cell.state).in_(SCORED))
             .group_by(Cell.model_hash, Cell.fixture_id, Cell.fixture_version, col(Cell.repeat))
             .subquery())
    cols = [units.c.model_hash, *[units.c[f"s_{c}"] for c in conditions]]
    q = select(*cols, func.count().label("units")).group_by(*cols)
    return [PairUnit(model_hash=r.model_hash, states={c: r._mapping[f"s_{c}"] for c in conditions}, units=r.units)
            for r in session.execute(q).all()]


def _comparisons(session: Session, sweep_id: str, conditions: list[str], labels: dict[str, str],
                 ready: bool) -> list[Comparison]:
    out: list[Comparison] = []
    units = _pair_units(session, sweep_id, conditions) if ready else []
    for first, second in COMPARISONS:
        if first not in conditions or second not in conditions:
            continue
        tables = pair_tables(units, first, second)
        for h in sorted(labels, key=lambda k: (labels[k], k)):
            head = ComparisonHead(model=labels[h], model_hash=h, comparison=f"{first} vs {second}",
                                  first=first, second=second)
            if not ready:
                out.append(PendingComparison(**head.model_dump(), reading=PENDING_READING))
            else:
                out.append(comparison(head, compare(first, second, tables.get(h, {}))))
    return out
