"""Which figure a cue designates within its sentence (used by answer-figure identification,
scoring/figures.py). Deliberately blind to any expected value: it reads only the text's layout.

Given a cue ("the claim is", "for the letter", "total", "=") in a sentence, the designated figure is, in
order:
1. the first figure after the cue when it follows directly (a short gap without operand words such as
   "of", "plus", "from"); if that figure is an operand of an arithmetic chain ("236.96 + 40.00 = 276.96",
   "15,200 × 12.37 % × 46 / 365 = 236.96") the chain is followed to its final result (the figure after
   the last "=", "→", "gives" of the chain): the final position, not the first intermediate;
2. else the figure directly after a copula that follows the first figure after the cue ("the total
   including the EUR 40.00 lump sum is EUR 276.96");
3. else the figure directly before the cue ("EUR 276.96 — that's the figure for the claim letter");
4. else, after the cue, a single value; several distinct values make the sentence ambiguous (all are
   returned); with no figure after the cue, a single value before it (several: ambiguous).
`prefer(figure)` says which figures carry the answer's unit: they are tried first.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from afpbench.scoring.numerals import Figure

_OPERAND_WORDS = {
    "of", "and", "plus", "minus", "from", "between", "with", "times", "by", "over", "less",
    "including", "includes", "excluding", "without",
}  # fmt: skip
_COPULA = re.compile(r"\b(?:is|are|was|were|equals|makes|gives|ist|beträgt|est)\b|:")
# An arithmetic operator right after a figure (up to two words such as "interest" or "p.a." between).
_OPERATOR = re.compile(
    r"\s*(?:[A-Za-zäöüé.]+\s+){0,2}?(?:[+×*÷/]|\bx\s*(?=[\d€$£(])|[-−]\s*(?=[\d€$£(])|"
    r"\b(?:plus|minus|times|less|divided\s+by|multiplied\s+by|zuzüglich|abzüglich)\b)",
    re.IGNORECASE,
)
_RESULT = re.compile(r"=|→|⇒|≈|\b(?:gives|giving|makes|making|ergibt|soit|yields|resulting\s+in)\b", re.IGNORECASE)
# A full stop after a common abbreviation ("i.e.", "e.g.", "p.a.", "approx.", "Art.") ends no sentence.
_ABBREVIATED = (  # the look-ahead first: the look-behinds are only tried at a full stop
    r"(?=[.!?])(?<!\bi\.e)(?<!\be\.g)(?<!\bp\.a)(?<!\bd\.h)(?<!\bz\.b)(?<!\bcf)(?<!\bca)(?<!\bapprox)(?<!\bincl)"
    r"(?<!\bexcl)(?<!\bno)(?<!\bart)(?<!\babs)(?<!\bpara)(?<!\bcl)"
)
_SENTENCE_END = re.compile(rf"\n+|{_ABBREVIATED}[.!?](?=\s|$)", re.IGNORECASE)
_PART_END = re.compile(rf"\n+|;|{_ABBREVIATED}[.!?]+(?=\s|$)", re.IGNORECASE)


def sentences(text: str, semicolons: bool = False) -> list[tuple[int, int]]:
    """Sentence spans: a line break or a full stop, exclamation or question mark before a space (not
    after an abbreviation); with `semicolons`, a semicolon ends a part too."""
    spans, start = [], 0
    for m in (_PART_END if semicolons else _SENTENCE_END).finditer(text):
        spans.append((start, m.end()))
        start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def adjacent(gap: str) -> bool:
    """A gap short enough, free of operand words and of a semicolon, for a cue to speak of the figure
    across it."""
    words = re.findall(r"[A-Za-zäöüéèà]+", gap.lower())
    return len(gap) <= 40 and len(words) <= 4 and ";" not in gap and not _OPERAND_WORDS.intersection(words)


def chain_result(figure: Figure, figs: list[Figure], text: str, end: int) -> Figure:
    """The final result of the arithmetic chain `figure` is an operand of (itself if it is none)."""
    while _OPERATOR.match(text, figure.end):
        marker = _RESULT.search(text, figure.end, end)
        later = [f for f in figs if marker and f.start >= marker.end()]
        if marker is None or not later:
            return figure
        figure = later[0]
    return figure


def designate(
    figs: list[Figure], anchor: int, cue_start: int, text: str, end: int, prefer: Callable[[Figure], bool]
) -> list[Figure]:
    """The figures the cue designates among `figs` (one sentence's, ending at `end`): one when clear,
    several when the sentence is ambiguous, none when it holds no candidate (module docstring)."""
    after = [f for f in figs if f.start >= anchor]
    pool = [f for f in after if prefer(f)] or after
    if pool and adjacent(text[anchor : pool[0].start]):
        return [chain_result(pool[0], figs, text, end)]
    verb = _COPULA.search(text, pool[0].end, pool[-1].start) if len(pool) > 1 else None
    later = [f for f in pool if verb and f.start >= verb.end()]
    if verb and later and adjacent(text[verb.end() : later[0].start]):
        return [later[0]]
    before = [f for f in figs if f.end <= cue_start]
    close = [f for f in before if prefer(f)] or before
    if close and adjacent(text[close[-1].end : cue_start]):
        return [close[-1]]
    if pool:
        return pool[:1] if len({f.value for f in pool}) == 1 else pool
    return close[-1:] if len({f.value for f in close}) == 1 else close
