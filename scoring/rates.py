"""Rate arithmetic of a sweep summary: counts in, the protocol's readings out. Pure: no I/O, no SQL.

workers/results/aggregation.py counts in SQL (GROUP BY) and hands the grouped rows here as named
records (StateRow, folded into StateCounts as they stream; PairUnit; ScoredGroup in scoring/measures.py
for scores, tokens and cost). The readings follow the protocol:
- pass rate = MODEL_PASS / (MODEL_PASS + MODEL_FAIL); every other state and every unfinished cell is
  counted beside it (RateBlock.excluded, RateBlock.unfinished), never folded in;
- zero failures read "0/n; upper bound x%" with the exact bound 1 - 0.05^(1/n) (3/n shown only for
  n >= 30); k failures read k/n with the exact Clopper-Pearson interval (scoring.statistics);
- comparisons pair one model's cells on the same fixture and repeat, both MODEL_PASS or MODEL_FAIL
  (exact McNemar, paired difference), and read "pending" while any high-risk fixture lacks the required
  finished repeats per model and condition (HighRiskReadiness.ready).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from afpbench.scoring.states import ResultState, pass_rate
from afpbench.scoring.statistics import clopper_pearson, describe_failures, mcnemar_exact, paired_difference
from afpbench.scoring.units import points, points_interval

PASS, FAIL = ResultState.MODEL_PASS.value, ResultState.MODEL_FAIL.value
SCORED = (PASS, FAIL)
EXCLUDED: tuple[str, ...] = tuple(s.value for s in ResultState if s.value not in SCORED)
UNFINISHED = "UNFINISHED"
# A finished cell with no result state: never sent, the sweep's budget was reached (workers/cells/budget.py).
# Outside every denominator, and not an excluded state: nothing was asked of the model.
NOT_RUN = "NOT_RUN"
LACKING_SHOWN = 50  # high-risk groups listed by name (all are counted)
Key = TypeVar("Key", bound=str | tuple[str, ...])


class Contract(BaseModel):
    """Base of the summary's JSON contract: exactly these fields, nothing else."""

    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- pass rates


@dataclass(frozen=True, slots=True)
class StateRow:
    """One group of a sweep's cells with the same model, condition, fixture, phase and state."""

    model_hash: str
    condition: str
    fixture_id: str
    fixture_version: str
    high_risk: bool
    done: bool  # the cell reached its final phase
    state: str | None
    cells: int

    @property
    def outcome(self) -> str:
        """The result state of a finished cell (NOT_RUN without one), else UNFINISHED."""
        if not self.done:
            return UNFINISHED
        return self.state or NOT_RUN


class RateBlock(Contract):
    """Pass rate with its exact interval, the failure reading, and every excluded state beside them."""

    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)

    passed: int = Field(validation_alias=AliasChoices("pass", "passed"), serialization_alias="pass")
    failed: int = Field(validation_alias=AliasChoices("fail", "failed"), serialization_alias="fail")
    n: int = Field(description="the denominator: MODEL_PASS + MODEL_FAIL")
    pass_rate: float | None
    pass_rate_ci95: tuple[float, float] | None = Field(description="exact Clopper-Pearson interval")
    failures: str = Field(description="the failure reading (zero failures: the exact upper bound)")
    excluded: dict[str, int] = Field(description="every state outside the denominator, zeros included")
    unfinished: int
    not_run: int = Field(default=0, description="cells never sent: the sweep's budget was reached")
    cells: int


def rate_block(counts: Mapping[str, int]) -> RateBlock:
    p, f = counts.get(PASS, 0), counts.get(FAIL, 0)
    n = p + f
    return RateBlock(
        passed=p,
        failed=f,
        n=n,
        pass_rate=pass_rate(p, f),
        pass_rate_ci95=clopper_pearson(p, n) if n else None,
        failures=describe_failures(f, n),
        excluded={s: counts.get(s, 0) for s in EXCLUDED},
        unfinished=counts.get(UNFINISHED, 0),
        not_run=counts.get(NOT_RUN, 0),
        cells=sum(counts.values()),
    )


def rate_blocks(groups: Mapping[Key, Mapping[str, int]]) -> dict[Key, RateBlock]:
    """One rate block per group, in key order. Groups with the same counts share one block: a sweep's
    10,000 fixtures have a handful of distinct counts, and a block (its exact interval computed) is ~1 KB."""
    blocks: dict[tuple[tuple[str, int], ...], RateBlock] = {}
    by_key: dict[Key, RateBlock] = {}
    for key, counts in sorted(groups.items()):
        same = tuple(sorted(counts.items()))
        if same not in blocks:
            blocks[same] = rate_block(counts)
        by_key[key] = blocks[same]
    return by_key


class StateCounts:
    """A sweep's state rows counted into every grouping the summary reports, as they stream by: the whole
    sweep, each condition, each (model_hash, condition), each (fixture_id, fixture_version, condition),
    and the finished repeats of each (model_hash, fixture_id, fixture_version, condition) of a high-risk
    fixture. The rows are never held: a 100,000-cell sweep over 100 models has 100,000 of them (12 MB at
    the end of its run). Each grouping maps its key to cells per outcome.

    Rows in (fixture_id, fixture_version, condition) order keep one fixture group open at a time; a closed
    group's counts are shared with every earlier group that had the same ones (a sweep's fixtures have a
    handful of distinct counts). Rows in another order give the same counts, held less compactly."""

    def __init__(self) -> None:
        self.total: dict[str, int] = defaultdict(int)
        self.by_condition: dict[str, dict[str, int]] = {}
        self.by_model_condition: dict[tuple[str, str], dict[str, int]] = {}
        self.by_fixture_condition: dict[tuple[str, str, str], Mapping[str, int]] = {}
        self.high_risk_finished: dict[tuple[str, str, str, str], int] = defaultdict(int)
        self._shared: dict[tuple[tuple[str, int], ...], Mapping[str, int]] = {}
        self._open: tuple[tuple[str, str, str], dict[str, int]] | None = None

    @classmethod
    def of(cls, rows: Iterable[StateRow]) -> StateCounts:
        counts = cls()
        for row in rows:
            counts._add(row)
        counts._close()
        return counts

    def _add(self, row: StateRow) -> None:
        outcome, cells = row.outcome, row.cells
        self.total[outcome] += cells
        _plus(self.by_condition.setdefault(row.condition, {}), outcome, cells)
        _plus(self.by_model_condition.setdefault((row.model_hash, row.condition), {}), outcome, cells)
        key = (row.fixture_id, row.fixture_version, row.condition)
        if self._open is None or self._open[0] != key:
            self._close()
            self._open = (key, {})
        _plus(self._open[1], outcome, cells)
        if row.high_risk:  # any terminal state is a finished repeat; a queued one is not
            finished = (row.model_hash, row.fixture_id, row.fixture_version, row.condition)
            self.high_risk_finished[finished] += cells if outcome not in (UNFINISHED, NOT_RUN) else 0

    def _close(self) -> None:
        if self._open is None:
            return
        key, counts = self._open
        self._open = None
        for outcome, cells in self.by_fixture_condition.get(key, {}).items():  # the key came before: rows out of order
            _plus(counts, outcome, cells)
        self.by_fixture_condition[key] = self._shared.setdefault(tuple(sorted(counts.items())), counts)

    @property
    def cells(self) -> int:
        return sum(self.total.values())

    @property
    def conditions(self) -> list[str]:
        return sorted(self.by_condition)

    @property
    def high_risk_fixtures(self) -> set[tuple[str, str]]:
        """(fixture_id, fixture_version) of every high-risk fixture in the sweep."""
        return {(f, v) for (_, f, v, _) in self.high_risk_finished}


def _plus(counts: dict[str, int], outcome: str, cells: int) -> None:
    counts[outcome] = counts.get(outcome, 0) + cells


# ---------------------------------------------------------------- high-risk readiness


class LackingGroup(Contract):
    model: str
    fixture: str = Field(description="fixture_id@fixture_version")
    condition: str
    finished_repeats: int


class HighRiskReadiness(Contract):
    fixtures: list[str]
    required_repeats: int
    ready: bool = Field(description="every model x high-risk fixture x condition has the required repeats")
    lacking_count: int
    lacking: list[LackingGroup] = Field(description=f"the first {LACKING_SHOWN} groups that lack repeats")


def high_risk_readiness(counts: StateCounts, labels: Mapping[str, str], required: int) -> HighRiskReadiness:
    """Finished (terminal) repeats per model x high-risk fixture x condition against the minimum."""
    finished = counts.high_risk_finished
    lacking = [LackingGroup(model=labels[h], fixture=f"{f}@{v}", condition=c, finished_repeats=n)
               for (h, f, v, c), n in sorted(finished.items()) if n < required]
    return HighRiskReadiness(
        fixtures=sorted({f"{f}@{v}" for (_, f, v, _) in finished}),
        required_repeats=required,
        ready=not lacking,
        lacking_count=len(lacking),
        lacking=lacking[:LACKING_SHOWN],
    )


def pending_reading(required: int) -> str:
    return f"pending: high-risk fixtures need >={required} repeats per condition"


# ---------------------------------------------------------------- paired comparisons

PairTable = Mapping[tuple[bool, bool], int]  # (first passed, second passed) -> matched units


@dataclass(frozen=True, slots=True)
class PairUnit:
    """Matched units (model, fixture, version, repeat) with the same scored state under each condition."""

    model_hash: str
    states: Mapping[str, str | None]  # condition -> MODEL_PASS / MODEL_FAIL, None where not scored
    units: int


def pair_tables(units: Iterable[PairUnit], first: str, second: str) -> dict[str, dict[tuple[bool, bool], int]]:
    """Per model: counts of (first passed, second passed) over units scored under both conditions."""
    tables: dict[str, dict[tuple[bool, bool], int]] = defaultdict(lambda: defaultdict(int))
    for u in units:
        a, b = u.states.get(first), u.states.get(second)
        if a is not None and b is not None:
            tables[u.model_hash][(a == PASS, b == PASS)] += u.units
    return tables


class PairCounts(Contract):
    n_pairs: int
    both_pass: int
    b: int = Field(description="first passed, second failed")
    c: int = Field(description="first failed, second passed")
    both_fail: int


class NoPairs(PairCounts):
    status: Literal["no matched pairs"] = "no matched pairs"
    reading: str


class PairedTest(PairCounts):
    status: Literal["ok"] = "ok"
    p_value: float = Field(description="exact McNemar, two-sided")
    difference: float = Field(description="pass rate of first minus second (a fraction; shown in percentage points)")
    difference_ci95: tuple[float, float] = Field(description="Newcombe's paired interval")
    reading: str


def compare(first: str, second: str, table: PairTable) -> NoPairs | PairedTest:
    """Exact McNemar and the paired difference (first minus second) from a 2x2 table of matched pairs."""
    b, c = table.get((True, False), 0), table.get((False, True), 0)
    n = sum(table.values())
    both_pass, both_fail = table.get((True, True), 0), table.get((False, False), 0)
    if n == 0:
        return NoPairs(n_pairs=0, both_pass=0, b=0, c=0, both_fail=0,
                       reading=f"{first} vs {second}: no matched pairs")
    pairs: Sequence[tuple[bool, bool]] = [pair for pair, k in table.items() for _ in range(k)]
    diff, low, high = paired_difference(pairs)
    p = mcnemar_exact(b, c)
    reading = (f"{first} vs {second}: pass rate difference {points(diff)} (95% CI {points_interval(low, high)}); "
               f"exact McNemar p = {p:.4g} (b={b}, c={c}, {n} matched pairs)")
    return PairedTest(n_pairs=n, both_pass=both_pass, b=b, c=c, both_fail=both_fail, p_value=p, difference=diff,
                      difference_ci95=(low, high), reading=reading)
