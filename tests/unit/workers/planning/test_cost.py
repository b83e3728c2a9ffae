"""The cost plan (workers/planning/cost.py): what a sweep will cost before it runs, judges included.

Rules checked (docs/PROTOCOL.md, "Cost plan and budget"): requests per model are its cells; judge calls
are cells x judges x (1 + the swapped re-judge share); input tokens come from the rendered prompts counted
by the model's adapter; output tokens from the declared max_tokens (else a pilot); an unpriced model has
no cost (never $0); the batch lane needs declared batch prices; the wall time follows the declared rate;
a budget needs every model and judge priced.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from afpbench.scoring.render import render
from afpbench.workers.planning.cost import DEFAULT_SWAP_SHARE, CostPlan, Observed, cost_plan, render_cost
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec import SweepSpec

PRICED = {"input_per_mtok": 3, "output_per_mtok": 15}


def _spec(**extra) -> SweepSpec:
    model = {"provider": "sim", "model": "m", "label": "m", "prices": PRICED, "params": {"max_tokens": 500},
             "limits": {"requests_per_min": 60}}
    judge = {"provider": "sim", "model": "j", "label": "j", "params": {"max_tokens": 200},
             "prices": {"input_per_mtok": 1, "output_per_mtok": 5, "batch_input_per_mtok": 0.5,
                        "batch_output_per_mtok": 2.5}}
    return SweepSpec.model_validate({"models": [model], "judges": [judge], "fixtures": {"only": ["P01", "P02"]},
                                     "conditions": ["A", "C"], "repeats": 2, **extra})


def test_requests_tokens_and_cost_per_model_and_judge():
    spec = _spec()
    inputs = load_inputs(spec)
    plan = cost_plan(spec, inputs)
    model, judge = plan.lines
    assert plan.cells == 8 and model.requests == 8 and judge.requests == round(8 * (1 + DEFAULT_SWAP_SHARE))
    # The sim counts words: the model's input is the words of every rendered prompt, repeats included.
    words = sum(len(m["content"].split()) for f in ("P01", "P02") for c in ("A", "C")
                for m in render(c, inputs.fixtures[f], inputs.instructions.text(c)).messages())
    assert model.input_tokens >= 2 * words  # plus the tool definitions, where a fixture offers tools
    assert model.output_tokens == 8 * 500 and judge.output_tokens == round(10 * 200)
    assert model.sync_usd == pytest.approx((model.input_tokens * 3 + model.output_tokens * 15) / 1e6)
    assert model.batch_usd is None and judge.batch_usd == pytest.approx(judge.sync_usd / 2, rel=1e-3)
    assert plan.batch_usd is None, "no batch figure for the sweep while one of its models has no batch price"
    assert model.wall_s == pytest.approx(8 * 60 / 60) and judge.wall_s is None and plan.wall_s == model.wall_s
    assert plan.sync_usd == pytest.approx(model.sync_usd + judge.sync_usd)
    assert CostPlan.model_validate(plan.model_dump(mode="json")) == plan
    assert any(line.startswith("judge  j") for line in render_cost(plan))


def test_a_pilot_replaces_the_declared_output_and_swap_share():
    spec = _spec()
    plan = cost_plan(spec, load_inputs(spec), Observed("p", {"m": 100.0, "j": 50.0}, {"m": 1.0}, {"j": 0.0}))
    model, judge = plan.lines
    assert model.output_tokens == 800 and judge.requests == 8 and judge.output_tokens == 400
    # The budget's reservation stays at the declared ceiling (max_tokens, every judge twice).
    assert model.ceiling_per_cell_usd == pytest.approx(model.input_tokens / 8 * 3e-6 + 500 * 15e-6, rel=1e-3)


def test_an_unpriced_model_has_no_cost_and_a_budget_refuses_it_naming_it():
    data = _spec().model_dump(mode="json")
    data["judges"][0]["prices"] = {}
    unpriced = SweepSpec.model_validate(data)
    plan = cost_plan(unpriced, load_inputs(unpriced))
    assert plan.lines[1].sync_usd is None and plan.sync_usd is None
    with pytest.raises(ValidationError, match="judge j declares no prices"):
        SweepSpec.model_validate(data | {"budget": {"usd": 1}})


def test_a_spec_without_budget_or_batch_prices_seals_as_before():
    """Seal rule: fields added later are left out of the resolved spec while not declared, so a sweep sealed
    before them still verifies."""
    resolved = SweepSpec.model_validate({"models": [{"provider": "sim", "model": "m"}], "judges": []}).resolved()
    assert "budget" not in resolved and "batch_input_per_mtok" not in resolved["models"][0]["prices"]
    assert _spec(budget={"usd": 2}).resolved()["budget"] == {"usd": 2.0}


def test_a_large_fixture_set_is_counted_from_an_even_sample_scaled_to_the_whole(monkeypatch):
    """Over COUNTED_FIXTURES fixtures the plan counts an evenly spaced sample (here: P01 of P01, P02) and
    scales it by repeats, so planning a 10,000-fixture sweep does not render every prompt."""
    from afpbench.workers.planning import cost

    spec = _spec()
    inputs = load_inputs(spec)
    whole = cost_plan(spec, inputs).lines[0].input_tokens
    only_p01 = cost_plan(spec.model_copy(update={"fixtures": spec.fixtures.model_copy(update={"only": ["P01"]})}),
                         load_inputs(spec.model_copy(update={"fixtures": spec.fixtures.model_copy(
                             update={"only": ["P01"]})}))).lines[0].input_tokens
    monkeypatch.setattr(cost, "COUNTED_FIXTURES", 1)
    sampled = cost_plan(spec, inputs).lines[0].input_tokens
    assert sampled == 2 * only_p01 and sampled != whole
