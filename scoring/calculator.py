"""The calculator: a safe arithmetic evaluator over Decimal, and the operand reader the ladder uses.

Rules (PROVENANCE.md, "Operands"):
- Only numeric literals, + - * / ** (and `^`, which means power, never XOR), unary minus/plus and
  parentheses. Anything else (names, calls, `%`, `//`, thousands separators, currency) is an error.
- A literal's TEXT goes straight to Decimal, never through float: "15200.00" stays Decimal("15200.00")
  with exponent -2, and 0.1 + 0.2 is exactly 0.3.
- Operands are the numeric literals in textual order. A unary minus directly on a literal makes the
  operand negative ("-12" -> -12); binary subtraction does not ("a - 12" -> operand 12).

The parser is Python's `ast.parse(mode="eval")` with a node-type allow-list; nothing is ever passed to
eval/exec/compile.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from decimal import (
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    DecimalException,
    DivisionByZero,
    InvalidOperation,
    Overflow,
    localcontext,
)

from afpbench.fixtures.numeric_schema import NumericSpec

# 50 significant digits: far beyond any figure a fixture releases, so rounding inside a chain never
# decides whether a later operand matches a reference value.
PRECISION = 50
DECIMAL_CONTEXT = Context(prec=PRECISION, traps=[InvalidOperation, DivisionByZero, Overflow])
MAX_EXPRESSION_CHARS = 2000
MAX_DEPTH = 200  # syntax-tree depth; keeps the recursive walkers far from Python's stack limit
MAX_EXPONENT = 1000  # |exponent| above this is refused: 9**9**9 must not hang a worker
ROUNDING_MODES = {"HALF_UP": ROUND_HALF_UP, "HALF_EVEN": ROUND_HALF_EVEN}
# What the model is shown of a return keeps this many significant digits (and never fewer decimal
# places than the fixture declares): enough that a chain of shown values reaches the same released
# figure as the exact chain, short enough to be copied whole instead of shortened by hand.
SHOWN_SIGNIFICANT_DIGITS = 12
SHOWN_MAX_PLACES = 60  # a return smaller than 1e-48 is shown as zero at 60 places, not as 1000 digits

# Characters an expression may contain. Letters are limited to e/E (scientific notation); anything
# else (',', '$', '%', '_', letters, '//' is caught later) is refused before parsing, with a clear message.
_ALLOWED_CHARS = re.compile(r"^[0-9.eE+\-*/^()\s]*$")
_LEADING_ZERO_INT = re.compile(r"(?<![\d.])0+(?=\d)")


class CalculatorError(ValueError):
    """The expression is not valid arithmetic for this calculator, or cannot be evaluated."""


class Unobservable(CalculatorError):
    """The expression cannot be parsed, so its operands cannot be read (the call is UNOBSERVABLE)."""


@dataclass(frozen=True)
class Operand:
    text: str  # the literal as written, with a leading '-' when a unary minus applies to it
    value: Decimal


_NUMBER_TOKEN = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _prepare(expression: str) -> str:
    if not isinstance(expression, str):
        raise Unobservable(f"expression must be a string, got {type(expression).__name__}")
    if not expression.strip():
        raise Unobservable("empty expression")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise Unobservable(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    if not _ALLOWED_CHARS.match(expression):
        bad = sorted({ch for ch in expression if not _ALLOWED_CHARS.match(ch)})
        raise Unobservable(
            f"expression contains characters outside numbers and + - * / ^ ( ): {''.join(bad)!r} "
            "(thousands separators, currency and names are not allowed)"
        )
    # `^` is power: translate before parsing so Python never reads it as XOR.
    text = expression.replace("^", "**")
    # Python rejects "007"; a leading zero carries no value, so drop it for the parser only
    # (operand texts are read from the original expression).
    return _LEADING_ZERO_INT.sub("", text).strip()


def _parse(expression: str) -> tuple[ast.expr, dict[int, str]]:
    """The checked syntax tree, and each literal node's text exactly as written in `expression`."""
    source = _prepare(expression)
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise Unobservable(f"cannot parse expression {expression!r}: {exc.__class__.__name__}") from exc
    _check_nodes(tree.body)
    # Literal nodes, visited left to right, are the number tokens of the original text in order.
    nodes: list[ast.Constant] = []
    _constants(tree.body, nodes)
    tokens = _NUMBER_TOKEN.findall(expression)
    if len(tokens) != len(nodes):
        raise Unobservable(f"cannot match the literals of {expression!r} to its syntax")
    return tree.body, {id(node): token for node, token in zip(nodes, tokens, strict=True)}


def _constants(node: ast.expr, out: list[ast.Constant]) -> None:
    if isinstance(node, ast.Constant):
        out.append(node)
    elif isinstance(node, ast.UnaryOp):
        _constants(node.operand, out)
    elif isinstance(node, ast.BinOp):
        _constants(node.left, out)
        _constants(node.right, out)


_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_UNARY = (ast.UAdd, ast.USub)


def _check_nodes(root: ast.expr) -> None:
    """Allow-list: literals, the five binary operators, unary +/-; nothing else. Iterative, with a depth
    limit, so a pathological expression cannot exhaust the stack of the recursive walkers below."""
    stack: list[tuple[ast.expr, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise Unobservable(f"expression nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise Unobservable(f"unsupported literal {node.value!r}")
        elif isinstance(node, ast.BinOp):
            if not isinstance(node.op, _BINARY):
                raise Unobservable(f"unsupported operator {type(node.op).__name__}")
            stack += [(node.left, depth + 1), (node.right, depth + 1)]
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, _UNARY):
                raise Unobservable(f"unsupported unary operator {type(node.op).__name__}")
            stack.append((node.operand, depth + 1))
        else:
            raise Unobservable(f"unsupported syntax {type(node).__name__}")


Literals = dict[int, str]  # id(ast.Constant) -> the literal's text as written


def _literal(node: ast.Constant, literals: Literals) -> tuple[str, Decimal]:
    """The literal's text exactly as written, converted straight to Decimal (never via float)."""
    text = literals[id(node)]
    try:
        return text, Decimal(text)
    except InvalidOperation as exc:  # pragma: no cover - the token pattern admits only decimal literals
        raise Unobservable(f"literal {text!r} is not a decimal number") from exc


def _collect(node: ast.expr, literals: Literals, out: list[Operand]) -> None:
    if isinstance(node, ast.Constant):
        text, value = _literal(node, literals)
        out.append(Operand(text, value))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        text, value = _literal(node.operand, literals)
        if isinstance(node.op, ast.USub):
            out.append(Operand("-" + text, -value))
        else:
            out.append(Operand(text, value))
    elif isinstance(node, ast.UnaryOp):
        _collect(node.operand, literals, out)
    elif isinstance(node, ast.BinOp):
        _collect(node.left, literals, out)
        _collect(node.right, literals, out)


def operands(expression: str) -> list[Operand]:
    """Every numeric literal of the expression in textual order. Raises Unobservable if unparseable."""
    node, literals = _parse(expression)
    out: list[Operand] = []
    _collect(node, literals, out)
    return out


def _power(base: Decimal, exponent: Decimal) -> Decimal:
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {exponent} exceeds the limit of {MAX_EXPONENT}")
    if base == 0 and exponent < 0:
        raise CalculatorError("division by zero (zero raised to a negative power)")
    return base**exponent


def _eval(node: ast.expr, literals: Literals) -> Decimal:
    if isinstance(node, ast.Constant):
        return _literal(node, literals)[1]
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, literals)
        return -value if isinstance(node.op, ast.USub) else +value
    assert isinstance(node, ast.BinOp)  # guaranteed by _check_nodes
    left = _eval(node.left, literals)
    right = _eval(node.right, literals)
    if isinstance(node.op, ast.Add):
        return left + right
    if isinstance(node.op, ast.Sub):
        return left - right
    if isinstance(node.op, ast.Mult):
        return left * right
    if isinstance(node.op, ast.Div):
        if right == 0:
            raise CalculatorError("division by zero")
        return left / right
    return _power(left, right)


def evaluate(expression: str) -> Decimal:
    """Evaluate the expression exactly in Decimal (50 significant digits). Raises CalculatorError."""
    node, literals = _parse(expression)
    with localcontext(DECIMAL_CONTEXT):
        try:
            return _eval(node, literals)
        except CalculatorError:
            raise
        except DivisionByZero as exc:
            raise CalculatorError("division by zero") from exc
        except Overflow as exc:
            raise CalculatorError("result too large") from exc
        except (DecimalException, RecursionError) as exc:
            raise CalculatorError(f"cannot evaluate {expression!r}: {exc.__class__.__name__}") from exc


def shown_result(value: Decimal, numeric: NumericSpec | None) -> str:
    """The calculator's return as shown to the model (and recorded as the call's result).

    Rounded with the fixture's declared rounding mode to its declared places, unless that would keep
    fewer than SHOWN_SIGNIFICANT_DIGITS significant digits: rounding 1880.24 / 365 to 5.15 and then
    multiplying by 46 would make the harness, not the model, release a wrong figure. A return that
    already has no more places than that is shown exactly as computed; fixed notation, never 1E+3.
    Without a numeric spec the exact value is shown.
    """
    if numeric is None or not value.is_finite():
        return str(value)
    policy = numeric.quantisation
    places = max(policy.places, SHOWN_SIGNIFICANT_DIGITS - 1 - value.adjusted())
    places = min(places, SHOWN_MAX_PLACES)
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= -places:
        return format(value, "f")
    with localcontext(DECIMAL_CONTEXT):
        rounded = value.quantize(Decimal(1).scaleb(-places), rounding=ROUNDING_MODES[policy.rounding])
    return format(rounded, "f")
