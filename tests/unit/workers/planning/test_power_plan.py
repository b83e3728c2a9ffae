"""The power plan of a spec (workers/planning/power_plan.py, issue 37): per comparison of the family the
MDD at the spec's fixtures and repeats and the repeats needed for --detect; the variance from a pilot
sweep or the stated defaults. All model output here is SIMULATED."""

from __future__ import annotations

import pytest

from afpbench.scoring.power import DEFAULT_VARIANCE
from afpbench.workers.errors import SweepNotFound
from afpbench.workers.planning.power_plan import STATED_DEFAULTS, design_of, power_plan
from afpbench.workers.store.db import session_scope
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import demo_spec, parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

SIM = {"provider": "sim", "model": "sim-1"}


def test_the_demo_spec_plans_six_comparisons_at_its_eight_fixtures():
    spec = demo_spec()
    facts = load_inputs(spec).fixture_facts()
    plan = power_plan(spec, facts)
    assert plan.design == design_of(spec, facts) and plan.design.cells == 56
    assert (plan.design.fixtures, plan.design.high_risk_fixtures, plan.design.high_risk_repeats) == (8, 3, 3)
    assert plan.comparisons is not None
    assert [(c.first, c.second) for c in plan.comparisons] == [
        ("B", "A"), ("C", "A"), ("C", "B"), ("D", "A"), ("D", "B"), ("D", "C")]
    assert plan.variance_from == STATED_DEFAULTS and all(c.variance == DEFAULT_VARIANCE for c in plan.comparisons)
    for c in plan.comparisons:
        assert c.min_detectable_difference is not None and 0.3 < c.min_detectable_difference <= 0.5
        assert c.repeats_needed is None and c.fixtures_needed is not None  # 10 points: only more fixtures


def test_more_repeats_lower_the_mdd_and_a_reachable_effect_gets_its_repeats():
    spec = parse_spec({"models": [SIM], "judges": [], "conditions": ["A", "D"], "repeats": 5})
    facts = load_inputs(spec).fixture_facts()
    few = power_plan(demo_spec(), load_inputs(demo_spec()).fixture_facts(), detect=0.4)
    many = power_plan(spec, facts, detect=0.4)
    assert many.comparisons is not None and few.comparisons is not None
    [da] = many.comparisons
    assert (da.first, da.second) == ("D", "A")
    assert da.min_detectable_difference is not None and few.comparisons[3].min_detectable_difference is not None
    assert da.min_detectable_difference < few.comparisons[3].min_detectable_difference
    assert da.repeats_needed is not None and da.power_at_detect >= 0.8 > few.comparisons[3].power_at_detect


def test_a_pilot_sweep_gives_the_variance_and_an_unpaired_comparison_keeps_the_defaults(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    spec = parse_spec({"name": "pilot", "judges": [], "models": [SIM], "conditions": ["A", "C", "D"]})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "pilot", spec=spec))
        for i in range(12):
            for c, passes in (("A", i < 3), ("D", i < 9)):
                cells.add(c, f"F{i % 4}", "MODEL_PASS" if passes else "MODEL_FAIL", repeat=1 + i // 4)
    plan = power_plan(spec, load_inputs(spec).fixture_facts(), pilot="pilot")
    assert plan.variance_from == "pilot sweep pilot" and plan.comparisons is not None
    by = {(c.first, c.second): c.variance for c in plan.comparisons}
    assert by[("D", "A")].source == "pilot" and by[("D", "A")].discordance == pytest.approx(6 / 12)
    assert by[("C", "A")].source == "default" and "no scored pair of C vs A" in by[("C", "A")].note
    with pytest.raises(SweepNotFound, match="--from: no sweep with id 'nope'"):
        power_plan(spec, load_inputs(spec).fixture_facts(), pilot="nope")
