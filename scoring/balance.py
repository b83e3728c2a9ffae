"""Exclusion balance: is the share of cells left out of PASS/(PASS+FAIL) the same under two conditions?

The pass rate counts only MODEL_PASS and MODEL_FAIL. When one condition loses more cells to the other
states (a disputed fatal, a provider block, an infrastructure error...) than the condition it is
compared with, the two rates are computed over different kinds of cells and the comparison can be
biased even though every cell was scored correctly: the protocol's denominator rule, taken seriously.

Per model and condition this gives the share of finished cells in each excluded state. Per model and
comparison (the same pairs as the paired pass-rate comparisons) it tests the 2x2 table
(excluded, scored) x (first condition, second condition) with a two-sided Fisher exact test
(scoring/exact.py, SciPy's definition) and flags the comparison at p < 0.05. No correction for multiple comparisons
is applied: a flag is a warning to read the rates with care, not a finding. Unfinished cells are in
neither row. Pure: counts in, readings out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import Field

from afpbench.scoring.exact import fisher_exact_two_sided
from afpbench.scoring.rates import EXCLUDED, SCORED, UNFINISHED, Contract

ALPHA = 0.05
TEST = ("two-sided Fisher exact test on the 2x2 table of excluded vs scored cells under the two "
        f"conditions (finished cells only), flagged at p < {ALPHA:g}; no multiple-comparison correction")

Counts = Mapping[tuple[str, str], Mapping[str, int]]  # (model_hash, condition) -> outcome -> cells


class ExclusionShare(Contract):
    model_hash: str
    model: str
    condition: str
    finished: int = Field(description="cells with a result state (scored + excluded)")
    scored: int = Field(description="MODEL_PASS + MODEL_FAIL: the pass rate's denominator")
    excluded: int
    excluded_share: float | None = Field(description="excluded / finished; None with no finished cell")
    by_state: dict[str, int] = Field(description="excluded cells per state, zeros included")
    share_by_state: dict[str, float | None] = Field(description="each excluded state's share of finished cells")
    unfinished: int


class BalanceTest(Contract):
    model_hash: str
    model: str
    comparison: str = Field(description='"<first> vs <second>"')
    first: str
    second: str
    first_excluded: int
    first_scored: int
    second_excluded: int
    second_scored: int
    p_value: float | None = Field(description="two-sided Fisher exact; None when a condition has no finished cell")
    flagged: bool = Field(description=f"p < {ALPHA:g}: the exclusion rates differ markedly")
    reading: str


class ExclusionBalance(Contract):
    test: str
    alpha: float
    shares: list[ExclusionShare] = Field(description="per model and condition, ordered by model label")
    comparisons: list[BalanceTest]
    flagged: int = Field(description="comparisons flagged")


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def share_of(model_hash: str, model: str, condition: str, counts: Mapping[str, int]) -> ExclusionShare:
    by_state = {s: int(counts.get(s, 0)) for s in EXCLUDED}
    scored = sum(int(counts.get(s, 0)) for s in SCORED)
    excluded = sum(by_state.values())
    finished = scored + excluded
    return ExclusionShare(
        model_hash=model_hash, model=model, condition=condition, finished=finished, scored=scored,
        excluded=excluded, excluded_share=_share(excluded, finished), by_state=by_state,
        share_by_state={s: _share(n, finished) for s, n in by_state.items()},
        unfinished=int(counts.get(UNFINISHED, 0)),
    )


def balance_test(first: ExclusionShare, second: ExclusionShare) -> BalanceTest:
    """Fisher's exact test on [[excluded, scored] first, [excluded, scored] second]."""
    head = f"{first.condition} vs {second.condition}"
    p: float | None = None
    if first.finished and second.finished:
        p = fisher_exact_two_sided(first.excluded, first.scored, second.excluded, second.scored)
    flagged = p is not None and p < ALPHA

    def side(s: ExclusionShare) -> str:
        share = "-" if s.excluded_share is None else f"{s.excluded_share:.1%}"
        return f"{s.condition} {s.excluded}/{s.finished} ({share})"

    if p is None:
        reading = f"{head}: excluded {side(first)} vs {side(second)}; not tested (no finished cell)"
    else:
        reading = f"{head}: excluded {side(first)} vs {side(second)}; Fisher exact p = {p:.4g}"
        if flagged:
            reading += "; FLAGGED: exclusion depends on the condition, PASS/(PASS+FAIL) may be biased"
    return BalanceTest(
        model_hash=first.model_hash, model=first.model, comparison=head, first=first.condition,
        second=second.condition, first_excluded=first.excluded, first_scored=first.scored,
        second_excluded=second.excluded, second_scored=second.scored, p_value=p, flagged=flagged,
        reading=reading,
    )


def exclusion_balance(counts: Counts, labels: Mapping[str, str],
                      comparisons: Iterable[tuple[str, str]]) -> ExclusionBalance:
    """Shares per (model, condition) and the test per (model, comparison) present in the counts."""
    shares = {key: share_of(key[0], labels.get(key[0], key[0]), key[1], c) for key, c in counts.items()}
    ordered = sorted(shares.values(), key=lambda s: (s.model, s.model_hash, s.condition))
    tests = []
    pairs = list(comparisons)
    for h in sorted({k[0] for k in shares}, key=lambda k: (labels.get(k, k), k)):
        for first, second in pairs:
            if (h, first) in shares and (h, second) in shares:
                tests.append(balance_test(shares[(h, first)], shares[(h, second)]))
    return ExclusionBalance(test=TEST, alpha=ALPHA, shares=ordered, comparisons=tests,
                            flagged=sum(t.flagged for t in tests))
