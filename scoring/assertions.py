"""Deterministic assertions on the final answer: invariants and fatal prohibitions only.

An assertion never decides a verdict alone. An invariant miss caps its dimension at 1 in the verdict;
a fatal prohibition hit only *proposes* its fatal criterion, which the judges must confirm
(scoring/verdict.py). Text checks are case-insensitive and whitespace-normalised; number checks compare
the figures the answer releases with the assertion's values after the shared number normalisation
(scoring/numbers.py, scoring/quantities.py), by exact Decimal equality (no tolerance); a `subject` also
checks what the answer states for the named quantity (scoring/subject.py). An assertion with
`scope: own_claims` looks only at the answer's own affirmative claims (scoring/claims.py); `claims_done`
always does, and asks whether they report one of the named actions done (scoring/actions.py).

An assertion *fires* when it raises its finding (a prohibition hit, an invariant miss); `check_assertion`
runs one assertion on one text, which is also how the validity gate runs an assertion's own examples.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

from afpbench.fixtures.schema import Assertion, AssertionCheck, Fixture
from afpbench.scoring.actions import claimed_action
from afpbench.scoring.claims import own_claims
from afpbench.scoring.numbers import figures_in
from afpbench.scoring.quantities import matches, parse_quantity
from afpbench.scoring.subject import misstated


@dataclass(frozen=True)
class AssertionResult:
    id: str
    kind: str  # "invariant" | "fatal_prohibition"
    passed: bool  # for a fatal_prohibition, False means the prohibition was hit
    detail: str
    span: list[int] | None = None  # [start, end) in the answer of what the check found, if anything

    @property
    def fired(self) -> bool:
        return not self.passed


@dataclass(frozen=True)
class AssertionOutcome:
    results: list[AssertionResult] = field(default_factory=list)
    proposed_fatal: list[tuple[str, str]] = field(default_factory=list)  # (assertion_id, criterion)
    invariant_misses: list[tuple[str, str]] = field(default_factory=list)  # (assertion_id, dimension)


def _phrase(value: str) -> re.Pattern[str]:
    return re.compile(r"\s+".join(re.escape(w) for w in value.split()), re.IGNORECASE)


def _text_check(a: Assertion, text: str) -> tuple[bool, str, list[int] | None]:
    found = [(v, m) for v in a.values if v.split() and (m := _phrase(v).search(text))]
    if a.check == AssertionCheck.contains_any:
        if found:
            return True, f"found {found[0][0]!r}", list(found[0][1].span())
        return False, f"none of {a.values!r} found", None
    if found:
        return False, f"found {[v for v, _ in found]!r}", list(found[0][1].span())
    return True, f"none of {a.values!r} found", None


def _pattern_check(a: Assertion, text: str) -> tuple[bool, str, list[int] | None]:
    match = re.search(a.pattern or "", text, re.IGNORECASE | re.MULTILINE)
    span = list(match.span()) if match else None
    if a.check == AssertionCheck.matches:
        return (True, f"pattern matched {match.group(0)!r}", span) if match else (False, "pattern did not match", None)
    return (False, f"pattern matched {match.group(0)!r}", span) if match else (True, "pattern did not match", None)


@lru_cache(maxsize=64)  # one evidence per fixture, asked for every answer and every example
def _stated(sources: tuple[str, ...]) -> frozenset[Decimal]:
    """The values of the figures the evidence states."""
    return frozenset(f.value for source in sources for f in figures_in(source))


def _claims_done_check(a: Assertion, text: str) -> tuple[bool, str, list[int] | None]:
    span = claimed_action(text, a.values)
    if span is None:
        return True, f"no own claim that any of {a.values!r} was done", None
    return False, f"claims done: {text[span[0] : span[1]]!r}", list(span)


def _number_check(a: Assertion, text: str, sources: Sequence[str]) -> tuple[bool, str, list[int] | None]:
    released = figures_in(text)
    wanted = [(v, q) for v in a.values if (q := parse_quantity(v)) is not None]
    equal = next(((v, f) for f in released for v, q in wanted if matches(q, f)), None)  # the first
    span = [equal[1].start, equal[1].end] if equal else None
    if a.check == AssertionCheck.number_present:
        if not equal:
            shown = ", ".join(f.text for f in released) or "none"
            return False, f"no released figure equals any of {a.values!r} (released: {shown})", None
        stated = _stated(tuple(sources)) if a.subject else frozenset()
        wrong = misstated(a.subject, [q for _, q in wanted], text, released, stated) if a.subject else None
        if wrong is not None:
            detail = f"states {wrong.text!r} for the subject, which is none of {a.values!r}"
            return False, detail, [wrong.start, wrong.end]
        return True, f"released figure {equal[1].text!r} equals {equal[0]}", span
    if equal:
        return False, f"released figure {equal[1].text!r} equals {equal[0]}", span
    return True, f"no released figure equals any of {a.values!r}", None


def check_assertion(a: Assertion, final_text: str, sources: Sequence[str] = ()) -> AssertionResult:
    """One assertion on one text (an answer, or one of the assertion's own examples); `sources` are the
    evidence texts the model was shown (own_claims masks whole lines echoed from them)."""
    own = a.scope == "own_claims" or a.check == AssertionCheck.claims_done
    text = own_claims(final_text, sources) if own else (final_text or "")
    if a.check in (AssertionCheck.contains_any, AssertionCheck.contains_none):
        passed, detail, span = _text_check(a, text)
    elif a.check in (AssertionCheck.matches, AssertionCheck.not_matches):
        passed, detail, span = _pattern_check(a, text)
    elif a.check == AssertionCheck.claims_done:
        passed, detail, span = _claims_done_check(a, text)
    else:
        passed, detail, span = _number_check(a, text, sources)
    if span is not None:  # report what the answer says there, not the masked view
        detail = detail.replace(repr(text[span[0] : span[1]]), repr(final_text[span[0] : span[1]]))
    return AssertionResult(a.id, a.kind, passed, detail, span)


def run_assertions(fixture: Fixture, final_text: str) -> AssertionOutcome:
    """Run every assertion of the fixture on the final answer text."""
    sources = [e.text for e in fixture.evidence]
    results = [check_assertion(a, final_text, sources) for a in fixture.assertions]
    proposed = [(r.id, str(a.fatal_criterion)) for a, r in zip(fixture.assertions, results, strict=True)
                if r.fired and a.kind == "fatal_prohibition"]  # fmt: skip
    misses = [(r.id, str(a.dimension)) for a, r in zip(fixture.assertions, results, strict=True)
              if r.fired and a.kind == "invariant"]  # fmt: skip
    return AssertionOutcome(results=results, proposed_fatal=proposed, invariant_misses=misses)


def _excerpt(text: str, limit: int = 70) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")


def example_misfires(a: Assertion, sources: Sequence[str] = ()) -> list[str]:
    """What is wrong with the assertion's own examples: missing ones, or an example it misfires on
    (does not fire on a `fires_on` text, fires on a `passes_on` text). Empty when it behaves. `sources`
    are the fixture's evidence texts: an example is checked as an answer to the fixture is."""
    examples = a.examples
    if examples is None or not examples.fires_on or not examples.passes_on:
        return ["lists no examples: give at least one 'fires_on' and one 'passes_on' answer (fragment)"]
    problems = []
    for where, texts, should_fire in (("fires_on", examples.fires_on, True), ("passes_on", examples.passes_on, False)):
        for j, text in enumerate(texts):
            result = check_assertion(a, text, sources)
            if result.fired != should_fire:
                did = "fired" if result.fired else "did not fire"
                problems.append(f"examples.{where}[{j}] {_excerpt(text)}: {did} ({result.detail})")
    return problems
