"""The power plan of a spec, before any request (`afpbench plan`, and `run` before it starts): per
comparison of the family (the spec's `comparisons:`, else every pair of its conditions) the minimum
detectable difference at the spec's fixtures and repeats and the repeats per condition needed to detect
the declared effect (scoring/power.py: the clustered test the report runs).

The variance model is read from a pilot sweep when one is named (its matched pairs per fixture, every
model's fixtures as clusters: scoring/power.py:estimate_variance), else the stated conservative defaults
(DEFAULT_VARIANCE), and the plan says which.
"""

from __future__ import annotations

from collections.abc import Mapping

from afpbench.scoring.clustered import ClusterTable
from afpbench.scoring.comparison_family import ConditionPair
from afpbench.scoring.comparisons import fixture_tables
from afpbench.scoring.power import DEFAULT_VARIANCE, VarianceModel, estimate_variance, plan_comparison
from afpbench.workers.errors import SweepNotFound
from afpbench.workers.planning.plan import Plan, PlanDesign
from afpbench.workers.results.comparison_rows import DEFAULT_ALPHA, DEFAULT_DETECT, DEFAULT_POWER, fixture_pair_units
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Sweep
from afpbench.workers.sweeps.fixture_map import FixtureFacts
from afpbench.workers.sweeps.spec import SweepSpec

STATED_DEFAULTS = "stated defaults"


def design_of(spec: SweepSpec, facts: Mapping[str, FixtureFacts]) -> PlanDesign:
    fixtures = len(facts)
    high_risk = sum(f.high_risk for f in facts.values())
    high_repeats = spec.high_risk_repeat_count()
    per_condition = (fixtures - high_risk) * spec.repeats + high_risk * high_repeats
    return PlanDesign(spec_name=spec.name, models=len(spec.models), conditions=list(spec.conditions),
                      fixtures=fixtures, high_risk_fixtures=high_risk, repeats=spec.repeats,
                      high_risk_repeats=high_repeats,
                      cells=len(spec.models) * len(spec.conditions) * per_condition)


def pilot_variances(sweep_id: str, family: list[ConditionPair]) -> dict[ConditionPair, VarianceModel]:
    """Per comparison the variance model a pilot sweep's scored pairs give (every model's fixtures are
    clusters); a comparison the pilot cannot pair gets the defaults, with a note saying so."""
    conditions = sorted({c for pair in family for c in pair})
    with session_scope() as session:
        if session.get(Sweep, sweep_id) is None:
            raise SweepNotFound(f"--from: no sweep with id {sweep_id!r}")
        units = fixture_pair_units(session, sweep_id, conditions)
    out: dict[ConditionPair, VarianceModel] = {}
    for pair in family:
        tables: list[ClusterTable] = [t for by_model in fixture_tables(units, pair).values() for t in by_model]
        if not any(t.pairs for t in tables):
            out[pair] = DEFAULT_VARIANCE.model_copy(
                update={"note": f"pilot sweep {sweep_id} has no scored pair of {pair.label}: defaults used"})
        else:
            out[pair] = estimate_variance(tables)
    return out


def power_plan(spec: SweepSpec, facts: Mapping[str, FixtureFacts], pilot: str | None = None,
               detect: float = DEFAULT_DETECT, power: float = DEFAULT_POWER,
               alpha: float = DEFAULT_ALPHA) -> Plan:
    """The plan with its comparisons section (module docstring)."""
    design = design_of(spec, facts)
    family = spec.comparison_family()
    variances = pilot_variances(pilot, family) if pilot else {}
    comparisons = [
        plan_comparison(pair.first, pair.second, variances.get(pair, DEFAULT_VARIANCE), max(1, design.fixtures),
                        design.repeats, design.high_risk_fixtures, design.high_risk_repeats, detect, alpha, power)
        for pair in family] if design.fixtures else []
    return Plan(design=design, detect=detect, power=power, alpha=alpha,
                variance_from=f"pilot sweep {pilot}" if pilot else STATED_DEFAULTS, comparisons=comparisons)
