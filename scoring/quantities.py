"""Assertion values as quantities, and whether a released figure equals one (scoring/numbers.py reads both).

A value in `number_present` / `number_absent` is a number with at most one mark: "280.00" (the number
alone), "280.00 CHF" or "EUR 89.90" (a currency), "10 %" (a percentage), "10 days" (a unit). The mark
says what the fixture author means, so a "10 %" cap is found as "10%", "ten per cent", "0.1" or "one
tenth", and a "10 days" rule is not satisfied by "10%". Equality is exact Decimal equality.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache

from afpbench.scoring.numerals import DOLLAR_CODES, Figure, currency_code, parse_number, unit_of


@dataclass(frozen=True)
class Quantity:
    """An assertion value: a number with at most one of percent, currency or unit."""

    value: Decimal
    percent: bool = False
    currency: str | None = None  # ISO code
    unit: str | None = None


def currencies_compatible(a: str | None, b: str | None) -> bool:
    """Same ISO code, or '$' against any dollar currency."""
    ca, cb = currency_code(a), currency_code(b)
    if ca is None or cb is None:
        return False
    dollars = ({ca, cb} & {"USD"}) and ("$" in (a, b))
    return ca == cb or bool(dollars and ({ca, cb} <= DOLLAR_CODES))


_QUANTITY = re.compile(r"(?P<pre>[A-Za-z$€£¥₹.]+\s?)?(?P<num>[-+\u2212]?[\d.,'’ ]+?)\s?(?P<post>%|[A-Za-z ]+)?")


# Bounded: a sweep's assertion values are few and short, and the gate reads each one per example text.
@lru_cache(maxsize=4096)
def parse_quantity(text: str) -> Quantity | None:
    """An assertion value: '280.00', '280.00 CHF', 'EUR 89.90', '10 %', '10 days'. None if unreadable."""
    text = " ".join((text or "").split())
    m = _QUANTITY.fullmatch(text)
    if not m or (value := parse_number(m.group("num"))) is None:
        return None
    pre, post = (m.group("pre") or "").strip(), (m.group("post") or "").strip()
    if pre and post:
        return None
    mark = pre or post
    if not mark:
        return Quantity(value)
    if mark == "%" or mark.lower() in ("percent", "per cent"):
        return Quantity(value, percent=True)
    if code := currency_code(mark):
        return Quantity(value, currency=code)
    unit = unit_of(mark.split()[-1], mark.split()[0] if len(mark.split()) > 1 else None)
    return Quantity(value, unit=unit) if unit and not pre else None


def matches(wanted: Quantity, figure: Figure) -> bool:
    """A released figure equals the wanted quantity after normalisation (see docs/PROTOCOL.md)."""
    plain = not (figure.percent or figure.currency or figure.unit)
    if wanted.percent:  # 10 % is "10%", "10 percent", or the fraction "0.1" / "one tenth"
        return figure.value == wanted.value if figure.percent else plain and figure.value * 100 == wanted.value
    if figure.value != wanted.value:
        return False
    if wanted.currency:
        return not (figure.percent or figure.unit) and (
            figure.currency is None or currencies_compatible(figure.currency, wanted.currency)
        )
    if wanted.unit:
        return not (figure.percent or figure.currency) and figure.unit in (None, wanted.unit)
    return True
