"""What an answer states for a named quantity: an invariant's `subject` (docs/PROTOCOL.md, "Numbers and
units").

A `number_present` assertion with a `subject` (a regex naming the quantity, e.g. the cap) holds only if,
besides releasing one of its values, the answer never states another figure of the same kind for that
subject. In each sentence (or part between semicolons) that names the subject, the figures after its
last mention are read, up to where a hypothetical starts ("would", "if", "for example":
scoring/claims.py) or a new clause does (", so", "which", "but", "therefore"); the first percentage and
the first amount of money among them (a figure with a currency, or a bare one written with cents or
grouping) are what the sentence states for the subject, and each must equal a value of its kind. A
money figure the evidence states (the order value the cap is a share of, also when written in
parentheses) is the operand, not the statement, and is passed over. So "capped at 10% of the order
value, i.e. EUR 840.00" misstates the cap although it says "10%".
"""

from __future__ import annotations

import re
from decimal import Decimal

from afpbench.scoring.claims import SCOPE
from afpbench.scoring.designation import sentences
from afpbench.scoring.numerals import Figure
from afpbench.scoring.quantities import Quantity, matches

# A new clause about something else: the figures after it are not stated for the subject.
_NEW_CLAUSE = re.compile(
    r",?\s+(?:so|which|while|but|whereas|therefore|hence|thus|and\s+(?:so|therefore|thus))\b", re.IGNORECASE
)
_MONEY_WRITTEN = re.compile(r"[.,]\d\d$|\d[,.'’\s\u00a0\u202f]\d{3}")


def _kind(figure: Figure) -> str | None:
    if figure.percent:
        return "percent"
    if figure.unit is not None:
        return None
    if figure.currency or _MONEY_WRITTEN.search(figure.text):
        return "money"
    return None


def _kind_of(quantity: Quantity) -> str | None:
    return "percent" if quantity.percent else "money" if quantity.currency else None


def misstated(
    subject: str, wanted: list[Quantity], text: str, figures: list[Figure], stated: frozenset[Decimal]
) -> Figure | None:
    """The first figure the text states for `subject` that equals none of the `wanted` values of its
    kind; `figures` are the text's released figures, `stated` the values of the figures the evidence
    states (money ones among them are passed over)."""
    pattern = re.compile(subject, re.IGNORECASE)
    kinds = {k for q in wanted if (k := _kind_of(q))}
    for a, b in sentences(text, semicolons=True):
        mentions = list(pattern.finditer(text, a, b))
        if not mentions:
            continue
        start = mentions[-1].end()
        stops = [m.start() for m in (SCOPE.search(text, start, b), _NEW_CLAUSE.search(text, start, b)) if m]
        stop = min(stops, default=b)
        seen: set[str] = set()
        for figure in (f for f in figures if start <= f.start < stop):
            equal = [q for q in wanted if matches(q, figure)]  # "0.10" is the 10 % written as a fraction
            kind = _kind_of(equal[0]) if equal else _kind(figure)
            if kind not in kinds or kind in seen or (not equal and kind == "money" and abs(figure.value) in stated):
                continue
            seen.add(kind)
            if not equal:
                return figure
    return None
