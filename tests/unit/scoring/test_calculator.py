"""The calculator (PROVENANCE.md "Operands"): exact Decimal arithmetic, operands read from literal text."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest

from afpbench.scoring import calculator
from afpbench.scoring.calculator import CalculatorError, Operand, Unobservable, evaluate, operands


def test_literal_text_keeps_decimal_identity_15200_00():
    """Rule: literal text goes straight to Decimal; "15200.00" stays 15200.00 with exponent -2."""
    first = operands("15200.00 * 0.05")[0]
    assert first.text == "15200.00"
    assert str(first.value) == "15200.00"
    assert first.value.as_tuple().exponent == -2


def test_caret_is_power_never_xor():
    """Rule: `^` means power (2^3 == 8; XOR would give 1), right-associative like **."""
    assert evaluate("2^3") == Decimal(8)
    assert evaluate("2 ^ 3 ^ 2") == Decimal(512)
    assert evaluate("1.05^2") == Decimal("1.1025")


def test_floats_never_leak():
    """Rule: no float anywhere: 0.1 + 0.2 is exactly 0.3, not 0.30000000000000004."""
    result = evaluate("0.1 + 0.2")
    assert result == Decimal("0.3")
    assert str(result) == "0.3"
    assert str(evaluate("15200.00 * 0.05")) == "760.0000"


def test_unary_minus_on_literal_makes_operand_negative():
    """Rule: a unary minus directly on a literal makes that operand negative."""
    assert operands("-12 * 3") == [Operand("-12", Decimal("-12")), Operand("3", Decimal(3))]
    assert operands("2 * (-0.5)")[1].value == Decimal("-0.5")


def test_binary_minus_gives_positive_operand():
    """Rule: `a - 12` gives operand 12, not -12."""
    assert [op.value for op in operands("100 - 12")] == [Decimal(100), Decimal(12)]
    assert evaluate("100 - 12") == Decimal(88)


def test_operands_in_textual_order_with_original_text():
    ops = operands("(1200.50 + 300) * 0.15 / 007")
    assert [op.text for op in ops] == ["1200.50", "300", "0.15", "007"]
    assert ops[3].value == Decimal(7)


@pytest.mark.parametrize(
    "expression",
    ["1,234 * 2", "$100 + 5", "100 EUR", "10 % 3", "7 // 2", "abs(-3)", "__import__('os')", "1 if 1 else 2"],
)
def test_non_arithmetic_is_refused(expression):
    """Rule: only numbers and + - * / ^ ( ); separators, currency and names are errors (never guessed)."""
    with pytest.raises(Unobservable):
        operands(expression)
    with pytest.raises(CalculatorError):
        evaluate(expression)


@pytest.mark.parametrize("expression", ["(1 + 2", "", "   ", "1 +", "* 3", "1e"])
def test_unparseable_expression_raises_unobservable(expression):
    """Rule: an expression that cannot be parsed is UNOBSERVABLE (the ladder never grounds it)."""
    with pytest.raises(Unobservable):
        operands(expression)


def test_division_by_zero_is_a_calculator_error():
    with pytest.raises(CalculatorError, match="division by zero"):
        evaluate("1 / (3 - 3)")
    with pytest.raises(CalculatorError, match="division by zero"):
        evaluate("0 ^ -1")


def test_huge_exponents_are_refused_quickly():
    """Guard: 9^9^9 must fail fast instead of hanging a worker."""
    with pytest.raises(CalculatorError, match="exponent"):
        evaluate("9^9^9")
    with pytest.raises(CalculatorError):
        evaluate("(10^1000)^1000")


def test_deep_nesting_is_unobservable_not_a_crash():
    with pytest.raises(Unobservable):
        operands("+".join(["1"] * 500))


def test_fifty_digit_precision():
    third = evaluate("1 / 3")
    assert len(third.as_tuple().digits) == 50


def test_no_eval_exec_or_compile_in_the_module():
    """Security rule: the calculator parses with an allow-list and never runs user text."""
    source = Path(calculator.__file__).read_text(encoding="utf-8")
    assert not re.search(r"(?<![\w.])(eval|exec|compile)\(", source)
