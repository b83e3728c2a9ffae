"""The validity gate: per fixture, before a sweep starts (protocol: validity gate, items 1-5).

Each check has a stable name (reference/protocol.yaml validity_gate) stored with results. A fixture
that fails any check makes its cells INVALID_TEST, outside the pass-rate denominator, until corrected.
Every failure names the field and the offending value, so an author can fix it without guessing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache

from afpbench.fixtures.schema import Assertion, AssertionCheck, Fixture
from afpbench.scoring.assertions import example_misfires
from afpbench.scoring.calculator import CalculatorError, evaluate
from afpbench.scoring.derivation import DerivationError, evaluate_reference, unused_constants
from afpbench.scoring.quantities import parse_quantity
from afpbench.scoring.render import RenderedPrompt, render_user_message, tools_for
from afpbench.scoring.visibility import check_visible
from afpbench.scoring.vocabulary import find_terms

CHECKS = ("consistent", "visible_to_model", "same_requirement", "assertions_scoped", "behaviour_not_terms")


@dataclass(frozen=True)
class ValidityFailure:
    check: str
    detail: str


@dataclass(frozen=True)
class ValidityReport:
    fixture_key: str
    passed: bool
    failures: list[ValidityFailure] = field(default_factory=list)

    def failed_checks(self) -> list[str]:
        """Names of the failed checks, in gate order, each once."""
        names = {f.check for f in self.failures}
        return [c for c in CHECKS if c in names]


def _check_consistent(fx: Fixture) -> list[str]:
    problems: list[str] = []
    criteria = [f.criterion.value for f in fx.fatal_criteria]
    for dup in sorted({c for c in criteria if criteria.count(c) > 1}):
        problems.append(f"fatal_criteria: '{dup}' listed more than once")
    ids = [a.id for a in fx.assertions]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"assertions: id '{dup}' used more than once")
    for i, a in enumerate(fx.assertions):
        if a.kind == "fatal_prohibition" and a.fatal_criterion not in criteria:
            problems.append(
                f"assertions[{i}] '{a.id}': fatal_criterion '{a.fatal_criterion}' is not among the "
                f"fixture's fatal_criteria"
            )
        problems += _check_number_values(i, a)
    if fx.numeric is not None:
        problems += _check_numeric_references(fx)
    return problems


def _check_number_values(i: int, a: Assertion) -> list[str]:
    """Number values must read as quantities; a derivation must compute its value exactly."""
    if a.check not in (AssertionCheck.number_present, AssertionCheck.number_absent):
        return []
    where = f"assertions[{i}] '{a.id}'"
    problems = [
        f"{where} values[{j}] '{v}': the mark is not a known currency, unit or %"
        for j, v in enumerate(a.values) if parse_quantity(v) is None
    ]
    for value, expression in a.derivations.items():
        wanted = parse_quantity(value)
        try:
            result = evaluate(expression)
        except CalculatorError as exc:
            problems.append(f"{where} derivations['{value}'] {expression!r} does not evaluate: {exc}")
            continue
        if wanted is not None and result != wanted.value:
            problems.append(f"{where} derivations['{value}'] {expression!r} gives {result}, not {wanted.value}")
    return problems


def _check_numeric_references(fx: Fixture) -> list[str]:
    num = fx.numeric
    assert num is not None
    problems: list[str] = []
    evidence_ids = {e.id for e in fx.evidence}
    for i, sf in enumerate(num.source_fields):
        if sf.evidence_id not in evidence_ids:
            problems.append(
                f"numeric.source_fields[{i}] '{sf.id}': evidence_id '{sf.evidence_id}' does not exist"
            )
    for what, names in (
        ("source field id", [s.id for s in num.source_fields]),
        ("constant id", [c.id for c in num.constants]),
        ("transformation name", [t.name for t in num.transformations]),
        ("derivation step id", [s.id for s in num.derivation]),
    ):
        for dup in sorted({n for n in names if names.count(n) > 1}):
            problems.append(f"numeric: {what} '{dup}' declared more than once")
    declared = {"source": {s.id for s in num.source_fields}, "constant": {c.id for c in num.constants}}
    earlier: set[str] = set()
    for i, step in enumerate(num.derivation):
        for j, inp in enumerate(step.inputs):
            kind, name = inp.ref
            known = earlier if kind == "intermediate" else declared[kind]
            if name not in known:
                where = "an earlier intermediate" if kind == "intermediate" else f"a declared {kind}"
                problems.append(
                    f"numeric.derivation[{i}] '{step.id}' inputs[{j}]: {kind} '{name}' is not {where}"
                )
        earlier.add(step.id)
    if not problems:  # only evaluate a derivation whose references all resolve
        problems += _check_reference_evaluates(fx)
    return problems


def _check_reference_evaluates(fx: Fixture) -> list[str]:
    assert fx.numeric is not None
    problems = [
        f"numeric.constants '{c}' is declared but no derivation step uses it (it would widen grounding)"
        for c in unused_constants(fx.numeric)
    ]
    try:
        evaluate_reference(fx.numeric)
    except DerivationError as exc:
        problems.append(f"numeric.derivation: the reference derivation does not evaluate: {exc}")
    return problems


def _check_same_requirement(fx: Fixture, prompts: dict[str, RenderedPrompt]) -> list[str]:
    # Every condition must carry exactly the fixture's own rendering, so the odd one out is named.
    expected_user = render_user_message(fx)
    expected_tools = json.dumps(tools_for(fx))
    problems = []
    for condition in sorted(prompts):
        p = prompts[condition]
        if p.user != expected_user:
            problems.append(
                f"condition {condition} user message differs from the fixture's task and evidence"
            )
        if json.dumps(p.tools) != expected_tools:
            problems.append(f"condition {condition} tools differ from the tools offered for this fixture")
    return problems


def _pattern_terms(pattern: str, terms: frozenset[str]) -> list[str]:
    """Terms a regex names: written literally, spelled out word by word (`evidence\\s+ledger`), or
    matched in full by a pattern that spells out one of the term's words (`(evidence|audit) ledger`);
    a generic pattern like `\\w+` names nothing."""
    spelled = re.findall(r"[a-z]+", re.sub(r"\\[A-Za-z]", " ", pattern).casefold())
    named = set(find_terms(pattern, terms)) | set(find_terms(" ".join(spelled), terms))
    for term in terms:
        match = re.fullmatch(pattern, term, re.IGNORECASE)
        if match and set(spelled) & set(re.findall(r"[a-z]+", term)):
            named.add(term)
    return sorted(named)


def _check_assertions_scoped(fx: Fixture, terms: frozenset[str]) -> list[str]:
    problems = []
    for i, a in enumerate(fx.assertions):
        if a.kind not in ("invariant", "fatal_prohibition"):
            problems.append(
                f"assertions[{i}] '{a.id}': kind '{a.kind}' is neither invariant nor fatal_prohibition"
            )
        if not a.rationale.strip():
            problems.append(f"assertions[{i}] '{a.id}': rationale is empty")
        named = [(f"values[{j}]", t) for j, v in enumerate(a.values) for t in find_terms(v, terms)]
        named += [("pattern", t) for t in _pattern_terms(a.pattern or "", terms)]
        named += [("subject", t) for t in _pattern_terms(a.subject or "", terms)]
        named += [("rationale", t) for t in find_terms(a.rationale, terms)]
        problems += [f"assertions[{i}] '{a.id}' {where} names AFP term '{term}'" for where, term in named]
        # An assertion is only for what is genuinely invariant: it must behave on its own examples.
        sources = [e.text for e in fx.evidence]
        problems += [f"assertions[{i}] '{a.id}' {problem}" for problem in example_misfires(a, sources)]
    return problems


@lru_cache(maxsize=8)  # a sweep has one judge prompt, read for every fixture
def _judge_prompt_terms(judge_prompt: str, terms: frozenset[str]) -> tuple[str, ...]:
    return tuple(find_terms(judge_prompt, terms))


def _check_behaviour_not_terms(fx: Fixture, terms: frozenset[str], judge_prompt: str) -> list[str]:
    named = [("judge prompt", term) for term in _judge_prompt_terms(judge_prompt, frozenset(terms))]
    texts = [("task", fx.task), ("outcome_requirement", fx.outcome_requirement)]
    texts += [(f"evidence[{i}] '{e.id}' text", e.text) for i, e in enumerate(fx.evidence)]
    texts += [(f"evidence[{i}] '{e.id}' source", e.source) for i, e in enumerate(fx.evidence)]
    for dim, anchor in fx.anchors.items():
        texts += [(f"anchors.{dim}.{s}", anchor.for_score(s)) for s in (0, 1, 2)]
    # The judge reads the fatal wording too, so it is judged material like the anchors.
    texts += [(f"fatal_criteria[{i}] wording", f.wording) for i, f in enumerate(fx.fatal_criteria)]
    named += [(where, term) for where, text in texts for term in find_terms(text, terms)]
    return [f"{where} names AFP term '{term}'" for where, term in named]


def check_fixture(
    fixture: Fixture,
    prompts: dict[str, RenderedPrompt],
    terms: frozenset[str],
    judge_prompt: str,
) -> ValidityReport:
    """Run every gate check on one fixture; `prompts` maps condition -> its rendered prompt."""
    found = {
        "consistent": _check_consistent(fixture),
        "visible_to_model": check_visible(fixture, prompts),
        "same_requirement": _check_same_requirement(fixture, prompts),
        "assertions_scoped": _check_assertions_scoped(fixture, terms),
        "behaviour_not_terms": _check_behaviour_not_terms(fixture, terms, judge_prompt),
    }
    failures = [ValidityFailure(check, detail) for check in CHECKS for detail in found[check]]
    return ValidityReport(fixture_key=fixture.key, passed=not failures, failures=failures)
