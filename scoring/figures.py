"""Every figure a final answer releases, with its literal text and exact Decimal value.

What counts as a figure: a number with optional sign, currency (symbol or ISO code, before or after),
thousands separators (groups of three: "1,234.50" -> Decimal("1234.50"), exponent kept), a scale word
(thousand / million / billion, applied to the value), a percent marker (value kept as written:
"5%" -> 5, with `percent=True`), and accounting parentheses for negatives.

What is deliberately NOT a figure (each would add noise to the released-figure ladder):
- numbers glued to letters or ids: "E3" (fixture evidence ids), "INV-2291", "FY2024", "3rd", "v2";
- hyphen/slash/colon/dot-joined digit runs: dates "2024-03-01", "01/03/2024", times "10:30", versions
  "1.2.3", ranges written "10-20" (write "10 to 20" to release both ends);
- month-name dates: "March 1, 2024", "1 March 2024", "March 2024";
- list numbering: "1." / "1)" at the start of a line, "(1)" enumerators (a plain 1-2 digit integer
  in parentheses), "#3", and plain integers after a label word ("Step 2", "Option 1", "Section 4").
Parentheses mean a negative only around a money-shaped figure (currency, thousands separator or
exactly two decimals) that is not a percent: "(1,234.50)" is -1234.50, "rate (5%)" stays 5.
A minus sign is a sign only when it is not joined to a preceding letter or digit ("a-5" is not -5).
Bare years ("in 2024") remain figures: too many real quantities look like years to drop them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from afpbench.fixtures.schema import NumericSpec

CURRENCY_SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY", "₹": "INR"}
DOLLAR_CODES = {"USD", "CAD", "AUD", "NZD", "SGD", "HKD"}  # "$" is compatible with any of these
CURRENCY_CODES = (
    "USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "NZD", "INR", "CNY", "SEK", "NOK", "DKK", "SGD", "HKD",
)  # fmt: skip
_CODES = "|".join(CURRENCY_CODES)
_SIGN = "[-+\u2212]"
_SCALES = {"thousand": 3, "million": 6, "billion": 9}

_FIGURE = re.compile(
    rf"""
    (?P<sign>{_SIGN})?
    (?: (?P<sym>[$€£¥₹]) | \b(?P<code>{_CODES})\s? )?
    (?P<sign2>{_SIGN})?
    (?P<num>\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)
    (?: \s?(?P<scale>thousand|million|billion)\b )?
    (?P<pct>\s?%|\s(?:percent|per\scent)\b)?
    (?: \s?(?P<code2>{_CODES})\b )?
    """,
    re.VERBOSE,
)
_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_MONTH_DATES = re.compile(
    rf"\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}}\b)?"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}(?:,?\s+\d{{4}}\b)?"
    rf"|\b{_MONTH}\s+\d{{4}}\b"
)
_LABEL_BEFORE = re.compile(
    r"\b(?:step|item|option|point|line|row|note|section|question|part|case|scenario|example|figure|"
    r"table|appendix|round|call|phase|stage|no\.|number)\s*$",
    re.IGNORECASE,
)
_LINE_PREFIX = re.compile(r"[ \t>#*\-]*")  # indentation, quote and list markers before a numbering


@dataclass(frozen=True)
class Figure:
    text: str  # as written: currency, sign or parentheses, grouping, scale word, percent
    value: Decimal  # signed, scale applied, percent NOT applied ("5%" -> 5)
    start: int
    end: int
    currency: str | None = None  # symbol or code as written
    percent: bool = False


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


def _skipped_label(text: str, m: re.Match[str], start: int, end: int) -> bool:
    """Numbering and labels: '1.' at line start, '(1)', 'Step 2'. Only plain integers qualify."""
    plain = not (m.group("sym") or m.group("code") or m.group("code2") or m.group("pct") or m.group("scale"))
    plain = plain and m.group("num").isdigit() and not (m.group("sign") or m.group("sign2"))
    if not plain:
        return False
    after = text[end : end + 2]
    line_prefix = text[text.rfind("\n", 0, start) + 1 : start]
    if (
        _LINE_PREFIX.fullmatch(line_prefix)
        and after[:1] in (".", ")")
        and after[1:2] in ("", " ", "\t", "\n")
    ):
        return True
    if len(m.group("num")) <= 2 and start > 0 and text[start - 1] == "(" and text[end : end + 1] == ")":
        return True
    return bool(_LABEL_BEFORE.search(text[max(0, start - 20) : start]))


def _value(m: re.Match[str]) -> Decimal:
    value = Decimal(m.group("num").replace(",", ""))
    if m.group("scale"):
        value = value.scaleb(_SCALES[m.group("scale")])
    signs = (m.group("sign") or "") + (m.group("sign2") or "")
    return -value if signs.count("-") + signs.count("\u2212") == 1 else value


def _money_shaped(m: re.Match[str]) -> bool:
    num = m.group("num")
    has_two_places = "." in num and len(num.split(".")[1]) == 2
    currency = m.group("sym") or m.group("code") or m.group("code2")
    return not m.group("pct") and bool(currency or "," in num or has_two_places)


def extract_figures(text: str) -> list[Figure]:
    """Every figure the text releases, in order of appearance (see the module docstring for the rules)."""
    text = text or ""
    excluded = [(d.start(), d.end()) for d in _MONTH_DATES.finditer(text)]
    figures: list[Figure] = []
    for m in _FIGURE.finditer(text):
        start, end = m.start(), m.end()
        while end > start and text[end - 1].isspace():  # optional \s? groups may end on whitespace
            end -= 1
        if any(a <= start < b or a < end <= b for a, b in excluded):
            continue
        if _glued(text, start, end, bool(m.group("sign")), bool(m.group("sym") and not m.group("sign"))):
            continue
        if _skipped_label(text, m, start, end):
            continue
        value = _value(m)
        wrapped = start > 0 and text[start - 1] == "(" and text[end : end + 1] == ")"
        if wrapped and value > 0 and _money_shaped(m):
            value, start, end = -value, start - 1, end + 1
        figures.append(
            Figure(
                text=text[start:end],
                value=value,
                start=start,
                end=end,
                currency=m.group("sym") or m.group("code") or m.group("code2"),
                percent=bool(m.group("pct")),
            )
        )
    return figures


# --- Answer figure identification -------------------------------------------------------------------
# Which released figure is THE answer. Deliberately blind to the expected value (choosing the figure
# nearest the reference would bias accuracy upwards); it uses only the text, the declared answer unit and
# the declared decline markers. Rules, in order:
# 1. Cue sentences designate a figure. Tiers: (0) "final", "answer", "in conclusion", "bottom line", \boxed;
#    (1) "comes to", "amounts to", "works out to", "total", "therefore", "thus", "result", or a bold
#    figure; (2) "=". In a cue sentence the anchor is the last cue of its best tier, moved past any later
#    "="; the figure right after the anchor is designated (figures carrying the answer unit first). If
#    several distinct values follow and the first is not directly after the cue (a short gap without
#    operand words like "of", "and", "plus"), the sentence is ambiguous; with no figure after the cue,
#    a single value before it is designated. A heading-like cue line ("Final answer:") designates the
#    first figure of the next sentence.
# 2. The highest tier with any designation decides; if its designations disagree (distinct values) or
#    any is ambiguous, the result is AMBIGUOUS (a human decides). Otherwise the last one is FOUND.
# 3. A declared decline marker with no designated figure is DECLINED; with one, AMBIGUOUS.
# 4. Without cues: the last figure carrying the answer unit; else a single (or single-valued) figure;
#    else AMBIGUOUS. Figures that conflict with the unit (a percent or another currency for a money
#    answer) are never candidates; with no compatible figure the kind is NONE.

_TIER_CUES = (
    re.compile(r"\b(?:final|answer|in\s+conclusion|bottom\s+line)\b|\\boxed\b", re.IGNORECASE),
    re.compile(
        r"\b(?:comes?\s+to|came\s+to|amounts?\s+to|works?\s+out\s+to|totals?|totalling|therefore|thus|"
        r"results?)\b",
        re.IGNORECASE,
    ),
    re.compile(r"="),
)
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_OPERAND_WORDS = {"of", "and", "plus", "minus", "from", "between", "with", "times", "by", "over", "less"}
_PERCENT_UNITS = {"%", "percent", "per cent", "pct", "percentage"}


@dataclass(frozen=True)
class FigureIdentification:
    kind: str  # "found" | "declined" | "ambiguous" | "none"
    figure: Figure | None = None
    candidates: tuple[Figure, ...] = ()
    reason: str = ""


def _currency_codes(mark: str) -> set[str]:
    mark = mark.strip()
    if mark == "$":
        return set(DOLLAR_CODES)
    return {CURRENCY_SYMBOLS.get(mark, mark.upper())}


class _Unit:
    def __init__(self, answer_unit: str) -> None:
        unit = (answer_unit or "").strip()
        self.percent = unit.lower() in _PERCENT_UNITS
        self.codes = (
            _currency_codes(unit) if unit in CURRENCY_SYMBOLS or unit.upper() in CURRENCY_CODES else set()
        )
        self.word = "" if self.percent or self.codes else unit.lower().rstrip("s")

    def compatible(self, f: Figure) -> bool:
        if self.percent:
            return f.currency is None
        if self.codes:
            return not f.percent and (f.currency is None or bool(_currency_codes(f.currency) & self.codes))
        return not (self.word and (f.percent or f.currency))

    def carries(self, f: Figure, text: str) -> bool:
        if self.percent:
            return f.percent
        if self.codes:
            return f.currency is not None and bool(_currency_codes(f.currency) & self.codes)
        return bool(self.word) and text[f.end :].lstrip().lower().startswith(self.word)


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in re.finditer(r"\n+|[.!?](?=\s|$)", text):
        spans.append((start, m.end()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def _adjacent(gap: str) -> bool:
    words = re.findall(r"[A-Za-z]+", gap.lower())
    return len(gap) <= 40 and len(words) <= 4 and not _OPERAND_WORDS.intersection(words)


def _pick(figs: list[Figure], anchor: int, cue_start: int, text: str, unit: _Unit) -> list[Figure]:
    after = [f for f in figs if f.start >= anchor]
    pool = [f for f in after if unit.carries(f, text)] or after
    if pool:
        single = len({f.value for f in pool}) == 1
        return [pool[0]] if single or _adjacent(text[anchor : pool[0].start]) else pool
    before = [f for f in figs if f.end <= cue_start]
    pool = [f for f in before if unit.carries(f, text)] or before
    return pool[-1:] if len({f.value for f in pool}) == 1 else pool


def _designations(text: str, compat: list[Figure], unit: _Unit) -> list[tuple[int, list[Figure]]]:
    """(tier, designated figures) per cue sentence; more than one figure means the sentence is ambiguous."""
    spans = _sentences(text)
    out: list[tuple[int, list[Figure]]] = []
    for i, (a, b) in enumerate(spans):
        sentence = text[a:b]
        figs = [f for f in compat if a <= f.start < b]
        cue = next(
            ((t, ms[-1]) for t, p in enumerate(_TIER_CUES) if (ms := list(p.finditer(sentence)))), None
        )
        bold = [f for f in figs if any(m.start() <= f.start - a < m.end() for m in _BOLD.finditer(sentence))]
        if cue is None or (cue[0] == 2 and bold):
            if bold:
                pool = [f for f in bold if unit.carries(f, text)] or bold
                out.append((1, pool[-1:] if len({f.value for f in pool}) == 1 else pool))
            continue
        tier, m = cue
        anchor = a + m.end()
        later_eq = [e for e in re.finditer("=", sentence) if a + e.end() > anchor]
        anchor = a + later_eq[-1].end() if later_eq else anchor
        picked = _pick(figs, anchor, a + m.start(), text, unit)
        heading = len(re.findall(r"[A-Za-z]+", sentence)) <= 4 or sentence.rstrip(" *_#\n").endswith(":")
        if not picked and not figs and tier < 2 and heading and i + 1 < len(spans):
            na, nb = spans[i + 1]
            picked = _pick([f for f in compat if na <= f.start < nb], na, na, text, unit)
        if picked:
            out.append((tier, picked))
    return out


def identify_answer_figure(text: str, numeric: NumericSpec) -> FigureIdentification:
    """Choose the answer figure among the released figures without looking at the expected value."""
    text = text or ""
    figures = extract_figures(text)
    unit = _Unit(numeric.answer_unit)
    compat = [f for f in figures if unit.compatible(f)]
    lowered = text.lower()
    declined = any(marker.lower() in lowered for marker in numeric.decline_markers if marker.strip())
    found = _designations(text, compat, unit)
    if found:
        top = min(tier for tier, _ in found)
        picks = [figs for tier, figs in found if tier == top]
        flat = tuple(f for figs in picks for f in figs)
        if declined:
            return FigureIdentification("ambiguous", None, flat, "declines but also states a cued figure")
        if any(len(figs) > 1 for figs in picks) or len({f.value for f in flat}) > 1:
            return FigureIdentification("ambiguous", None, flat, f"cue tier {top} designates distinct values")
        return FigureIdentification("found", picks[-1][0], flat, f"designated by a cue of tier {top}")
    if declined:
        return FigureIdentification("declined", None, (), "decline marker present and no cued figure")
    if not compat:
        why = "no figure compatible with the answer unit" if figures else "no figure released"
        return FigureIdentification("none", None, (), why)
    carrying = [f for f in compat if unit.carries(f, text)]
    if carrying:
        return FigureIdentification(
            "found", carrying[-1], tuple(carrying), "last figure carrying the answer unit"
        )
    if len({f.value for f in compat}) == 1:
        return FigureIdentification("found", compat[-1], tuple(compat), "the only value released")
    return FigureIdentification("ambiguous", None, tuple(compat), "several figures and no cue")
