"""The summary's comparisons: every pair of the sweep's comparison family (the spec's `comparisons:`, else
every pair of the conditions run: scoring/comparison_family.py), per model, from the matched pairs in SQL.

Each row is scoring/comparisons.py's whole comparison (exact pooled figures, the fixture-clustered interval,
Holm across the model's family) with what the sweep could have detected: the minimum detectable difference
at the pairs it has per fixture (scoring/power.py) under the variance model the sealed plan assumed for
that comparison (`afpbench plan`, sealed by `run`; else the planner's stated defaults), and the reading of
the clustered interval against the declared effect (scoring/power_reading.py: UNDERPOWERED, never "no
difference"). The model is the plan's, not one estimated from the sweep's own pairs: a difference cannot
exceed the discordance, so a sweep that saw few discordant pairs would read "could detect nothing" of
every larger difference. The declared effect, power and alpha are the sealed plan's too. A pair whose
conditions the sweep does not run is left out: a subset compares what it contains.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import case, func, select
from sqlmodel import Session, col

from afpbench.reference.protocol_facts import HIGH_RISK_MIN_REPEATS
from afpbench.scoring.clustered import ClusterTable
from afpbench.scoring.comparison_family import ConditionPair
from afpbench.scoring.comparisons import FixturePairUnit, adjust_family, compare_pair, fixture_tables
from afpbench.scoring.power import DEFAULT_VARIANCE, Design, VarianceModel, min_detectable_difference
from afpbench.scoring.power_reading import read_comparison
from afpbench.scoring.rates import SCORED, NoPairs, PairedTest, pending_reading
from afpbench.workers.results.summary import (
    Comparison,
    ComparisonHead,
    PairedComparison,
    PendingComparison,
    UnpairedComparison,
)
from afpbench.workers.store.models import Cell, Phase

PENDING_READING = pending_reading(HIGH_RISK_MIN_REPEATS)
DEFAULT_DETECT, DEFAULT_POWER, DEFAULT_ALPHA = 0.10, 0.8, 0.05


def fixture_pair_units(session: Session, sweep_id: str, conditions: Sequence[str]) -> list[FixturePairUnit]:
    """Matched units (model, fixture, version, repeat) with each condition's scored state, counted by
    (model, fixture, state under each condition). One GROUP BY over the cell table, no self-join: the plan
    cannot turn quadratic, whatever the planner's statistics."""
    per_condition = [func.max(case((col(Cell.condition) == c, Cell.state))).label(f"s_{c}") for c in conditions]
    units = (select(col(Cell.model_hash), col(Cell.fixture_id), col(Cell.fixture_version), *per_condition)
             .where(col(Cell.sweep_id) == sweep_id, col(Cell.phase) == Phase.done, col(Cell.state).in_(SCORED))
             .group_by(Cell.model_hash, Cell.fixture_id, Cell.fixture_version, col(Cell.repeat))
             .subquery())
    cols = [units.c.model_hash, units.c.fixture_id, units.c.fixture_version,
            *[units.c[f"s_{c}"] for c in conditions]]
    q = select(*cols, func.count().label("units")).group_by(*cols)
    return [FixturePairUnit(model_hash=r.model_hash, fixture=f"{r.fixture_id}@{r.fixture_version}",
                            states={c: r._mapping[f"s_{c}"] for c in conditions}, units=r.units)
            for r in session.execute(q).all()]


def planned_effect(plan: Mapping[str, Any] | None) -> tuple[float, float, float]:
    """(detect, power, alpha) of the sealed plan (seal_components["plan"]), else the planner's defaults."""
    plan = plan or {}
    return (float(plan.get("detect", DEFAULT_DETECT)), float(plan.get("power", DEFAULT_POWER)),
            float(plan.get("alpha", DEFAULT_ALPHA)))


def planned_variance(plan: Mapping[str, Any] | None, pair: ConditionPair) -> VarianceModel:
    """The variance model the sealed plan assumed for this comparison, else the stated defaults."""
    for planned in (plan or {}).get("comparisons") or []:
        if (planned.get("first"), planned.get("second")) == pair and planned.get("variance"):
            return VarianceModel.model_validate(planned["variance"])
    return DEFAULT_VARIANCE


def paired_comparisons(session: Session, sweep_id: str, family: Sequence[ConditionPair], conditions: list[str],
                       labels: dict[str, str], ready: bool, plan: Mapping[str, Any] | None = None) -> list[Comparison]:
    """Per model (by label) its family's comparisons, in the family's order."""
    present = [p for p in family if p.first in conditions and p.second in conditions]
    units = fixture_pair_units(session, sweep_id, conditions) if ready and present else []
    tables = {pair: fixture_tables(units, pair) for pair in present}
    detect, power, alpha = planned_effect(plan)
    out: list[Comparison] = []
    for h in sorted(labels, key=lambda k: (labels[k], k)):
        heads = [ComparisonHead(model=labels[h], model_hash=h, comparison=p.label, first=p.first, second=p.second)
                 for p in present]
        if not ready:
            out += [PendingComparison(**head.model_dump(), reading=PENDING_READING) for head in heads]
            continue
        whole = adjust_family([compare_pair(p, tables[p].get(h, [])) for p in present])
        out += [_row(head, c, tables[p].get(h, []), planned_variance(plan, p), detect, power, alpha)
                for head, c, p in zip(heads, whole, present, strict=True)]
    return out


def _row(head: ComparisonHead, c: Any, tables: list[ClusterTable], variance: VarianceModel, detect: float,
         power: float, alpha: float) -> UnpairedComparison | PairedComparison:
    fields = {**head.model_dump(), **c.exact.model_dump()}
    if isinstance(c.exact, NoPairs) or c.clustered is None:
        return UnpairedComparison.model_validate(fields)
    assert isinstance(c.exact, PairedTest)
    used = [t for t in tables if t.pairs]
    design = Design(tuple(sorted(Counter(t.pairs for t in used).items())))
    mdd = min_detectable_difference(variance, design, alpha, power)
    reading = read_comparison(head.comparison, c.exact.difference, c.clustered.interval, mdd, detect,
                              c.holm_p_value, alpha)
    return PairedComparison.model_validate({
        **fields, "clustered": c.clustered, "family_p_value": c.p_value, "family_p_source": c.p_source,
        "holm_p_value": c.holm_p_value, "family_size": c.family_size or 0, "min_detectable_difference": mdd,
        "power_reading": reading})
