"""One numeral and its marks, as people write them: the reading `scoring/numbers.py` scans texts with.

`parse_number` reads one numeral ("1.120,00", "1'120", "3,37", "ten", "one tenth") to its exact Decimal;
`currency_code` and `unit_of` read a currency mark or a unit word; `Figure` is one released figure. The
rules (grouping of both kinds, decimal comma, currency marks and words, percent words, number words,
exact fractions, units) and their limits are in docs/PROTOCOL.md ("Numbers and units").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

CURRENCY_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}
DOLLAR_CODES = {"USD", "CAD", "AUD", "NZD", "SGD", "HKD"}  # "$" is compatible with any of these
CURRENCY_CODES = (
    "USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "NZD", "INR", "CNY", "SEK", "NOK", "DKK", "SGD", "HKD",
)  # fmt: skip
_CURRENCY_WORDS = {"euro": "EUR", "franc": "CHF", "dollar": "USD", "fr.": "CHF", "sfr.": "CHF"}
_UNITS = {
    "day": ("days", "day", "d"), "business_day": (), "week": ("weeks", "week", "wks", "wk"),
    "month": ("months", "month", "mos", "mo", "mths"), "year": ("years", "year", "yrs", "yr"),
    "night": ("nights", "night"), "hour": ("hours", "hour", "hrs", "hr", "h"),
    "minute": ("minutes", "minute", "mins", "min"),
    "percentage_point": ("percentage points", "percentage point", "pp"),
}  # fmt: skip
_UNIT_OF = {spelling: unit for unit, spellings in _UNITS.items() for spelling in spellings}
SMALL = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen"
).split()
TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if i > 1}
_DENOMINATORS = {"half": 2, "quarter": 4, "fifth": 5, "eighth": 8, "tenth": 10, "twentieth": 20,
                 "hundredth": 100, "thousandth": 1000}  # fmt: skip  (only exact decimals: no thirds)
# Percent in the languages answers come in: "5 %", "5 percent", "5 per cent", "5 Prozent", "5 pour cent".
PERCENT_WORDS = r"percent|per\s?cent|pct|prozent|pour\s?cent"

NUMERAL = (
    r"\d{1,3}(?:,\d{3})+(?:\.\d+)?"  # 1,120.00
    r"|\d{1,3}(?:\.\d{3})+,\d+|\d{1,3}(?:\.\d{3}){2,}(?![\d,])"  # 1.120,00 / 1.284.370
    r"|\d{1,3}(?:['’]\d{3})+(?:[.,]\d+)?"  # 1'120.00
    r"|\d{1,3}(?:[\u00a0\u202f\u2009]\d{3})+(?:[.,]\d+)?|\d{1,3}(?:\ \d{3})+[.,]\d+"  # 1 120,00
    r"|\d+,(?:\d{1,2}|\d{4,})(?!\d)"  # 3,37 (decimal comma)
    r"|\d+\.[-–—](?![\d-])"  # 280.- (Swiss zero cents)
    r"|\d+(?:\.\d+)?|\.\d+"
)
_NUMERAL = re.compile(NUMERAL)
_NUMBER_WORD = "|".join([*TENS, *reversed(SMALL)])
WORDS = re.compile(
    rf"(?=[{''.join(sorted({w[0] for w in [*TENS, *SMALL, 'a']}))}])"  # skip to a possible first letter
    rf"\b(?P<w>(?:{'|'.join(TENS)})[-\s](?:{'|'.join(SMALL[1:10])})|{_NUMBER_WORD}|an?)"
    rf"(?:[-\s]+(?P<frac>{'|'.join(_DENOMINATORS)})(?:s|ves)?)?\b",
    re.IGNORECASE,
)
_SWISS_CENTS = re.compile(r"\.[-–—]$")
_GROUPING_MARKS = re.compile(r"['’\s\u00a0\u202f\u2009]")


@dataclass(frozen=True)
class Figure:
    text: str  # as written: currency, sign or parentheses, grouping, scale word, percent (not the unit)
    value: Decimal  # signed, scale applied, percent NOT applied ("5%" -> 5)
    start: int
    end: int
    currency: str | None = None  # symbol, code or word as written
    percent: bool = False
    unit: str | None = None  # canonical unit name ("day", "month", ...) written after the number
    words: bool = False  # written in words ("ten days", "one tenth")

    @property
    def currency_code(self) -> str | None:
        return currency_code(self.currency)


def currency_code(mark: str | None) -> str | None:
    if not mark:
        return None
    mark = " ".join(mark.split())
    if mark in CURRENCY_SYMBOLS:
        return CURRENCY_SYMBOLS[mark]
    if mark.upper() in CURRENCY_CODES:
        return mark.upper()
    word = mark.lower().removeprefix("swiss ").removesuffix("s")
    return _CURRENCY_WORDS.get(word) or _CURRENCY_WORDS.get(mark.lower())


def unit_of(word: str, qualifier: str | None = None) -> str | None:
    unit = _UNIT_OF.get(" ".join(word.lower().split()))
    if unit == "day" and (qualifier or "").lower() in ("business", "working"):
        return "business_day"
    return unit


def _word_value(word: str) -> int | None:
    word = word.lower().replace("-", " ")
    if word in ("a", "an"):
        return 1
    parts = word.split()
    if len(parts) == 2:
        return TENS[parts[0]] + SMALL.index(parts[1])
    return TENS.get(word, SMALL.index(word) if word in SMALL else None)


def parse_number(text: str) -> Decimal | None:
    """One numeral, alone: '1.120,00', "1'120", '3,37', '-5', 'ten', 'one tenth'. None otherwise."""
    text = " ".join((text or "").split())
    sign = -1 if text[:1] in "-\u2212" else 1
    body = text.lstrip("+-\u2212")
    if _NUMERAL.fullmatch(body):
        return sign * numeral_value(body)
    m = WORDS.fullmatch(body)
    if m and (m.group("frac") or m.group("w").lower() not in ("a", "an")):
        return sign * words_value(m)
    return None


def numeral_value(num: str) -> Decimal:
    """The exact value of a numeral matched by NUMERAL (grouping and decimal mark resolved)."""
    if num.isdigit():  # most figures: nothing to strip, no grouping, no decimal mark
        return Decimal(num)
    num = _SWISS_CENTS.sub("", num)
    num = _GROUPING_MARKS.sub("", num)
    if "," in num and "." in num:
        decimal = "," if num.rfind(",") > num.rfind(".") else "."
    elif num.count(",") == 1 and len(num.split(",")[1]) != 3:
        decimal = ","
    elif num.count(".") == 1:
        decimal = "."
    else:
        decimal = None
    grouping = {",": ".", ".": ",", None: ",."}[decimal]
    for g in grouping:
        num = num.replace(g, "")
    return Decimal(num.replace(",", "."))


def words_value(m: re.Match[str]) -> Decimal:
    """The value of a number word matched by WORDS, with its fraction ('three fifths' -> 0.6)."""
    count = Decimal(_word_value(m.group("w")) or 0)
    frac = (m.group("frac") or "").lower()
    return count / _DENOMINATORS[frac] if frac else count
