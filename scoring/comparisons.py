"""One model's comparison of two conditions, whole: the exact paired figures (Newcombe's interval and the
exact McNemar p, scoring/rates.py:compare), the fixture-clustered interval and test (scoring/clustered.py),
and the Holm-adjusted p across the model's comparison family (scoring/multiplicity.py).

The family a Holm adjustment runs over is one model's declared comparisons (scoring/comparison_family.py):
the protocol's question is asked of each model ("the same model and the same visible inputs"), so models
are separate families. Within it, each comparison contributes one p-value: the clustered test's where it is
defined (the claim is about fixtures in general), else the exact McNemar p (one fixture, no discordant
pair, no spread between fixtures), and `p_source` says which. A comparison without matched pairs has no
p-value and is not in the count.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from afpbench.scoring.clustered import ClusteredDifference, ClusterTable, clustered_difference
from afpbench.scoring.comparison_family import ConditionPair
from afpbench.scoring.multiplicity import holm
from afpbench.scoring.rates import PASS, Contract, NoPairs, PairedTest, compare

PSource = Literal["clustered", "exact McNemar"]


@dataclass(frozen=True, slots=True)
class FixturePairUnit:
    """Matched units (model, fixture, version, repeat) of one fixture with the same scored state under each
    condition: scoring/rates.py PairUnit with the fixture kept, which the clustered interval needs."""

    model_hash: str
    fixture: str  # "<fixture_id>@<fixture_version>": the cluster
    states: Mapping[str, str | None]  # condition -> MODEL_PASS / MODEL_FAIL, None where not scored
    units: int


def fixture_tables(units: Iterable[FixturePairUnit], pair: ConditionPair) -> dict[str, list[ClusterTable]]:
    """Per model: one table of (first passed, second passed) per fixture, over units scored under both."""
    counts: dict[str, dict[str, dict[tuple[bool, bool], int]]] = defaultdict(lambda: defaultdict(dict))
    for u in units:
        a, b = u.states.get(pair.first), u.states.get(pair.second)
        if a is not None and b is not None:
            table = counts[u.model_hash][u.fixture]
            key = (a == PASS, b == PASS)
            table[key] = table.get(key, 0) + u.units
    return {model: [ClusterTable.of(fixture, table) for fixture, table in sorted(by_fixture.items())]
            for model, by_fixture in counts.items()}


class PairedComparison(Contract):
    comparison: str = Field(description='"<first> vs <second>"')
    first: str
    second: str
    exact: NoPairs | PairedTest = Field(description="pooled pairs: Newcombe's interval, exact McNemar p")
    clustered: ClusteredDifference | None = Field(description="fixture-clustered; None without matched pairs")
    p_value: float | None = Field(description="the p-value the family adjusts (p_source says which)")
    p_source: PSource | None
    holm_p_value: float | None = Field(default=None, description="Holm-adjusted across the model's family")
    family_size: int | None = Field(default=None, description="comparisons with a p-value in the family")


def compare_pair(pair: ConditionPair, tables: Sequence[ClusterTable], confidence: float = 0.95) -> PairedComparison:
    """One model's comparison of two conditions from its per-fixture pair tables; Holm is left to
    adjust_family, which sees the whole family."""
    pooled = {(True, True): sum(t.both_pass for t in tables), (True, False): sum(t.first_only for t in tables),
              (False, True): sum(t.second_only for t in tables), (False, False): sum(t.both_fail for t in tables)}
    exact = compare(pair.first, pair.second, pooled)
    clustered = clustered_difference(tables, confidence) if isinstance(exact, PairedTest) else None
    p: float | None = None
    source: PSource | None = None
    if clustered is not None and clustered.p_value is not None:
        p, source = clustered.p_value, "clustered"
    elif isinstance(exact, PairedTest):
        p, source = exact.p_value, "exact McNemar"
    return PairedComparison(comparison=pair.label, first=pair.first, second=pair.second, exact=exact,
                            clustered=clustered, p_value=p, p_source=source)


def adjust_family(family: Sequence[PairedComparison]) -> list[PairedComparison]:
    """The family with Holm-adjusted p-values filled in (one model's comparisons, in their order)."""
    tested = [i for i, c in enumerate(family) if c.p_value is not None]
    adjusted = dict(zip(tested, holm([family[i].p_value or 0.0 for i in tested]), strict=True))
    return [c.model_copy(update={"holm_p_value": adjusted.get(i), "family_size": len(tested)})
            for i, c in enumerate(family)]
