"""The sweep summary's typed contract: what aggregation computes, the Aggregate row stores (its JSON, the
per-fixture rows in a column of their own: ComputedSummary, FixtureRows), and the report, the bundle and
the HTTP API read.

The rate, score, token and comparison shapes are pure and live in scoring/rates.py and
scoring/measures.py; this module adds the labels (model, condition, fixture) and the sweep's own facts
around them.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Literal, TypeVar

from pydantic import ConfigDict, Field, JsonValue
from pydantic_core import to_json

from afpbench.scoring.balance import ExclusionBalance
from afpbench.scoring.clustered import ClusteredDifference
from afpbench.scoring.comparisons import PSource
from afpbench.scoring.judge_reliability import JudgeReliability
from afpbench.scoring.measures import Dimensions, FatalByCriterion, OutputTokens, TokenCounts
from afpbench.scoring.power_reading import ComparisonReading
from afpbench.scoring.rates import Contract, HighRiskReadiness, NoPairs, PairedTest, RateBlock
from afpbench.workers.sweeps.prices import Prices

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


@dataclass(frozen=True)
class FixtureRows:
    """A summary's per-fixture rows held as their labels and the rate blocks they share
    (scoring.rates.group_blocks: 10,000 fixtures have a handful of distinct counts). As models the rows
    were ~1.3 KB each, 13 MB at 10,000 fixtures and the peak of a big run's end; the stored JSON is
    written from the shared blocks, and the models are built only for a reader that asks for them."""

    blocks: Mapping[tuple[str, str, str], RateBlock]  # (fixture_id, fixture_version, condition) -> block
    high_risk: frozenset[tuple[str, str]]  # (fixture_id, fixture_version)

    def _labels(self, key: tuple[str, str, str]) -> dict[str, str | bool]:
        fixture_id, version, condition = key
        return {"fixture_id": fixture_id, "fixture_version": version, "condition": condition,
                "high_risk": (fixture_id, version) in self.high_risk}

    def models(self) -> list[FixtureConditionRow]:
        return [labelled(FixtureConditionRow, block, **self._labels(key)) for key, block in self.blocks.items()]

    def json(self) -> str:
        """Exactly the JSON pydantic writes for `models()`: a row's fields are its block's, then its labels."""
        heads: dict[int, str] = {}  # by id: a shared block is one object, its JSON made once
        out = io.StringIO()
        out.write("[")
        for i, (key, block) in enumerate(self.blocks.items()):
            head = heads.get(id(block))
            if head is None:
                head = heads[id(block)] = block.model_dump_json()[:-1]
            out.write(f"{',' if i else ''}{head},{to_json(self._labels(key)).decode()[1:]}")
        out.write("]")
        return out.getvalue()


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
    by_judge: list[CostRow] = Field(default_factory=list, description="every judge call (`attempts`: calls)")
    sweep_usd: float = Field(description="models and judges")
    rule: str
    estimate_usd: float | None = Field(default=None, description="the cost plan's sync-lane estimate made when "
                                       "the sweep was created (workers/planning/cost.py), for comparison")


class Budget(Contract):
    """The sealed budget and what it did: cells never sent are "not run" (outside every denominator)."""

    usd: float
    spent_usd: float
    reached: bool = Field(description="the release stopped sending: spent + in flight would have passed it")
    not_run: int = Field(description="cells never sent because of the budget")


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
    """One model's comparison of two conditions with matched pairs: the exact pooled figures (Newcombe's
    interval, exact McNemar p: PairedTest), the fixture-clustered interval, the Holm-adjusted p across the
    model's comparison family, and what the sweep could have detected (scoring/comparisons.py,
    scoring/power_reading.py)."""

    clustered: ClusteredDifference = Field(description="fixture-clustered (CR2, Bell-McCaffrey df)")
    family_p_value: float | None = Field(description="the p the family adjusts (family_p_source says which)")
    family_p_source: PSource | None
    holm_p_value: float | None = Field(description="Holm-adjusted across the model's comparison family")
    family_size: int = Field(description="comparisons with a p-value in the model's family")
    min_detectable_difference: float | None = Field(
        description="smallest true difference this sweep's pairs find with 80% power (None: none is)")
    power_reading: ComparisonReading = Field(description="the interval read against the MDD; never 'no difference'")

    @property
    def clustered_ci95(self) -> tuple[float, float] | None:
        return self.clustered.interval


Comparison = Annotated[PendingComparison | UnpairedComparison | PairedComparison, Field(discriminator="status")]


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


class RerunEntry(Contract):
    """One `afpbench rerun` of the sweep (workers/cells/rerun.py): what it chose and why (the note)."""

    number: int
    at: str | None = Field(description="ISO 8601, UTC")
    states: list[str]
    model: str | None
    fixture: str | None
    cells: int = Field(description="cells reopened for new attempts")
    note: str | None = Field(description="what was fixed or documented (the protocol's rule)")


class Superseded(Contract):
    """Attempts and results a rerun superseded: kept on record, never counted (the latest result is)."""

    attempts: int
    results: int


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
    budget: Budget | None = Field(default=None, description="set when the spec declares `budget: {usd: N}`")
    reruns: list[RerunEntry] = Field(default_factory=list, description="every rerun of the sweep, oldest first")
    superseded: Superseded = Field(default_factory=lambda: Superseded(attempts=0, results=0))
    judge_reliability: JudgeReliability | None = Field(
        default=None, description="per judge and sweep: usable rate, swap consistency, agreement between "
                                  "judges and with humans, length bias; None without judges")


class RunSummary(Contract):
    """The parts of a stored SweepSummary that `afpbench run` prints (api/run_overview.py), read
    without the rest: the per-fixture rows grow with the sweep (10,000 of them took ~0.3 s to validate)."""

    model_config = ConfigDict(extra="ignore")

    exclusion_balance: ExclusionBalance
    by_model_condition: list[ModelConditionRow]
    comparisons: list[Comparison]
    no_scored_cell: str | None = None
    cost: Cost | None = None
    budget: Budget | None = None


# The SweepSummary field stored apart, in aggregate.fixture_rows: named once for the writer and the readers.
FIXTURE_ROWS = "by_fixture_condition"


@dataclass(frozen=True)
class ComputedSummary:
    """A summary as aggregation computes it: everything but the per-fixture rows, and those rows apart."""

    head: SweepSummary  # by_fixture_condition empty
    fixture_rows: FixtureRows

    def whole(self) -> SweepSummary:
        return self.head.model_copy(update={FIXTURE_ROWS: self.fixture_rows.models()})

    def head_json(self) -> str:
        """The summary's JSON without its by_fixture_condition (stored apart: FixtureRows.json)."""
        return self.head.model_dump_json(exclude={FIXTURE_ROWS})


def joined(head: str, fixture_rows: str) -> str:
    """The whole summary's JSON from the two stored parts (ComputedSummary.head_json, FixtureRows.json)."""
    head = head.strip()
    if not head.endswith("}") or head[:-1].strip() in ("{", ""):
        raise ValueError("a stored summary head is not a JSON object with fields")
    return f'{head[:-1]},"{FIXTURE_ROWS}":{fixture_rows}}}'
