"""What a sweep summary measures beside the pass rate: mean rubric scores, fatal failures by
criterion, mean output tokens of the scored answer, and cost from declared prices. Pure: no I/O, no SQL.

workers/results/aggregation.py groups scored cells in SQL and hands the groups here as ScoredGroup
records; scoring/rates.py holds the pass rates, the high-risk readiness and the paired comparisons.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import Field

from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.rates import FAIL, Contract

MEANS = (*DIMENSIONS, "total")  # the score columns averaged over scored cells
COST_RULE = (
    "USD = tokens x declared price per million. Cached input tokens are priced at the cached rate and "
    "removed from the input count where the provider's usage report counts them inside it; reasoning "
    "tokens likewise from output. A cached or reasoning price of 0 means 'not declared': those tokens "
    "are priced at the input or output rate. Every attempt counts, retries included, and every judge "
    "call (swapped re-judges and parse retries included) at its judge's prices."
)


# ---------------------------------------------------------------- scores, fatal criteria, output tokens


@dataclass(frozen=True, slots=True)
class Sum:
    """A column's sum over the non-null values and their count."""

    total: int = 0
    count: int = 0

    def __add__(self, other: Sum) -> Sum:
        return Sum(self.total + other.total, self.count + other.count)

    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass(frozen=True, slots=True)
class ScoredGroup:
    """Scored cells of one model and condition with the same state and fatal criterion."""

    model_hash: str
    condition: str
    state: str
    fatal_criterion: str | None
    cells: int
    scores: Mapping[str, Sum]  # per name in MEANS
    output_tokens: Sum  # of the attempt each latest result judged


@dataclass(slots=True)
class _Totals:
    scores: dict[str, Sum] = field(default_factory=lambda: {n: Sum() for n in MEANS})
    output_tokens: Sum = field(default_factory=Sum)

    def add(self, scores: Mapping[str, Sum], output_tokens: Sum) -> None:
        for name in MEANS:
            self.scores[name] += scores.get(name, Sum())
        self.output_tokens += output_tokens


class ScoreMeans(Contract):
    """Mean rubric score per dimension (0-2) and total (0-8); None where nothing was scored."""

    task_correctness: float | None
    evidence_discipline: float | None
    uncertainty_handling: float | None
    failure_control: float | None
    total: float | None
    n_scored: int = Field(description="cells with a total score")


class ConditionScores(ScoreMeans):
    condition: str


class ModelConditionScores(ScoreMeans):
    model: str
    condition: str


class Dimensions(Contract):
    by_condition: list[ConditionScores]
    by_model_condition: list[ModelConditionScores]


class TokenMean(Contract):
    mean_output_tokens: float | None
    n: int


class ConditionTokens(TokenMean):
    condition: str


class ModelConditionTokens(TokenMean):
    model: str
    condition: str


class OutputTokens(Contract):
    by_condition: list[ConditionTokens]
    by_model_condition: list[ModelConditionTokens]


class FatalByCriterion(Contract):
    by_condition: dict[str, dict[str, int]] = Field(description="fatal failures per condition and criterion")
    fail_without_fatal: dict[str, int] = Field(description="MODEL_FAIL below the pass rule, no fatal criterion")


def _means(t: _Totals) -> dict[str, float | int | None]:
    return {**{n: t.scores[n].mean() for n in MEANS}, "n_scored": t.scores["total"].count}


def score_summary(groups: Iterable[ScoredGroup],
                  labels: Mapping[str, str]) -> tuple[Dimensions, OutputTokens, FatalByCriterion]:
    """Mean score per dimension (and total), mean output tokens, fatal failures by criterion: per
    condition, and per model x condition (ordered by model label)."""
    per_model: dict[tuple[str, str], _Totals] = defaultdict(_Totals)
    pooled: dict[str, _Totals] = defaultdict(_Totals)
    fatal: dict[str, dict[str, int]] = defaultdict(dict)
    below_rule: dict[str, int] = defaultdict(int)
    for g in groups:
        per_model[(g.model_hash, g.condition)].add(g.scores, g.output_tokens)
        pooled[g.condition].add(g.scores, g.output_tokens)
        if g.state == FAIL and g.fatal_criterion:
            fatal[g.condition][g.fatal_criterion] = fatal[g.condition].get(g.fatal_criterion, 0) + g.cells
        elif g.state == FAIL:
            below_rule[g.condition] += g.cells
    ordered = sorted(per_model.items(), key=lambda kv: (labels.get(kv[0][0], kv[0][0]), kv[0][1]))
    by_condition = sorted(pooled.items())
    dims = Dimensions(
        by_condition=[ConditionScores.model_validate({"condition": c, **_means(t)}) for c, t in by_condition],
        by_model_condition=[ModelConditionScores.model_validate({"model": labels.get(h, h), "condition": c,
                                                                 **_means(t)}) for (h, c), t in ordered])
    tokens = OutputTokens(
        by_condition=[ConditionTokens(condition=c, mean_output_tokens=t.output_tokens.mean(),
                                      n=t.output_tokens.count) for c, t in by_condition],
        by_model_condition=[ModelConditionTokens(model=labels.get(h, h), condition=c,
                                                 mean_output_tokens=t.output_tokens.mean(), n=t.output_tokens.count)
                            for (h, c), t in ordered])
    fatal_out = FatalByCriterion(by_condition={c: dict(sorted(v.items())) for c, v in sorted(fatal.items())},
                                 fail_without_fatal=dict(sorted(below_rule.items())))
    return dims, tokens, fatal_out


# ---------------------------------------------------------------- cost


class TokenCounts(Contract):
    input: int
    output: int
    cached: int
    reasoning: int


class PerMillion(Protocol):
    """Declared US dollars per million tokens (workers.sweeps.prices.Prices has this shape)."""

    @property
    def input_per_mtok(self) -> float: ...
    @property
    def output_per_mtok(self) -> float: ...
    @property
    def cached_per_mtok(self) -> float: ...
    @property
    def reasoning_per_mtok(self) -> float: ...


class TokenCounting(Protocol):
    """How a provider's usage report nests its counts: each provider family's adapter says
    (`usage_counting`, workers/providers/; passed in as data: scoring does not read the provider table)."""

    @property
    def cached_inside_input(self) -> bool: ...
    @property
    def reasoning_inside_output(self) -> bool: ...


def token_cost(counting: TokenCounting, prices: PerMillion, tokens: TokenCounts) -> float:
    """USD for summed token counts under COST_RULE, the counts nested as `counting` says."""
    fresh_input = tokens.input - tokens.cached if counting.cached_inside_input else tokens.input
    visible_output = tokens.output - tokens.reasoning if counting.reasoning_inside_output else tokens.output
    cached_price = prices.cached_per_mtok or prices.input_per_mtok
    reasoning_price = prices.reasoning_per_mtok or prices.output_per_mtok
    usd = (max(fresh_input, 0) * prices.input_per_mtok + tokens.cached * cached_price
           + max(visible_output, 0) * prices.output_per_mtok + tokens.reasoning * reasoning_price)
    return usd / 1_000_000
