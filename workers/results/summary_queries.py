"""The GROUP BY queries a sweep's summary is computed from (aggregation.py): cells counted by state,
scored cells grouped with their latest result and judged attempt, tokens and cost per model (the matched
units of the paired comparisons: comparison_rows.py). Python only ever sees grouped rows.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, case, exists, func, select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col

from afpbench.scoring.measures import COST_RULE, MEANS, ScoredGroup, Sum, TokenCounts, token_cost
from afpbench.scoring.rates import SCORED, StateCounts, StateRow
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.results.summary import Cost, CostRow
from afpbench.workers.store.models import Attempt, Cell, JudgementRow, Phase, Result
from afpbench.workers.sweeps.spec import ModelSpec


def state_counts(session: Session, sweep_id: str) -> StateCounts:
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


def scored_groups(session: Session, sweep_id: str) -> list[ScoredGroup]:
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


def sweep_cost(session: Session, sweep_id: str, models: dict[str, ModelSpec], labels: dict[str, str],
               judges: list[ModelSpec] | None = None) -> Cost:
    """Tokens and US dollars per model (every attempt, retries included) and per judge (every judge call).
    A model's attempt that rode in a provider batch (its worker is "batch:<id>", cells/batch_release.py) is
    priced at the batch prices where declared."""
    kinds = {"input": Attempt.input_tokens, "output": Attempt.output_tokens, "cached": Attempt.cached_tokens,
             "reasoning": Attempt.reasoning_tokens}
    batched = case((col(Attempt.worker).like("batch:%"), 1), else_=0).label("batched")
    q = (select(col(Cell.model_hash), batched, func.count(col(Attempt.id)).label("attempts"),
                *[func.coalesce(func.sum(column), 0).label(kind) for kind, column in kinds.items()])
         .join(Cell, col(Cell.id) == Attempt.cell_id).where(col(Cell.sweep_id) == sweep_id)
         .group_by(Cell.model_hash, batched))
    lanes: dict[str, list[CostRow]] = {}
    for r in session.execute(q).all():
        row = r._mapping
        tokens = TokenCounts.model_validate({kind: int(row[kind]) for kind in kinds})
        lanes.setdefault(r.model_hash, []).append(_cost_row(labels.get(r.model_hash, r.model_hash), r.model_hash,
                                                            r.attempts, tokens, models.get(r.model_hash),
                                                            batch_lane=bool(r.batched)))
    rows = [_summed(parts) for parts in lanes.values()]
    by_label = {j.display: j for j in judges or []}
    jq = (select(col(JudgementRow.judge_label), func.count(col(JudgementRow.id)).label("calls"),
                 func.coalesce(func.sum(JudgementRow.input_tokens), 0).label("input"),
                 func.coalesce(func.sum(JudgementRow.output_tokens), 0).label("output"))
          .join(Cell, col(Cell.id) == JudgementRow.cell_id)
          .where(col(Cell.sweep_id) == sweep_id, col(JudgementRow.judge_round) > 0).group_by(JudgementRow.judge_label))
    judge_rows = []
    for r in session.execute(jq).all():
        judge = by_label.get(r.judge_label)
        tokens = TokenCounts(input=int(r.input), output=int(r.output), cached=0, reasoning=0)
        judge_rows.append(_cost_row(r.judge_label, judge.model_hash if judge else "", r.calls, tokens, judge))
    total = sum(r.usd for r in [*rows, *judge_rows] if r.usd is not None)
    return Cost(by_model=rows, by_judge=judge_rows, sweep_usd=total, rule=COST_RULE)


def _cost_row(label: str, model_hash: str, calls: int, tokens: TokenCounts, model: ModelSpec | None,
              batch_lane: bool = False) -> CostRow:
    if model is None:
        return CostRow(model=label, model_hash=model_hash, attempts=calls, tokens=tokens, usd=None, prices=None)
    prices = model.prices.on_batch_lane() if batch_lane else model.prices
    return CostRow(model=label, model_hash=model_hash, attempts=calls, tokens=tokens,
                   usd=token_cost(adapter_for(model.provider).usage_counting, prices, tokens), prices=model.prices)


def _summed(parts: list[CostRow]) -> CostRow:
    """A model's rows of its two lanes as one."""
    tokens = TokenCounts.model_validate({k: sum(getattr(p.tokens, k) for p in parts)
                                         for k in ("input", "output", "cached", "reasoning")})
    usd = None if parts[0].usd is None else sum(p.usd or 0.0 for p in parts)
    return parts[0].model_copy(update={"attempts": sum(p.attempts for p in parts), "tokens": tokens, "usd": usd})
