"""Every figure a final answer releases, and which one is THE answer.

`extract_figures` is `scoring.numbers.figures_in`: every released figure with its literal text and
exact Decimal value, after the shared number normalisation (grouping of both kinds, decimal comma,
currency marks and words, percent, number words with a unit, fractions). What counts as a figure, and
what deliberately does not (ids, dates, versions, ranges, list numbering), is documented there and in
docs/PROTOCOL.md ("Numbers and units").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from afpbench.fixtures.numeric_schema import NumericSpec
from afpbench.scoring.numbers import CURRENCY_CODES, CURRENCY_SYMBOLS, DOLLAR_CODES, Figure, currency_code, figures_in

__all__ = ["Figure", "FigureIdentification", "extract_figures", "identify_answer_figure"]


def extract_figures(text: str) -> list[Figure]:
    """Every figure the text releases, in order of appearance."""
    return figures_in(text)


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
_OPERAND_WORDS = {
    "of", "and", "plus", "minus", "from", "between", "with", "times", "by", "over", "less",
    "including", "includes", "excluding", "without",
}  # fmt: skip
_COPULA = re.compile(r"\b(?:is|are|was|were|equals|makes|gives)\b|:")
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
    return {currency_code(mark) or mark.upper()}


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
            # "46 days" is never a money answer; a bare figure or a compatible currency can be
            money = f.currency is None or bool(_currency_codes(f.currency) & self.codes)
            return not f.percent and f.unit is None and money
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
        if single or _adjacent(text[anchor : pool[0].start]):
            return [pool[0]]
        # "the total including the EUR 40.00 lump sum is EUR 276.96": the figure after the verb
        verb = _COPULA.search(text, pool[0].end, pool[-1].start)
        if verb is None:
            return pool
        later = [f for f in pool if f.start >= verb.end()]
        return [later[0]] if later and _adjacent(text[verb.end() : later[0].start]) else pool
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
        # a bold figure after the cue is the one released ("| **Total** | 236.96 + 40.00 | **276.96** |")
        bold_after = [f for f in bold if f.start >= anchor]
        picked = _pick(bold_after or figs, anchor, a + m.start(), text, unit)
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
