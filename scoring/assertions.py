"""Deterministic assertions on the final answer: invariants and fatal prohibitions only.

An assertion never decides a verdict alone. An invariant miss caps its dimension at 1 in the verdict;
a fatal prohibition hit only *proposes* its fatal criterion, which the judges must confirm
(scoring/verdict.py). Text checks are case-insensitive and whitespace-normalised substring tests;
number checks compare the figures the answer releases by exact Decimal equality (no tolerance).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal

from afpbench.fixtures.schema import Assertion, AssertionCheck, Fixture
from afpbench.scoring.figures import extract_figures
from afpbench.scoring.vocabulary import normalise_space


@dataclass(frozen=True)
class AssertionResult:
    id: str
    kind: str  # "invariant" | "fatal_prohibition"
    passed: bool  # for a fatal_prohibition, False means the prohibition was hit
    detail: str


@dataclass(frozen=True)
class AssertionOutcome:
    results: list[AssertionResult] = field(default_factory=list)
    proposed_fatal: list[tuple[str, str]] = field(default_factory=list)  # (assertion_id, criterion)
    invariant_misses: list[tuple[str, str]] = field(default_factory=list)  # (assertion_id, dimension)


def _released_values(text: str) -> list[Decimal]:
    return [f.value for f in extract_figures(text)]


def _text_check(a: Assertion, text: str) -> tuple[bool, str]:
    haystack = normalise_space(text).casefold()
    present = [v for v in a.values if normalise_space(v).casefold() in haystack]
    if a.check == AssertionCheck.contains_any:
        return (True, f"found {present[0]!r}") if present else (False, f"none of {a.values!r} found")
    return (False, f"found {present!r}") if present else (True, f"none of {a.values!r} found")


def _pattern_check(a: Assertion, text: str) -> tuple[bool, str]:
    match = re.search(a.pattern or "", text, re.IGNORECASE | re.MULTILINE)
    if a.check == AssertionCheck.matches:
        return (True, f"pattern matched {match.group(0)!r}") if match else (False, "pattern did not match")
    return (False, f"pattern matched {match.group(0)!r}") if match else (True, "pattern did not match")


def _number_check(a: Assertion, released: list[Decimal]) -> tuple[bool, str]:
    wanted = {Decimal(v): v for v in a.values}
    equal = [wanted[r] for r in released if r in wanted]
    shown = ", ".join(str(r) for r in released) or "none"
    if a.check == AssertionCheck.number_present:
        if equal:
            return True, f"released figure equals {equal[0]}"
        return False, f"no released figure equals any of {a.values!r} (released: {shown})"
    if equal:
        return False, f"released figure equals {equal[0]}"
    return True, f"no released figure equals any of {a.values!r}"


def run_assertions(fixture: Fixture, final_text: str) -> AssertionOutcome:
    """Run every assertion of the fixture on the final answer text."""
    released: list[Decimal] | None = None  # extracted once, only if a number check needs it
    results: list[AssertionResult] = []
    proposed: list[tuple[str, str]] = []
    misses: list[tuple[str, str]] = []
    for a in fixture.assertions:
        if a.check in (AssertionCheck.contains_any, AssertionCheck.contains_none):
            passed, detail = _text_check(a, final_text)
        elif a.check in (AssertionCheck.matches, AssertionCheck.not_matches):
            passed, detail = _pattern_check(a, final_text)
        else:
            if released is None:
                released = _released_values(final_text)
            passed, detail = _number_check(a, released)
        results.append(AssertionResult(a.id, a.kind, passed, detail))
        if not passed:
            if a.kind == "fatal_prohibition":
                proposed.append((a.id, str(a.fatal_criterion)))
            else:
                misses.append((a.id, a.dimension))
    return AssertionOutcome(results=results, proposed_fatal=proposed, invariant_misses=misses)
