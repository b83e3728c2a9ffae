"""The plan of a sweep, before any request: a typed `Plan` of sections, each one optional field with one
render function, so `afpbench plan` (api/cli_plan.py), `run`'s one-line summary and the sealed copy all
read the same object.

Sections: `comparisons` (the power plan of every comparison of the family: workers/planning/power_plan.py
builds it from scoring/power.py) and `cost` (requests, tokens, US dollars and wall time per model and judge:
workers/planning/cost.py; a budgeted sweep's release reserves from the sealed copy). A new section is one
more optional field on
`Plan` and one more entry in SECTIONS: a function from the section to its `Rendered` text (a headline
for the one-line summary, and the lines `afpbench plan` prints).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from pydantic import Field

from afpbench.scoring.power import ComparisonPlan
from afpbench.scoring.rates import Contract
from afpbench.scoring.units import points_size
from afpbench.workers.planning.cost import CostPlan, cost_headline, render_cost


class Rendered(NamedTuple):
    headline: str  # one clause of `run`'s one-line summary
    lines: list[str]  # what `afpbench plan` prints for the section


class PlanDesign(Contract):
    """What the plan is for: the spec's matrix as it will run."""

    spec_name: str
    models: int
    conditions: list[str]
    fixtures: int
    high_risk_fixtures: int
    repeats: int
    high_risk_repeats: int = Field(description="repeats of a high-risk fixture per condition")
    cells: int


class Plan(Contract):
    design: PlanDesign
    detect: float = Field(description="the difference in pass rate to detect (the declared effect)")
    power: float
    alpha: float
    variance_from: str = Field(description='"stated defaults" or "pilot sweep <id>"')
    comparisons: list[ComparisonPlan] | None = Field(
        default=None, description="per comparison of the family: MDD, repeats and fixtures needed")
    cost: CostPlan | None = Field(
        default=None, description="per model and judge: requests, tokens, US dollars, wall time (cost.py)")

    def sections(self) -> list[Rendered]:
        return [render(value) for name, render in SECTIONS if (value := getattr(self, name)) is not None]

    def headline(self) -> str:
        """The one line `run` prints before it starts."""
        d = self.design
        head = (f"plan: {d.cells} cells ({d.models} model{'s' * (d.models != 1)} x {len(d.conditions)} conditions x "
                f"{d.fixtures} fixtures x {d.repeats} repeat{'s' * (d.repeats != 1)}")
        head += f", high-risk at {d.high_risk_repeats})" if d.high_risk_fixtures else ")"
        return "; ".join([head, *(s.headline for s in self.sections())])

    def lines(self) -> list[str]:
        out = [self.headline(), ""]
        for section in self.sections():
            out += [*section.lines, ""]
        return out[:-1]


def _comparison_lines(plans: list[ComparisonPlan]) -> Rendered:
    if not plans:
        return Rendered("no comparison (fewer than two conditions)", ["comparisons: none (fewer than two conditions)"])
    first = plans[0]
    mdds = [p.min_detectable_difference for p in plans if p.min_detectable_difference is not None]
    needed = [p.repeats_needed for p in plans]
    if len(mdds) == len(plans):
        reach = f"can detect >= {points_size(max(mdds), 0)}"
    elif not mdds:
        reach = "cannot detect any difference"
    else:
        reach = (f"can detect >= {points_size(max(mdds), 0)} ({len(plans) - len(mdds)} of {len(plans)} cannot "
                 "detect any difference)")
    more = [p.fixtures_needed for p in plans]
    reachable = [n for n in needed if n is not None]
    if len(reachable) == len(plans):
        repeats = f"{points_size(first.detect, 0)} needs {max(reachable)} repeats per condition"
    else:
        some = "" if not reachable else f" for {len(plans) - len(reachable)} of {len(plans)}"
        repeats = (f"{points_size(first.detect, 0)} is not reachable by repeats{some}"
                   + (f" (needs up to {max(n for n in more if n is not None)} fixtures)" if None not in more else ""))
    headline = (f"{len(plans)} comparison{'s' * (len(plans) != 1)} {reach} at {first.power:.0%} power "
                f"(alpha {first.alpha:g}); {repeats}")
    lines = [f"comparisons: MDD at {first.power:.0%} power (two-sided, alpha {first.alpha:g}, fixture-clustered "
             f"test), repeats per condition to detect {points_size(first.detect, 0)}"]
    if all(p.variance == first.variance for p in plans):
        lines += [_variance(first), *(f"  {p.reading}" for p in plans)]
    else:
        lines += [f"  {p.reading}\n    {_variance(p)}" for p in plans]
    return Rendered(headline, lines)


def _variance(plan: ComparisonPlan) -> str:
    v = plan.variance
    return (f"variance assumed: discordant pairs q = {v.discordance:.3g}, spread of fixtures' own differences "
            f"tau = {v.between_fixture_sd:.3g} ({v.source}: {v.note})")


def _comparisons(value: Any) -> Rendered:
    return _comparison_lines(list(value))


def _cost(value: Any) -> Rendered:
    return Rendered(cost_headline(value), render_cost(value))


# Each section: the Plan field that holds it, and its render function.
SECTIONS: tuple[tuple[str, Callable[[Any], Rendered]], ...] = (("comparisons", _comparisons), ("cost", _cost))
