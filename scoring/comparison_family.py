"""The comparison family: which pairs of conditions a sweep compares.

By default every pair of the conditions the sweep runs (all six for A-D); a spec may declare its own list
instead. A pair names the later condition first ("D vs A": D's pass rate minus A's), as the protocol's
question reads: does the fuller instruction set do better than the one before it? The family is also the
set the Holm adjustment runs over (scoring/multiplicity.py), so a declared list is checked whole: an
unknown condition, a condition paired with itself or a pair given twice (in either order) is an error
naming the value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import NamedTuple

from afpbench.reference.errors import AfpbenchError
from afpbench.reference.protocol_facts import CONDITIONS


class ComparisonFamilyError(AfpbenchError, ValueError):
    """A declared comparison list that cannot be used; the message names the value."""


class ConditionPair(NamedTuple):
    """Two conditions compared: the difference is first minus second. A tuple, so it unpacks as
    (first, second) and serialises to JSON as ["D", "A"]."""

    first: str
    second: str

    @property
    def label(self) -> str:
        return f"{self.first} vs {self.second}"


def _rank(condition: str) -> int:
    return CONDITIONS.index(condition)


def default_family(conditions: Iterable[str]) -> list[ConditionPair]:
    """Every pair of the given conditions, the later condition first, ordered by first then second:
    A-D gives B vs A, C vs A, C vs B, D vs A, D vs B, D vs C. Fewer than two conditions: no pair."""
    present = sorted(set(conditions), key=_check_condition)
    pairs = [ConditionPair(later, earlier) for earlier, later in combinations(present, 2)]
    return sorted(pairs, key=lambda p: (_rank(p.first), _rank(p.second)))


def declared_family(pairs: Iterable[Sequence[str] | str],
                    conditions: Iterable[str] | None = None) -> list[ConditionPair]:
    """A declared comparison list, checked: each entry is a pair ["D", "A"] or a string "D vs A"; every
    condition is one of A-D (and, when `conditions` is given, one the sweep runs); no condition is paired
    with itself; no pair appears twice, in either order. The declared order of entries and of the two
    conditions in each is kept: a spec that asks for "A vs D" gets A minus D."""
    allowed = None if conditions is None else set(conditions)
    out: list[ConditionPair] = []
    seen: dict[frozenset[str], str] = {}
    for index, entry in enumerate(pairs):
        pair = _parse_entry(entry, index)
        for condition in pair:
            if condition not in CONDITIONS:
                raise ComparisonFamilyError(f"comparisons[{index}] {pair.label!r}: condition {condition!r} is not "
                                            f"one of {', '.join(CONDITIONS)}")
            if allowed is not None and condition not in allowed:
                raise ComparisonFamilyError(
                    f"comparisons[{index}] {pair.label!r}: condition {condition!r} is not run by this sweep "
                    f"(conditions: {', '.join(sorted(allowed, key=_rank))})")
        if pair.first == pair.second:
            raise ComparisonFamilyError(f"comparisons[{index}] {pair.label!r}: a condition compared with itself")
        key = frozenset(pair)
        if key in seen:
            raise ComparisonFamilyError(
                f"comparisons[{index}] {pair.label!r}: the same pair as {seen[key]!r}, declared twice")
        seen[key] = pair.label
        out.append(pair)
    if not out:
        raise ComparisonFamilyError("comparisons: an empty list; leave it out to compare every pair")
    return out


def _parse_entry(entry: Sequence[str] | str, index: int) -> ConditionPair:
    if isinstance(entry, str):
        parts = [p.strip() for p in entry.split(" vs ")] if " vs " in entry else []
    else:
        parts = [p.strip() if isinstance(p, str) else p for p in entry]
    if len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
        raise ComparisonFamilyError(
            f"comparisons[{index}] {entry!r}: expected two conditions, as [\"D\", \"A\"] or \"D vs A\"")
    return ConditionPair(parts[0], parts[1])


def _check_condition(condition: str) -> int:
    if condition not in CONDITIONS:
        raise ComparisonFamilyError(f"comparison condition {condition!r} is not one of {', '.join(CONDITIONS)}")
    return _rank(condition)
