"""The sweep summary's typed contract: what aggregation computes, the Aggregate row stores (as
`summary.model_dump(mode="json")`), and the report, the bundle and the HTTP API read.

The rate, score, token and comparison shapes are pure and live in scoring/rates.py and
scoring/measures.py; this module adds the labels (model, condition, fixture) and the sweep's own facts
around them.
"""

from __future__ import annotations

from typing import Annotated, Literal, TypeVar

from pydantic import ConfigDict, Field, JsonValue

from afpbench.scoring.balance import ExclusionBalance
from afpbench.scoring.measures import Dimensions, FatalByCriterion, OutputTokens, TokenCounts
from afpbench.scoring.rates import Contract, HighRiskReadiness, NoPairs, PairedTest, RateBlock
from afpbench.workers.sweeps.spec import Prices

Row = TypeVar("Row", bound=RateBlock)


def labelled(row: type[Row], block: RateBlock, **labels: str | bool) -> Row:
    """A rate block with its labels beside it (the JSON rows are flat)."""
    return row.model_validate({**labels, **block.model_dump()})


class ConditionRow(RateBlock):
    condition: str


class ModelConditionRow(RateBlock):
    model_hash: str
    model: str = Field(description="the model's display label")
    condition: str


class FixtureConditionRow(RateBlock):
    fixture_id: str
    fixture_version: str
    condition: str
    high_risk: bool


class ModelEntry(Contract):
    model_hash: str
    model: str
    provider: str
    simulated: bool


class CostRow(Contract):
    model: str
    model_hash: str
    attempts: int
    tokens: TokenCounts
    usd: float | None = Field(description="None for a model the spec does not declare")
    prices: Prices | None


class Cost(Contract):
    by_model: list[CostRow]
    sweep_usd: float
    rule: str


class ComparisonHead(Contract):
    model: str
    model_hash: str
    comparison: str = Field(description='"<first> vs <second>"')
    first: str
    second: str


class PendingComparison(ComparisonHead):
    status: Literal["pending"] = "pending"
    reading: str


class UnpairedComparison(NoPairs, ComparisonHead):
    pass


class PairedComparison(PairedTest, ComparisonHead):
    pass


Comparison = Annotated[PendingComparison | UnpairedComparison | PairedComparison, Field(discriminator="status")]


def comparison(head: ComparisonHead, test: NoPairs | PairedTest) -> UnpairedComparison | PairedComparison:
    """The paired test of one model under two conditions, with the head that names them."""
    fields = {**head.model_dump(), **test.model_dump()}
    if isinstance(test, PairedTest):
        return PairedComparison.model_validate(fields)
    return UnpairedComparison.model_validate(fields)


class HumanDecisionEntry(Contract):
    """One human decision on a cell of the sweep: the trail a reader of the report must see, because a
    decision changes a verdict the sealed rules reached (and, for a pass or fail, the pass rate)."""

    adjudication_id: int
    cell_id: int
    model: str
    condition: str
    fixture: str = Field(description="fixture_id@fixture_version")
    repeat: int
    from_state: str | None = Field(description="the cell's state before the decision")
    to_state: str
    override: bool = Field(description="the cell was not GRADER_DISPUTE: a judged verdict was overridden")
    reviewer: str
    reason: str | None = Field(description="why: the override reason, else the reviewer's note")
    decided_at: str | None = Field(description="ISO 8601, UTC")


class WrittenToolCallEntry(Contract):
    """A cell whose scored answer is, or contains, a tool call written as text: scored as that text,
    never executed (scoring/written_tool_call.py)."""

    cell_id: int
    model: str
    condition: str
    fixture: str = Field(description="fixture_id@fixture_version")
    repeat: int
    state: str | None
    tools: list[str] = Field(description="the tool names written, '(not offered)' for invented ones")
    whole_answer: bool = Field(description="the answer is nothing but the written call(s)")


class SweepSummary(Contract):
    """The whole summary of one sweep: pass rates with exact intervals, excluded states beside them,
    scores, tokens, cost, high-risk readiness, paired comparisons, the exclusion balance between
    conditions and the trail of human decisions."""

    sweep_id: str
    name: str
    status: str
    complete: bool = Field(description="every cell is done and the sweep is complete")
    interim: bool
    simulated: bool
    simulated_parts: list[Literal["models", "judges"]]
    seal_hash: str | None
    afpbench_version: str | None
    computed_at: str = Field(description="ISO 8601, UTC, to the second")
    pass_rule: dict[str, JsonValue] | None = Field(description="as sealed in the spec")
    notices: list[str]
    conditions: list[str]
    models: list[ModelEntry]
    cells: int
    unfinished: int
    totals: RateBlock
    by_condition: list[ConditionRow]
    by_model_condition: list[ModelConditionRow] = Field(description="ordered by model label")
    by_fixture_condition: list[FixtureConditionRow]
    dimensions: Dimensions
    fatal_by_criterion: FatalByCriterion
    output_tokens: OutputTokens
    cost: Cost
    high_risk: HighRiskReadiness
    comparisons: list[Comparison]
    exclusion_balance: ExclusionBalance = Field(
        description="per model and condition the share of excluded cells; comparisons whose exclusion "
                    "rates differ markedly are flagged (a biased denominator)")
    human_decisions: list[HumanDecisionEntry] = Field(description="every human decision, oldest first")
    no_scored_cell: str | None = Field(
        default=None, description="set when no finished cell was scored: that nothing was measured, and why "
                                  "(workers/results/unscored.py); such figures are never final")
    written_tool_calls: list[WrittenToolCallEntry] = Field(
        default_factory=list, description="cells whose answer is a tool call written as text")


class RunSummary(Contract):
    """The parts of a stored SweepSummary that `afpbench run` prints (api/display.py:summary_json), read
    without the rest: the per-fixture rows grow with the sweep (10,000 of them took ~0.3 s to validate)."""

    model_config = ConfigDict(extra="ignore")

    exclusion_balance: ExclusionBalance
    by_model_condition: list[ModelConditionRow]
    comparisons: list[Comparison]
    no_scored_cell: str | None = None
