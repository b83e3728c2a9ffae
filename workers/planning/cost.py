"""What a sweep will cost before it runs: requests, tokens, US dollars (sync and batch lane) and wall time,
per model and per judge (judge calls count in every figure).

How the figures are made (docs/PROTOCOL.md, "Cost plan"):
- Input tokens: each fixture's prompt rendered per condition (scoring/render.py) and counted with the
  model's adapter (`Adapter.estimate_tokens`: the simulator's own word count; otherwise one token per four
  characters), tool definitions included; a tool conversation's later rounds count the same prompt again.
- Output tokens per request: the mean observed in a pilot sweep (`--pilot SWEEP`) for the same label, else
  the declared `max_tokens` (or its family's spelling), else DEFAULT_OUTPUT_TOKENS.
- Judges: per cell, the judge prompt for that fixture (scoring/judge.py) with an answer of the model's
  estimated length, times the judges, times (1 + the expected share of swapped re-judges: the pilot's,
  else DEFAULT_SWAP_SHARE). Retries and judge parse retries are not included. Over COUNTED_FIXTURES
  fixtures, an evenly spaced sample is counted and scaled by repeats to the whole set.
- Cost: the cost rule of scoring/measures.py with the declared prices; the batch lane with the declared
  batch prices (none declared: no batch figure). Wall time: per model or judge, requests over its
  declared requests_per_min and tokens over tokens_per_min, the longer; unpaced ones have none.
- The budget's reservation per cell (`ceiling_per_cell`): the declared max_tokens for output and every
  judge asked twice (swap), so that a release that reserves it never lets the spend pass the budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from afpbench.scoring.judge import build_judge_messages
from afpbench.scoring.measures import TokenCounts, token_cost
from afpbench.scoring.rates import Contract
from afpbench.scoring.render import render
from afpbench.workers.providers.base import Adapter
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.sweeps.coordinator import PLAN
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.prices import Prices
from afpbench.workers.sweeps.spec import ModelSpec, SweepSpec

DEFAULT_OUTPUT_TOKENS = 1024
DEFAULT_SWAP_SHARE = 0.25
COUNTED_FIXTURES = 256  # beyond this many fixtures, a sample of them is counted (_Counts)
_MAX_TOKEN_PARAMS = ("max_tokens", "max_completion_tokens", "max_output_tokens", "maxOutputTokens")


@dataclass(frozen=True)
class Observed:
    """What a pilot sweep measured, by model or judge label (workers/planning/pilot.py reads it)."""

    sweep_id: str
    output_per_request: Mapping[str, float]
    requests_per_cell: Mapping[str, float]
    swap_share: Mapping[str, float]  # judge label -> swapped re-judges per first judgement


class CostLine(Contract):
    role: Literal["model", "judge"]
    label: str
    requests: int
    input_tokens: int
    output_tokens: int
    sync_usd: float | None = Field(description="None: no prices declared")
    batch_usd: float | None = Field(description="None: no batch prices declared")
    wall_s: float | None = Field(description="None: no declared rate")
    ceiling_per_cell_usd: float | None = Field(description="the budget's reservation for one cell's calls")


class CostPlan(Contract):
    """The plan's cost section (workers/planning/plan.py: Plan.cost), sealed with the plan."""

    cells: int
    lines: list[CostLine]
    output_basis: str
    budget_usd: float | None
    sync_usd: float | None = Field(description="every line's sum; None when a line has no price")
    batch_usd: float | None
    wall_s: float | None = Field(description="the longest line's: models and judges paced apart run side by side")

    def ceiling_per_cell(self, model_label: str) -> float | None:
        """The budget's reservation for one cell of this model: its calls and every judge's."""
        parts = [line.ceiling_per_cell_usd for line in self.lines
                 if line.role == "judge" or line.label == model_label]
        return _total(parts)


def sealed_cost(seal_components: Mapping[str, Any]) -> CostPlan | None:
    """The cost section of the plan sealed with a sweep (workers/sweeps/coordinator.py: PLAN), if it has one."""
    cost = (seal_components.get(PLAN) or {}).get("cost")
    return CostPlan.model_validate(cost) if cost else None


def _total(parts: list[float | None]) -> float | None:
    return None if not parts or any(p is None for p in parts) else sum(p for p in parts if p is not None)


def declared_max_tokens(model: ModelSpec) -> int | None:
    for name in _MAX_TOKEN_PARAMS:
        value = model.params.get(name)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _usd(adapter: Adapter, prices: Prices, input_tokens: float, output_tokens: float,
         batch: bool = False) -> float | None:
    if not prices.declared:
        return None
    if batch:
        if prices.batch_input_per_mtok is None or prices.batch_output_per_mtok is None:
            return None
        prices = Prices(input_per_mtok=prices.batch_input_per_mtok, output_per_mtok=prices.batch_output_per_mtok)
    tokens = TokenCounts(input=round(input_tokens), output=round(output_tokens), cached=0, reasoning=0)
    return token_cost(adapter.usage_counting, prices, tokens)


def _wall(model: ModelSpec, requests: float, tokens: float) -> float | None:
    times = [requests / model.limits.requests_per_min * 60 if model.limits.requests_per_min else None,
             tokens / model.limits.tokens_per_min * 60 if model.limits.tokens_per_min else None]
    paced = [t for t in times if t is not None]
    return max(paced) if paced else None


class _Counts:
    """The prompt tokens of the whole matrix per model (every fixture's repeats x conditions) and of one
    judge pass with empty answers, counted once per adapter class (what the count depends on): a sweep of
    50 models of three families renders each prompt three times, not fifty."""

    def __init__(self, spec: SweepSpec, inputs: SweepInputs, repeats: Mapping[str, int]) -> None:
        self.spec, self.inputs = spec, inputs
        # Over COUNTED_FIXTURES fixtures, an evenly spaced sample of them is counted and scaled to the whole
        # (a 10,000-fixture set renders in about 0.65 ms a fixture: seconds the plan need not spend).
        items = list(repeats.items())
        step = math.ceil(len(items) / COUNTED_FIXTURES) if len(items) > COUNTED_FIXTURES else 1
        self.repeats = dict(items[::step])
        self.scale = sum(repeats.values()) / max(1, sum(self.repeats.values()))
        self._prompts: dict[type, int] = {}
        self._judge: dict[type, int] = {}

    def prompts(self, adapter: Adapter) -> int:
        kind = type(adapter)
        if kind not in self._prompts:
            total = 0
            for fixture_id, n in self.repeats.items():
                fixture = self.inputs.fixtures[fixture_id]
                for c in self.spec.conditions:
                    prompt = render(c, fixture, self.inputs.instructions.text(c))
                    texts = [str(m["content"]) for m in prompt.messages()] + [json.dumps(t) for t in prompt.tools]
                    total += n * sum(adapter.estimate_tokens(t) for t in texts)
            self._prompts[kind] = round(total * self.scale)
        return self._prompts[kind]

    def judge_pass(self, adapter: Adapter) -> int:
        """Every cell of one model judged once, the answers left out (added per model)."""
        kind = type(adapter)
        if kind not in self._judge:
            total = 0
            for fixture_id, n in self.repeats.items():
                messages = build_judge_messages(self.inputs.fixtures[fixture_id], "", self.inputs.judge_prompt, [])
                total += n * len(self.spec.conditions) * sum(adapter.estimate_tokens(str(m["content"]))
                                                             for m in messages)
            self._judge[kind] = round(total * self.scale)
        return self._judge[kind]


def cost_plan(spec: SweepSpec, inputs: SweepInputs, observed: Observed | None = None) -> CostPlan:
    """The cost plan of a sweep (see the module's docstring)."""
    repeats = {f.id: spec.high_risk_repeat_count() if f.high_risk else spec.repeats
               for f in inputs.fixture_facts().values()}
    per_model_cells = sum(repeats.values()) * len(spec.conditions)
    seen_out = observed.output_per_request if observed else {}
    seen_rpc = observed.requests_per_cell if observed else {}
    counts = _Counts(spec, inputs, repeats)
    lines: list[CostLine] = []
    model_out: dict[str, float] = {}
    for model in spec.models:
        adapter = adapter_for(model.provider)
        ceiling_out = declared_max_tokens(model) or DEFAULT_OUTPUT_TOKENS
        out = seen_out.get(model.display, ceiling_out)
        rpc = seen_rpc.get(model.display, 1.0)
        model_out[model.display] = out
        prompt = counts.prompts(adapter)
        requests, input_tokens = per_model_cells * rpc, prompt * rpc
        output_tokens = requests * out
        mean_in = input_tokens / max(requests, 1)
        lines.append(_line("model", model, adapter, requests, input_tokens, output_tokens,
                           _usd(adapter, model.prices, mean_in * rpc, ceiling_out * rpc)))
    cells = per_model_cells * len(spec.models)
    for judge in spec.judges:
        adapter = adapter_for(judge.provider)
        swap = (observed.swap_share.get(judge.display, DEFAULT_SWAP_SHARE) if observed else DEFAULT_SWAP_SHARE)
        ceiling_out = declared_max_tokens(judge) or DEFAULT_OUTPUT_TOKENS
        out = seen_out.get(judge.display, ceiling_out)
        base = counts.judge_pass(adapter)
        answers = sum(per_model_cells * model_out[m.display] for m in spec.models)
        requests = cells * (1 + swap)
        input_tokens = (base * len(spec.models) + answers) * (1 + swap)
        output_tokens = requests * out
        mean_in = input_tokens / max(requests, 1)
        lines.append(_line("judge", judge, adapter, requests, input_tokens, output_tokens,
                           _usd(adapter, judge.prices, 2 * mean_in, 2 * ceiling_out)))
    basis = (f"output tokens: pilot sweep {observed.sweep_id} where it has the label, else declared max_tokens "
             f"(default {DEFAULT_OUTPUT_TOKENS})" if observed else
             f"output tokens: declared max_tokens (default {DEFAULT_OUTPUT_TOKENS}); swapped re-judges: "
             f"{DEFAULT_SWAP_SHARE:.0%} of judged cells")
    paced = [line.wall_s for line in lines if line.wall_s is not None]
    return CostPlan(cells=cells, lines=lines, output_basis=basis, budget_usd=spec.budget.usd if spec.budget else None,
                    sync_usd=_total([line.sync_usd for line in lines]),
                    batch_usd=_total([line.batch_usd for line in lines]), wall_s=max(paced) if paced else None)


def _line(role: Literal["model", "judge"], model: ModelSpec, adapter: Adapter, requests: float, input_tokens: float,
          output_tokens: float, ceiling: float | None) -> CostLine:
    return CostLine(role=role, label=model.display, requests=round(requests), input_tokens=round(input_tokens),
                    output_tokens=round(output_tokens),
                    sync_usd=_usd(adapter, model.prices, input_tokens, output_tokens),
                    batch_usd=_usd(adapter, model.prices, input_tokens, output_tokens, batch=True),
                    wall_s=_wall(model, requests, input_tokens + output_tokens), ceiling_per_cell_usd=ceiling)


def cost_headline(plan: CostPlan) -> str:
    """The cost in one clause of `run`'s one-line plan."""
    requests = sum(line.requests for line in plan.lines)
    if plan.sync_usd is None:
        head = f"cost not estimated: no prices declared ({requests:,} requests, judges included)"
    else:
        head = (f"cost ${plan.sync_usd:,.2f}" + (f" (batch lane ${plan.batch_usd:,.2f})" if plan.batch_usd else "")
                + f" for {requests:,} requests, judges included")
    return head + (f"; budget ${plan.budget_usd:,.2f}" if plan.budget_usd is not None else "")


def render_cost(plan: CostPlan) -> list[str]:
    """The plan's cost section as text: one line per model and judge, then the totals."""
    def usd(v: float | None) -> str:
        return "-" if v is None else f"${v:,.4f}"

    def wall(v: float | None) -> str:
        return "unpaced" if v is None else f"{v / 60:,.1f} min"

    rows = ["cost: requests, tokens, US dollars (sync and batch lane) and wall time under the declared limits",
            f"{'':6} {'model / judge':28} {'requests':>9} {'input tok':>12} {'output tok':>12} {'sync':>12} "
            f"{'batch':>12} {'wall':>11}"]
    for x in plan.lines:
        rows.append(f"{x.role:6} {x.label[:28]:28} {x.requests:>9,} {x.input_tokens:>12,} {x.output_tokens:>12,} "
                    f"{usd(x.sync_usd):>12} {usd(x.batch_usd):>12} {wall(x.wall_s):>11}")
    rows.append(f"{'total':6} {f'{plan.cells:,} cells':28} {sum(x.requests for x in plan.lines):>9,} "
                f"{sum(x.input_tokens for x in plan.lines):>12,} {sum(x.output_tokens for x in plan.lines):>12,} "
                f"{usd(plan.sync_usd):>12} {usd(plan.batch_usd):>12} {wall(plan.wall_s):>11}")
    rows.append(plan.output_basis)
    if plan.budget_usd is not None:
        rows.append(f"budget: ${plan.budget_usd:,.2f} (sealed); the release stops sending before it would pass")
    return rows
