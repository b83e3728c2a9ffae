"""The typed plan (workers/planning/plan.py): sections are optional fields rendered by one function each;
`run`'s one-line summary and `afpbench plan`'s text read the same object."""

from __future__ import annotations

from afpbench.scoring.power import DEFAULT_VARIANCE, plan_comparison
from afpbench.workers.planning.plan import SECTIONS, Plan, PlanDesign

DESIGN = PlanDesign(spec_name="s", models=1, conditions=["A", "D"], fixtures=8, high_risk_fixtures=3, repeats=1,
                    high_risk_repeats=3, cells=28)


def _plan(**sections: object) -> Plan:
    return Plan(design=DESIGN, detect=0.1, power=0.8, alpha=0.05, variance_from="stated defaults", **sections)


def test_a_plan_without_sections_still_states_its_design_in_one_line():
    plan = _plan()
    assert plan.sections() == [] and plan.headline() == (
        "plan: 28 cells (1 model x 2 conditions x 8 fixtures x 1 repeat, high-risk at 3)")
    assert "comparisons" in plan.model_dump(mode="json")  # the section's key is there, null


def test_the_comparisons_section_gives_the_headline_and_a_line_per_comparison_with_the_assumptions():
    """Rule: the planner states its variance assumptions (the defaults, printed) beside the figures."""
    da = plan_comparison("D", "A", DEFAULT_VARIANCE, 8, 1, 3, 3, detect=0.1)
    plan = _plan(comparisons=[da])
    assert da.min_detectable_difference is not None
    assert f"1 comparison can detect >= {da.min_detectable_difference * 100:.0f} pts" in plan.headline()
    text = "\n".join(plan.lines())
    assert da.reading in text and "q = 0.5" in text and "tau = 0.15" in text and "stated conservative defaults" in text
    assert len(plan.headline().splitlines()) == 1


def test_every_section_is_a_field_of_plan_with_a_render_function():
    assert all(name in Plan.model_fields and Plan.model_fields[name].default is None for name, _ in SECTIONS)
