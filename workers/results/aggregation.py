"""Aggregate a sweep: pass rates with exact intervals, excluded states, scores, tokens, cost, comparisons.

Counting happens in SQL (GROUP BY over cell state, the latest result per cell, the scored attempt per
cell); Python only combines the grouped tuples, so 100k cells aggregate in seconds. The statistics
come from scoring.statistics; the readings follow the protocol:
- pass rate = MODEL_PASS / (MODEL_PASS + MODEL_FAIL); every other state and every unfinished cell is
  counted beside it, never folded in;
- zero failures read "0/n; upper bound x%" (exact bound; 3/n only for n >= 30), else Clopper-Pearson;
- comparisons pair cells of one model on the same fixture and repeat, both MODEL_PASS or MODEL_FAIL,
  and read "pending" while any high-risk fixture lacks three finished repeats per model and condition.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import case, exists, func
from sqlalchemy.orm import aliased
from sqlmodel import Session, select

from afpbench.fixtures.schema import DIMENSIONS
from afpbench.scoring.states import ResultState, pass_rate
from afpbench.scoring.statistics import clopper_pearson, describe_failures, mcnemar_exact, paired_difference
from afpbench.workers.cells.completion import claim_aggregate, open_cells
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Aggregate, Attempt, Cell, Phase, Result, Sweep, SweepStatus, utcnow
from afpbench.workers.sweeps.runs import SweepNotFound
from afpbench.workers.sweeps.spec import HIGH_RISK_MIN_REPEATS, PROVIDER_FAMILIES, ModelSpec, parse_spec

PASS, FAIL = ResultState.MODEL_PASS.value, ResultState.MODEL_FAIL.value
SCORED = (PASS, FAIL)
EXCLUDED = tuple(s.value for s in ResultState if s.value not in SCORED)
UNFINISHED = "UNFINISHED"
COMPARISONS = (("C", "B"), ("D", "C"), ("C", "A"), ("B", "A"))
PENDING_READING = f"pending: high-risk fixtures need >={HIGH_RISK_MIN_REPEATS} repeats per condition"
COST_RULE = (
    "USD = tokens x declared price per million. Cached input tokens are priced at the cached rate and "
    "removed from the input count where the provider counts them inside it (OpenAI-compatible, Gemini); "
    "reasoning tokens likewise from output (OpenAI-compatible). A cached or reasoning price of 0 means "
    "'not declared': those tokens are priced at the input or output rate. Every attempt counts, "
    "retries included; judge calls are not included."
)


# ---------------------------------------------------------------- public entry points


def aggregate_sweep(sweep_id: str) -> dict[str, Any]:
    """Compute the summary and store it in the sweep's one Aggregate row (overwritten on re-run).

    A sweep with unfinished cells gets an interim summary that is returned but not stored: the
    Aggregate row is the completion claim, which belongs to whoever finishes the last cell.
    """
    with session_scope() as session:
        _sweep(session, sweep_id)
        unfinished = open_cells(session, sweep_id)
        claimed = session.get(Aggregate, sweep_id) is not None
    if not claimed and unfinished == 0:
        claim_aggregate(sweep_id, "aggregate")  # a no-op when another process claimed it meanwhile
    with session_scope() as session:
        summary = _compute(session, _sweep(session, sweep_id), interim=None)
        row = session.get(Aggregate, sweep_id)
        if row is not None:
            row.summary = summary
            row.finished_at = utcnow()
            session.add(row)
    return summary


def snapshot(sweep_id: str, interim: bool | None = True) -> dict[str, Any]:
    """The same computation, not stored; labelled interim (for a running sweep). interim=None labels it
    from the sweep itself (interim unless every cell is done and the sweep is complete)."""
    with session_scope() as session:
        return _compute(session, _sweep(session, sweep_id), interim=interim)


def stored_summary(sweep_id: str) -> dict[str, Any] | None:
    with session_scope() as session:
        row = session.get(Aggregate, sweep_id)
        return None if row is None else row.summary


def _sweep(session: Session, sweep_id: str) -> Sweep:
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise SweepNotFound(f"no sweep with id {sweep_id!r}")
    return sweep


# ---------------------------------------------------------------- the computation


def _compute(session: Session, sweep: Sweep, interim: bool | None) -> dict[str, Any]:
    spec = parse_spec(sweep.spec, f"sweep {sweep.id} spec")
    models = {m.model_hash: m for m in spec.models}
    states = _state_rows(session, sweep.id)
    # Cells carry the display label their model had at creation; the spec gives it without a scan.
    labels = {h: m.display for h, m in models.items()} | {r[0]: r[0] for r in states if r[0] not in models}
    unfinished = sum(r[-1] for r in states if _state_of(r) == UNFINISHED)
    complete = unfinished == 0 and sweep.status == SweepStatus.complete
    conditions = sorted({r[1] for r in states})
    by_model_condition = _group_blocks(states, lambda r: (labels[r[0]], r[0], r[1]))  # ordered by label
    by_fixture_condition = _group_blocks(states, lambda r: (r[2], r[3], r[1]))
    high_risk = _high_risk_readiness(states, labels)
    simulated_parts = [p for p, ms in (("models", spec.models), ("judges", spec.judges))
                       if any(m.simulated for m in ms)]
    dims, tokens, fatal = _scores_tokens_fatal(_scored_groups(session, sweep.id), labels)
    return {
        "sweep_id": sweep.id,
        "name": sweep.name,
        "status": sweep.status,
        "complete": complete,
        "interim": (not complete) if interim is None else interim,
        "simulated": bool(sweep.simulated or simulated_parts),
        "simulated_parts": simulated_parts,
        "seal_hash": sweep.seal_hash,
        "afpbench_version": sweep.afpbench_version,
        "computed_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "pass_rule": sweep.spec.get("pass_rule"),
        "notices": list(sweep.notices or []),
        "conditions": conditions,
        "models": [{"model_hash": h, "model": labels.get(h) or m.display, "provider": m.provider,
                    "simulated": m.simulated} for h, m in models.items()],
        "cells": sum(r[-1] for r in states),
        "unfinished": unfinished,
        "totals": _rate_block(_tally(states)),
        "by_condition": [{"condition": c, **b} for (c,), b in _group_blocks(states, lambda r: (r[1],)).items()],
        "by_model_condition": [{"model_hash": h, "model": labels[h], "condition": c, **b}
                               for (_, h, c), b in by_model_condition.items()],
        "by_fixture_condition": [{"fixture_id": f, "fixture_version": v, "condition": c,
                                  "high_risk": (f, v) in high_risk["fixture_keys"], **b}
                                 for (f, v, c), b in by_fixture_condition.items()],
        "dimensions": dims,
        "fatal_by_criterion": fatal,
        "output_tokens": tokens,
        "cost": _cost(session, sweep.id, models, labels),
        "high_risk": {k: v for k, v in high_risk.items() if k != "fixture_keys"},
        "comparisons": _comparisons(session, sweep.id, conditions, labels, high_risk["ready"]),
    }


def _state_rows(session: Session, sweep_id: str) -> list[tuple]:
    """(model_hash, condition, fixture_id, fixture_version, high_risk, phase, state, count)."""
    cols = (Cell.model_hash, Cell.condition, Cell.fixture_id, Cell.fixture_version, Cell.high_risk,
            Cell.phase, Cell.state)
    q = select(*cols, func.count()).where(Cell.sweep_id == sweep_id).group_by(*cols)
    return [tuple(r) for r in session.execute(q).all()]


def _state_of(row: tuple) -> str:
    return row[6] if row[5] == Phase.done and row[6] else UNFINISHED


def _tally(rows) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[_state_of(row)] += row[-1]
    return counts


def _group_blocks(rows: list[tuple], key) -> dict[tuple, dict[str, Any]]:
    groups: dict[tuple, list[tuple]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return {k: _rate_block(_tally(groups[k])) for k in sorted(groups)}


def _rate_block(counts: dict[str, int]) -> dict[str, Any]:
    """Pass rate and its exact interval, the failure reading, and every excluded state beside them."""
    p, f = counts.get(PASS, 0), counts.get(FAIL, 0)
    n = p + f
    return {
        "pass": p,
        "fail": f,
        "n": n,
        "pass_rate": pass_rate(p, f),
        "pass_rate_ci95": list(clopper_pearson(p, n)) if n else None,
        "failures": describe_failures(f, n),
        "excluded": {s: counts.get(s, 0) for s in EXCLUDED},
        "unfinished": counts.get(UNFINISHED, 0),
        "cells": sum(counts.values()),
    }


def _high_risk_readiness(rows: list[tuple], labels: dict[str, str]) -> dict[str, Any]:
    """Finished (terminal) repeats per model x high-risk fixture x condition against the minimum."""
    finished: dict[tuple, int] = defaultdict(int)
    for row in rows:
        if row[4]:
            finished[(row[0], row[2], row[3], row[1])] += row[-1] if _state_of(row) != UNFINISHED else 0
    lacking = [{"model": labels[h], "fixture": f"{f}@{v}", "condition": c, "finished_repeats": n}
               for (h, f, v, c), n in sorted(finished.items()) if n < HIGH_RISK_MIN_REPEATS]
    return {
        "fixtures": sorted({f"{f}@{v}" for (_, f, v, _) in finished}),
        "fixture_keys": {(f, v) for (_, f, v, _) in finished},
        "required_repeats": HIGH_RISK_MIN_REPEATS,
        "ready": not lacking,
        "lacking_count": len(lacking),
        "lacking": lacking[:50],
    }


# ---------------------------------------------------------------- scores, fatal criteria, tokens, cost


def is_latest_result():
    """Condition: this Result row is its cell's latest scoring run. An anti-join on the (cell_id,
    scoring_run) unique index, so every plan is an index lookup per row, even before the planner
    has statistics (a grouped max() subquery joined back can go quadratic on a fresh PostgreSQL)."""
    newer = aliased(Result)
    return ~exists().where(newer.cell_id == Result.cell_id, newer.scoring_run > Result.scoring_run)


def _scored_groups(session: Session, sweep_id: str) -> list[tuple]:
    """Scored cells joined to their latest result and the attempt it judged (else the latest attempt),
    grouped by (model_hash, condition, state, fatal_criterion): count, dimension sums and counts,
    output-token sum and count."""
    newest = aliased(Attempt)
    judged = func.coalesce(Result.details["attempt_id"].as_integer(),
                           select(func.max(newest.id)).where(newest.cell_id == Cell.id).scalar_subquery())
    fields = [getattr(Result, d) for d in DIMENSIONS] + [Result.total]
    keys = (Cell.model_hash, Cell.condition, Cell.state, Result.fatal_criterion)
    q = (select(*keys, func.count(), *[x for col in fields for x in (func.sum(col), func.count(col))],
                func.sum(Attempt.output_tokens), func.count(Attempt.output_tokens))
         .select_from(Cell)
         .join(Result, Result.cell_id == Cell.id)
         .outerjoin(Attempt, Attempt.id == judged)
         .where(Cell.sweep_id == sweep_id, Cell.phase == Phase.done, Cell.state.in_(SCORED), is_latest_result())
         .group_by(*keys))
    return [tuple(int(v or 0) if i >= 4 else v for i, v in enumerate(r)) for r in session.execute(q).all()]


def _scores_tokens_fatal(groups: list[tuple], labels: dict[str, str]) -> tuple[dict, dict, dict]:
    """Mean score per dimension (and total), mean output tokens, fatal failures by criterion:
    per condition, and per model x condition."""
    names = [*DIMENSIONS, "total"]
    width = 2 * len(names) + 2  # dimension (sum, count) pairs, then output tokens (sum, count)
    per_model: dict[tuple, list[int]] = defaultdict(lambda: [0] * width)
    fatal: dict[str, dict[str, int]] = defaultdict(dict)
    below_rule: dict[str, int] = defaultdict(int)
    for h, c, state, criterion, n, *vals in groups:
        per_model[(h, c)] = [a + b for a, b in zip(per_model[(h, c)], vals, strict=True)]
        if state == FAIL and criterion:
            fatal[c][criterion] = fatal[c].get(criterion, 0) + n
        elif state == FAIL:
            below_rule[c] += n
    pooled: dict[str, list[int]] = defaultdict(lambda: [0] * width)
    for (_, c), vals in per_model.items():
        pooled[c] = [a + b for a, b in zip(pooled[c], vals, strict=True)]

    def means(v: list[int]) -> dict[str, Any]:
        out: dict[str, Any] = {n: v[2 * i] / v[2 * i + 1] if v[2 * i + 1] else None for i, n in enumerate(names)}
        return {**out, "n_scored": v[2 * len(names) - 1]}

    def tokens(v: list[int]) -> dict[str, Any]:
        return {"mean_output_tokens": v[-2] / v[-1] if v[-1] else None, "n": v[-1]}

    ordered = sorted(per_model.items(), key=lambda kv: (labels.get(kv[0][0], kv[0][0]), kv[0][1]))
    dims = {"by_condition": [{"condition": c, **means(v)} for c, v in sorted(pooled.items())],
            "by_model_condition": [{"model": labels.get(h, h), "condition": c, **means(v)} for (h, c), v in ordered]}
    toks = {"by_condition": [{"condition": c, **tokens(v)} for c, v in sorted(pooled.items())],
            "by_model_condition": [{"model": labels.get(h, h), "condition": c, **tokens(v)} for (h, c), v in ordered]}
    fatal_out = {"by_condition": {c: dict(sorted(v.items())) for c, v in sorted(fatal.items())},
                 "fail_without_fatal": dict(sorted(below_rule.items()))}
    return dims, toks, fatal_out


def token_cost(provider: str, prices: dict[str, float], tokens: dict[str, int]) -> float:
    """USD for summed token counts under COST_RULE (prices per million tokens)."""
    family = PROVIDER_FAMILIES.get(provider, "openai")
    cached_inside_input = family in ("openai", "sim", "gemini")
    reasoning_inside_output = family in ("openai", "sim")
    cached, reasoning = tokens["cached"], tokens["reasoning"]
    fresh_input = tokens["input"] - cached if cached_inside_input else tokens["input"]
    visible_output = tokens["output"] - reasoning if reasoning_inside_output else tokens["output"]
    cached_price = prices["cached_per_mtok"] or prices["input_per_mtok"]
    reasoning_price = prices["reasoning_per_mtok"] or prices["output_per_mtok"]
    usd = (max(fresh_input, 0) * prices["input_per_mtok"] + cached * cached_price
           + max(visible_output, 0) * prices["output_per_mtok"] + reasoning * reasoning_price)
    return usd / 1_000_000


def _cost(session: Session, sweep_id: str, models: dict[str, ModelSpec], labels: dict[str, str]) -> dict:
    cols = [Attempt.input_tokens, Attempt.output_tokens, Attempt.cached_tokens, Attempt.reasoning_tokens]
    q = (select(Cell.model_hash, func.count(Attempt.id), *[func.coalesce(func.sum(c), 0) for c in cols])
         .join(Cell, Cell.id == Attempt.cell_id).where(Cell.sweep_id == sweep_id).group_by(Cell.model_hash))
    rows = []
    for h, attempts, *sums in session.execute(q).all():
        tokens = dict(zip(("input", "output", "cached", "reasoning"), (int(s) for s in sums), strict=True))
        model = models.get(h)
        usd = token_cost(model.provider, model.prices.model_dump(), tokens) if model else None
        rows.append({"model": labels.get(h, h), "model_hash": h, "attempts": attempts, "tokens": tokens,
                     "usd": usd, "prices": model.prices.model_dump() if model else None})
    priced = [r["usd"] for r in rows if r["usd"] is not None]
    return {"by_model": rows, "sweep_usd": sum(priced), "rule": COST_RULE}


# ---------------------------------------------------------------- paired comparisons


def _pair_units(session: Session, sweep_id: str, conditions: list[str]) -> list[tuple]:
    """Matched units (model, fixture, version, repeat) with each condition's scored state, counted by
    (model_hash, state under each condition). One GROUP BY over the cell table, no self-join: the
    plan cannot turn quadratic, whatever the planner's statistics."""
    per_condition = [func.max(case((Cell.condition == c, Cell.state))).label(f"s_{c}") for c in conditions]
    units = (select(Cell.model_hash, *per_condition)
             .where(Cell.sweep_id == sweep_id, Cell.phase == Phase.done, Cell.state.in_(SCORED))
             .group_by(Cell.model_hash, Cell.fixture_id, Cell.fixture_version, Cell.repeat)
             .subquery())
    cols = [units.c.model_hash, *[units.c[f"s_{c}"] for c in conditions]]
    return [tuple(r) for r in session.execute(select(*cols, func.count()).group_by(*cols)).all()]


def _pair_tables(units: list[tuple], conditions: list[str], first: str, second: str) -> dict[str, dict]:
    """Per model: counts of (first passed, second passed) over units scored under both conditions."""
    i, j = 1 + conditions.index(first), 1 + conditions.index(second)
    tables: dict[str, dict[tuple, int]] = defaultdict(lambda: defaultdict(int))
    for row in units:
        if row[i] is not None and row[j] is not None:
            tables[row[0]][(row[i] == PASS, row[j] == PASS)] += row[-1]
    return tables


def compare(first: str, second: str, table: dict[tuple[bool, bool], int]) -> dict[str, Any]:
    """Exact McNemar and the paired difference (first minus second) from a 2x2 table of matched pairs."""
    b, c = table.get((True, False), 0), table.get((False, True), 0)
    n = sum(table.values())
    out: dict[str, Any] = {"n_pairs": n, "both_pass": table.get((True, True), 0), "b": b, "c": c,
                           "both_fail": table.get((False, False), 0)}
    if n == 0:
        return {**out, "status": "no matched pairs", "reading": f"{first} vs {second}: no matched pairs"}
    pairs = [pair for pair, k in table.items() for _ in range(k)]
    diff, low, high = paired_difference(pairs)
    p = mcnemar_exact(b, c)
    reading = (f"{first} vs {second}: pass rate difference {diff:+.1%} (95% CI {low:+.1%} to {high:+.1%}); "
               f"exact McNemar p = {p:.4g} (b={b}, c={c}, {n} matched pairs)")
    return {**out, "status": "ok", "p_value": p, "difference": diff, "difference_ci95": [low, high],
            "reading": reading}


def _comparisons(session: Session, sweep_id: str, conditions: list[str], labels: dict[str, str],
                 ready: bool) -> list[dict[str, Any]]:
    out = []
    units = _pair_units(session, sweep_id, conditions) if ready else []
    for first, second in COMPARISONS:
        if first not in conditions or second not in conditions:
            continue
        tables = _pair_tables(units, conditions, first, second)
        for h in sorted(labels, key=lambda k: (labels[k], k)):
            head = {"model": labels[h], "model_hash": h, "comparison": f"{first} vs {second}",
                    "first": first, "second": second}
            if not ready:
                out.append({**head, "status": "pending", "reading": PENDING_READING})
            else:
                out.append({**head, **compare(first, second, tables.get(h, {}))})
    return out
