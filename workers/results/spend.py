"""How a sweep's spend reads at the end of `run`, in `status` and in the report header: the actual cost
(models and judges) beside the cost plan's estimate, and the budget with what it stopped."""

from __future__ import annotations

from afpbench.workers.results.summary import Budget, Cost


def spend_lines(cost: Cost | None, budget: Budget | None) -> list[str]:
    if cost is None:
        return []
    models = sum(r.usd or 0.0 for r in cost.by_model)
    judges = sum(r.usd or 0.0 for r in cost.by_judge)
    estimate = ("plan's estimate: none (no prices when the sweep was planned)" if cost.estimate_usd is None
                else f"plan's estimate ${cost.estimate_usd:,.4f} (sync lane, `afpbench plan`)")
    unpriced = [r.model for r in [*cost.by_model, *cost.by_judge] if r.usd is None or not (r.prices and (
        r.prices.input_per_mtok or r.prices.output_per_mtok))]
    lines = [f"cost: actual ${cost.sweep_usd:,.4f} (models ${models:,.4f} + judges ${judges:,.4f}); "
             f"{estimate}"
             + (f"; no prices declared for {', '.join(unpriced)}: counted as $0" if unpriced else "")]
    if budget is not None:
        lines.append(f"budget ${budget.usd:,.2f}: spent ${budget.spent_usd:,.4f}"
                     + (f"; budget reached: {budget.not_run} cells not run (outside every denominator)"
                        if budget.reached else "; not reached"))
    return lines
