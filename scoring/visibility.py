"""Validity gate item 2, every fact the grader uses is visible to the model: the `visible_to_model`
check (scoring/validity.py runs it with the others).

What the grader relies on (grader facts, the values of positive assertions, the numeric source values)
must appear in every condition's rendered prompt: text as written, a source value as a figure standing
alone, an assertion quantity as a figure of the prompt after number normalisation. A value the model
must compute is exempt when the reference derivation computes it, or when its `derivations` entry works
it out from figures the model sees.
"""

from __future__ import annotations

from decimal import Decimal

from afpbench.fixtures.schema import AssertionCheck, Fixture
from afpbench.scoring.calculator import CalculatorError, operands
from afpbench.scoring.derivation import DerivationError, apply_transformation, evaluate_reference, quantise
from afpbench.scoring.numerals import Figure
from afpbench.scoring.prompt_figures import figures_by_prompt, folded_text
from afpbench.scoring.quantities import matches, parse_quantity
from afpbench.scoring.render import RenderedPrompt
from afpbench.scoring.vocabulary import normalise_space


def visible(value: str, normalised_text: str, numeric: bool) -> bool:
    needle = normalise_space(value).casefold()
    at = normalised_text.find(needle)
    if not numeric:
        return at >= 0
    # A figure must stand alone: '15' is not visible because '150' or '2.15' is. Each occurrence is
    # looked at in turn, as `(?<![\d.])needle(?!\d)` would; str.find, because a pattern that opens with
    # a lookbehind is tried at every position of the text (~0.1 ms a value over an instruction text).
    while at >= 0:
        end = at + len(needle)
        before = normalised_text[at - 1] if at else ""
        if not (before.isdecimal() or before == ".") and not normalised_text[end : end + 1].isdecimal():
            return True
        at = normalised_text.find(needle, at + 1)
    return False


def _derived_values(fx: Fixture) -> set[Decimal]:
    """Figures the model can compute from visible values: the reference intermediates, raw, quantised
    under the declared policy, or under a declared transformation (the ladder's step 3)."""
    if fx.numeric is None:
        return set()
    try:
        reference = evaluate_reference(fx.numeric)
    except DerivationError:
        return set()  # reported by the consistent check
    values = set()
    for raw in reference.intermediates.values():
        values |= {raw, quantise(raw, fx.numeric.quantisation)}
        values |= {apply_transformation(raw, t) for t in fx.numeric.transformations}
    return values


def _grader_literals(fx: Fixture) -> list[tuple[str, str, str]]:
    """(field, value, kind) for everything the grader relies on as a fact; kind is "text", "figure"
    (a source value, which must appear exactly as written) or "quantity" (a number_present value, found
    as a figure of the prompt after number normalisation).

    Positive checks (contains_any, number_present) name what a right answer states, so the model must
    have seen it; number_present figures that the reference derivation computes are exempt (derived from
    visible source values), and so are values whose `derivations` entry computes them from figures the
    model sees (checked separately). Prohibitions (contains_none, number_absent) name what must NOT
    appear, e.g. a fabricated figure, which by its nature was never shown.
    """
    items = [(f"grader_facts[{i}]", fact, "text") for i, fact in enumerate(fx.grader_facts)]
    derived = _derived_values(fx)
    for i, a in enumerate(fx.assertions):
        for j, value in enumerate(a.values):
            where = f"assertions[{i}] '{a.id}' values[{j}]"
            if a.check == AssertionCheck.contains_any:
                items.append((where, value, "text"))
            elif a.check == AssertionCheck.number_present and value not in a.derivations:
                quantity = parse_quantity(value)
                if quantity is not None and quantity.value not in derived:
                    items.append((where, value, "quantity"))
    if fx.numeric is not None:
        for i, sf in enumerate(fx.numeric.source_fields):
            items.append((f"numeric.source_fields[{i}] '{sf.id}' value", sf.value, "figure"))
    return items


def _shown(value: str, figures: list[Figure]) -> bool:
    quantity = parse_quantity(value)
    return quantity is not None and any(matches(quantity, f) for f in figures)


def _derivation_operands(fx: Fixture) -> list[tuple[str, Decimal, str]]:
    """(field, value, text) of each operand of each assertion derivation."""
    found = []
    for i, a in enumerate(fx.assertions):
        for value, expression in a.derivations.items():
            try:
                ops = operands(expression)
            except CalculatorError:
                continue  # reported by the consistent check
            found += [(f"assertions[{i}] '{a.id}' derivations['{value}']", op.value, op.text) for op in ops]
    return found


def _unseen(operands_: list[tuple[str, Decimal, str]], figures: list[Figure]) -> list[tuple[str, str]]:
    """(field, operand) for each derivation operand that the model does not see, as a figure or as the
    fraction of a percentage it sees ("0.10" for "10%")."""
    shown = {f.value for f in figures} | {f.value / 100 for f in figures if f.percent}
    return [(where, text) for where, value, text in operands_ if value not in shown]


def check_visible(fx: Fixture, prompts: dict[str, RenderedPrompt]) -> list[str]:
    if not prompts:
        return ["no rendered prompts given: visibility cannot be checked"]
    problems = []
    literals = _grader_literals(fx)
    operands_ = _derivation_operands(fx)
    parts = {condition: prompts[condition].visible_parts() for condition in sorted(prompts)}
    # The prompts' figures serve only quantities and derivation operands; a fixture with neither (half
    # the pilot set) skips the number scan, the costliest part of this check.
    needs_figures = bool(operands_) or any(kind == "quantity" for _, _, kind in literals)
    figures_of = figures_by_prompt(parts) if needs_figures else {condition: [] for condition in parts}
    for condition in sorted(prompts):
        text, figures = folded_text(parts[condition]), figures_of[condition]
        for where, value, kind in literals:
            seen = _shown(value, figures) if kind == "quantity" else visible(value, text, kind == "figure")
            if not seen:
                problems.append(f"{where} '{value}' not visible in condition {condition} prompt")
        for where, operand in _unseen(operands_, figures):
            problems.append(f"{where} operand '{operand}' not visible in condition {condition} prompt")
    return problems
