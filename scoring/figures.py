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
from afpbench.scoring.designation import designate, sentences
from afpbench.scoring.numbers import figures_in
from afpbench.scoring.numerals import CURRENCY_CODES, CURRENCY_SYMBOLS, DOLLAR_CODES, Figure, currency_code

__all__ = ["Figure", "FigureIdentification", "extract_figures", "identify_answer_figure"]


def extract_figures(text: str) -> list[Figure]:
    """Every figure the text releases, in order of appearance."""
    return figures_in(text)


# --- Answer figure identification -------------------------------------------------------------------
# Which released figure is THE answer. Deliberately blind to the expected value (choosing the figure
# nearest the reference would bias accuracy upwards); it uses only the text, the declared answer unit and
# the declared decline markers. Rules, in order (docs/PROTOCOL.md, "The answer figure"):
# 1. Cue sentences designate a figure. Tiers: (0) words that hand the figure over for use: "final",
#    "answer", "the claim is", "total due", "amount to claim", "should state", "for the letter", "in the
#    claim letter", \boxed, and their German and French forms ("Forderungsbetrag", "für das Schreiben",
#    "montant à réclamer", "dans la lettre"); (1) result words: "comes to", "amounts to", "works out to",
#    "total", "in total", "therefore", "thus", "result", "ergibt", "beträgt", "s'élève à", or a bold
#    figure; (2) "=", "→", "≈". In a cue sentence the anchor is the last cue of its best tier; the figure
#    it designates is chosen by scoring/designation.py (directly after the cue, followed to the end of an
#    arithmetic chain; else directly before it; ...), figures carrying the answer unit first. A
#    heading-like cue line ("Final answer:") designates the figure of the next sentence, if that sentence
#    designates one clearly.
# 2. The highest tier with any designation decides; if its designations disagree (distinct values) or
#    any is ambiguous, the result is AMBIGUOUS (a human decides). Otherwise the last one is FOUND.
# 3. A declared decline marker with no designated figure is DECLINED; with one, AMBIGUOUS.
# 4. Without cues: the last figure carrying the answer unit; else a single (or single-valued) figure;
#    else AMBIGUOUS. Figures that conflict with the unit (a percent or another currency for a money
#    answer) are never candidates; with no compatible figure the kind is NONE.

_TIER_CUES = (
    re.compile(
        r"\b(?:final|answer|in\s+conclusion|bottom\s+line)\b|\\boxed\b"
        r"|\b(?:should|must|would|will|to|i['’]d|we['’]d|i\s+would|we\s+would)\s+(?:state|put|enter|write|quote|"
        r"insert)\b"
        r"|\b(?:for|in|into|on)\s+(?:the|your|our|a)\s+(?:claim\s+|demand\s+|reminder\s+)?letter\b"
        r"|\b(?:the|our|your|total|overall|final)\s+claim\b(?=\s*(?::|is\b|amounts\b|comes\b|totals\b|of\b|"
        r"would\b|will\b|stands\b|\(|\*))|\bclaim(?:ed)?\s+amount\b|\bamount\s+(?:to|we\s+can|you\s+can)\s+claim\b"
        r"|(?:\b(?:can|could|to)\s+|\A[\s*#>\-]*)claim\b(?=\s*(?:EUR|€|\$|£|CHF|USD|\d))"
        r"|\b(?:total|amount)\s+(?:due|payable|owed)\b"
        r"|\btotal\s+amount\b|\b(?:forderungsbetrag|gesamtforderung|gesamtbetrag|endbetrag)\b"
        r"|\bf(?:ü|ue)r\s+das\s+(?:forderungs)?schreiben\b|\bim\s+(?:forderungs)?schreiben\b|\bzu\s+fordern\b"
        r"|\bmontant\s+(?:total\s+)?(?:à|a)\s+(?:réclamer|indiquer|payer)\b|\b(?:dans|pour)\s+la\s+lettre\b"
        r"|\btotal\s+(?:à|a)\s+réclamer\b",
        re.IGNORECASE,
    ),
    re.compile(
        r"\b(?:comes?\s+to|came\s+to|amounts?\s+to|works?\s+out\s+(?:to|at)|totals?|totalling|in\s+total|"
        r"altogether|therefore|thus|results?|ergibt|beträgt|insgesamt|somit|s['’]élève\s+à|au\s+total|donc)\b",
        re.IGNORECASE,
    ),
    re.compile(r"=|→|⇒|≈"),
)
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
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


def _designations(text: str, compat: list[Figure], unit: _Unit) -> list[tuple[int, list[Figure]]]:
    """(tier, designated figures) per cue sentence; more than one figure means the sentence is ambiguous."""
    spans = sentences(text)
    out: list[tuple[int, list[Figure]]] = []

    def prefer(f: Figure) -> bool:
        return unit.carries(f, text)

    for i, (a, b) in enumerate(spans):
        sentence = text[a:b]
        figs = [f for f in compat if a <= f.start < b]
        cue = next(
            ((t, ms[-1]) for t, p in enumerate(_TIER_CUES) if (ms := list(p.finditer(sentence)))), None
        )
        bold = [f for f in figs if any(m.start() <= f.start - a < m.end() for m in _BOLD.finditer(sentence))]
        if cue is None or (cue[0] == 2 and bold):
            if bold:
                pool = [f for f in bold if prefer(f)] or bold
                out.append((1, pool[-1:] if len({f.value for f in pool}) == 1 else pool))
            continue
        tier, m = cue
        anchor = a + m.end()
        # a bold figure after the cue is the one released ("| **Total** | 236.96 + 40.00 | **276.96** |")
        bold_after = [f for f in bold if f.start >= anchor]
        picked = designate(bold_after or figs, anchor, a + m.start(), text, b, prefer)
        heading = len(re.findall(r"[A-Za-z]+", sentence)) <= 4 or sentence.rstrip(" *_#\n").endswith(":")
        if not picked and not figs and tier < 2 and heading and i + 1 < len(spans):
            na, nb = spans[i + 1]
            following = designate([f for f in compat if na <= f.start < nb], na, na, text, nb, prefer)
            picked = following if len(following) == 1 else []
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
