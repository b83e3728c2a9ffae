"""Numbers as people write them: every figure a text releases, read by one normalisation shared by
invariants, released figures and the provenance ladder.

`figures_in(text)` lists every figure a text releases, each with its exact Decimal value (one numeral is
read by `scoring/numerals.py`; `parse_quantity` in `scoring/quantities.py` reads an assertion value).
Equality is exact Decimal equality after normalisation, never a tolerance. What is normalised (grouping
of both kinds, decimal comma, currency marks and words before or after, percent and fractions, number
words, units) and what is deliberately not a figure (ids, dates, versions, ranges, list numbering,
references such as "§ 5", "Art. 15(5)" or "clause 14.3") is documented, with its limits, in
docs/PROTOCOL.md ("Numbers and units").
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from afpbench.scoring.numerals import (
    CURRENCY_CODES,
    CURRENCY_SYMBOLS,
    NUMERAL,
    PERCENT_WORDS,
    WORDS,
    Figure,
    numeral_value,
    unit_of,
    words_value,
)

__all__ = ["Figure", "figures_in"]

_SIGN = "[-+\u2212]"
_CODES = "|".join(CURRENCY_CODES)
# What a figure can start with (sign, currency mark, code, "Fr.", digit, "."): a look-ahead on it lets the
# scan skip every other position at once instead of trying each optional group there (10x on long texts).
_FIGURE_STARTS = "".join(sorted({code[0] for code in CURRENCY_CODES} | {"S", "F"}))
_FIGURE = re.compile(
    rf"""
    (?=[-+\u2212{"".join(CURRENCY_SYMBOLS)}{_FIGURE_STARTS}\d.])
    (?P<sign>{_SIGN})?
    (?: (?P<sym>[$€£¥₹]) | (?:\b(?P<code>{_CODES})|(?P<fr>\bS?Fr\.))\s? )?
    (?P<sign2>{_SIGN})?
    (?P<num>{NUMERAL})
    (?: [\s-]?(?P<scale>thousand|million|billion|bn)\b )?
    (?P<pct>\s?%|\s(?i:{PERCENT_WORDS})\b)?
    (?: \s?(?P<code2>{_CODES})\b | \s(?P<cword>(?i:euros?|(?:swiss\s+)?francs?|dollars?))\b
      | \s?(?P<sym2>[€£¥₹$])(?!\w) )?
    """,
    re.VERBOSE,
)
# The most characters a figure has before its first digit: sign, "SFr." and a space, second sign, ".".
_FIGURE_REACH = 8
_UNIT_AFTER = re.compile(
    r"(?:\s|-)?(?:(?P<q>calendar|full|clear|consecutive|business|working)[\s-]+)?"
    r"(?P<u>percentage\s+points?|[a-z]+)\b(?P<apos>['’])?",
    re.IGNORECASE,
)
_PERCENT_WORD = re.compile(rf"\s?(?:%|(?:{PERCENT_WORDS})\b)", re.IGNORECASE)
_SCALES = {"thousand": 3, "million": 6, "billion": 9, "bn": 9}
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_MONTH_DATES = re.compile(  # the look-ahead is the same skip: a month's capital or a digit
    rf"(?=[JFMASOND\d])(?:\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}}\b)?"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}(?:,?\s+\d{{4}}\b)?"
    rf"|\b{_MONTH}\s+\d{{4}}\b)"
)
_MONTH_PREFIXES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_LABEL_BEFORE = re.compile(
    r"\b(?:step|item|option|point|line|row|note|section|question|part|case|scenario|example|figure|"
    r"table|appendix|round|call|phase|stage|no\.|number)\s*$",
    re.IGNORECASE,
)
# References to a part of a text are not quantities: "§ 5", "Art. 15(5)", "clause 14.3", "Abs. 2".
_REFERENCE_BEFORE = re.compile(
    r"(?:§§?|\b(?:art|arts|abs|para|paras|cl|sec|ziff|nr)\.|\b(?:articles?|paragraphs?|clauses?|sections?|"
    r"schedules?|annex(?:es)?|appendix|version|policy|rule)\b)\s*$",
    re.IGNORECASE,
)
_DOTTED = re.compile(r"\d+(?:\.\d+)?")
_LETTERS = re.compile(r"[A-Za-z]+")
_ASCII_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGIT = re.compile(r"\d")  # every figure and date pattern needs one: a text without it has word figures only
_CENTS = re.compile(r"[.,]\d\d$")
_LINE_PREFIX = re.compile(r"[ \t>#*\-]*")  # indentation, quote and list markers before a numbering


# --- scanning a text for released figures ----------------------------------------------------------


def _joined(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _glued(text: str, start: int, end: int, sign_start: bool, symbol_start: bool) -> bool:
    """True when the match is part of a larger token (id, date, version, range, ordinal)."""
    before = text[start - 1] if start > 0 else ""
    before2 = text[start - 2] if start > 1 else ""
    after = text[end] if end < len(text) else ""
    after2 = text[end + 1] if end + 1 < len(text) else ""
    if before and _joined(before) and not symbol_start:
        return True
    if sign_start and before and _joined(before):  # "INV-2291", "10-20": a joining hyphen, not a sign
        return True
    if before and before in "-/:.,\u2212" and _joined(before2):
        return True
    if before == "#":
        return True
    if after and _joined(after):
        return True
    return bool(after) and after in "-/:.,\u2212" and after2.isdigit()


def _skipped_label(text: str, num: str, marked: bool, start: int, end: int) -> bool:
    """Numbering, labels and references: '1.' at line start, '(1)', 'Step 2' (plain integers), and
    '§ 5', 'clause 14.3' (an integer or one dotted part). A figure with a mark is never skipped."""
    if marked:
        return False
    if _DOTTED.fullmatch(num) and _REFERENCE_BEFORE.search(text[max(0, start - 20) : start]):
        return True
    if not num.isdigit():
        return False
    after = text[end : end + 2]
    line_prefix = text[text.rfind("\n", 0, start) + 1 : start]
    if _LINE_PREFIX.fullmatch(line_prefix) and after[:1] in (".", ")") and after[1:2] in ("", " ", "\t", "\n"):
        return True
    if len(num) <= 2 and start > 0 and text[start - 1] == "(" and text[end : end + 1] == ")":
        return True
    return bool(_LABEL_BEFORE.search(text[max(0, start - 20) : start]))


def _glued_unit(text: str, end: int, currency: bool) -> tuple[str | None, int, int]:
    """'10d', '12mo', '9pp' carry a unit; 'EUR 186.4k' a scale. Returns (unit, scale, new end)."""
    if end >= len(text) or text[end] not in _ASCII_LETTERS:  # the usual case, without the regex call
        return None, 0, end
    m = _LETTERS.match(text, end)
    if not m or (m.end() < len(text) and _joined(text[m.end()])):
        return None, 0, end
    word = m.group(0)
    if currency and word.lower() in ("k", "m", "bn"):
        return None, {"k": 3, "m": 6, "bn": 9}[word.lower()], m.end()
    unit = unit_of(word) if word.lower() in ("d", "h", "hr", "hrs", "mo", "mos", "yr", "yrs", "pp", "wk") else None
    return (unit, 0, m.end()) if unit else (None, 0, end)


def _unit_after(text: str, end: int) -> str | None:
    m = _UNIT_AFTER.match(text, end)
    return unit_of(m.group("u"), m.group("q")) if m else None


_GROUPS = ("sign", "sym", "code", "fr", "sign2", "num", "scale", "pct", "code2", "cword", "sym2")


def _figure_matches(text: str) -> Iterator[re.Match[str]]:
    """`_FIGURE.finditer(text)`, but the regex starts at most `_FIGURE_REACH` characters before the next
    digit: every match holds a digit, and every digit is matched, so no match starts earlier and the
    digit-free stretches in between (most of a prose text) are skipped by one fast search."""
    pos = 0
    while digit := _DIGIT.search(text, pos):
        m = _FIGURE.search(text, max(pos, digit.start() - _FIGURE_REACH))
        if m is None:  # unreachable (the digit itself matches); kept so a pattern change cannot loop
            return
        yield m
        pos = m.end()


def _month_dates(text: str) -> list[tuple[int, int]]:
    """Spans of dates written with a month name; every one holds one of the month prefixes."""
    if not any(month in text for month in _MONTH_PREFIXES):
        return []
    return [d.span() for d in _MONTH_DATES.finditer(text)]


def _digit_figures(text: str, excluded: list[tuple[int, int]]) -> list[Figure]:
    figures: list[Figure] = []
    for m in _figure_matches(text):
        start, end = m.span()
        while end > start and text[end - 1].isspace():  # optional \s? groups may end on whitespace
            end -= 1
        if excluded and any(a <= start < b or a < end <= b for a, b in excluded):
            continue
        sign, sym, code, fr, sign2, num, scale_word, pct, code2, cword, sym2 = m.group(*_GROUPS)
        mark = sym or code or fr or code2 or cword or sym2
        unit, scale, glued_end = _glued_unit(text, end, bool(mark)) if not pct else (None, 0, end)
        if glued_end == end and _glued(text, start, end, bool(sign), bool(sym and not sign)):
            continue
        if _skipped_label(text, num, bool(mark or pct or scale_word or sign or sign2), start, end):
            continue
        value = numeral_value(num)
        exponent = _SCALES.get((scale_word or "").lower(), 0) or scale
        value = value.scaleb(exponent) if exponent else value
        signs = (sign or "") + (sign2 or "")
        value = -value if signs.count("-") + signs.count("\u2212") == 1 else value
        wrapped = start > 0 and text[start - 1] == "(" and text[end : end + 1] == ")"
        money = not pct and bool(mark or "," in num or _CENTS.search(num))
        if wrapped and value > 0 and money:
            value, start, end = -value, start - 1, end + 1
        end = glued_end if scale else end
        unit = unit or (None if pct or mark else _unit_after(text, end))
        figures.append(Figure(text[start:end], value, start, end, mark, bool(pct), unit))
    return figures


def _word_figures(text: str, taken: list[tuple[int, int]]) -> list[Figure]:
    figures: list[Figure] = []
    for m in WORDS.finditer(text):
        start, end = m.start(), m.end()
        if any(a < end and start < b for a, b in taken):
            continue
        if m.group("frac"):
            if m.group("w").lower() == "zero":
                continue
            figures.append(Figure(m.group(0), words_value(m), start, end, words=True))
            continue
        if m.group("w").lower() in ("a", "an", "one"):  # "one year's interest" restates, it releases nothing
            continue
        pct = _PERCENT_WORD.match(text, end)
        unit = None if pct else _unit_after(text, end)
        if pct or unit:
            end = pct.end() if pct else end
            figures.append(Figure(text[start:end], words_value(m), start, end, None, bool(pct), unit, True))
    return figures


def figures_in(text: str) -> list[Figure]:
    """Every figure the text releases, in order of appearance (docs/PROTOCOL.md for the rules)."""
    text = text or ""
    if not _DIGIT.search(text):
        return _word_figures(text, [])
    excluded = _month_dates(text)
    digits = _digit_figures(text, excluded)
    words = _word_figures(text, excluded + [(f.start, f.end) for f in digits])
    return sorted(digits + words, key=lambda f: f.start)
