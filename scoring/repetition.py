"""A repetition loop at the end of a model's text: the same span over and over until max_tokens.

Small models decoding greedily fall into these (a phrase or a JSON fragment repeated until the token
limit cuts it, often mid-repeat). Naming the loop in the record makes a truncated judgement or answer
readable as what it is, instead of a JSON error or an answer that merely stops.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_UNIT_CHARS = 1500  # a loop of whole sections (a heading list repeated) is this long
MIN_REPEATS = 3
MIN_LOOP_CHARS = 60  # shorter runs (a row of dashes, "..." ) are formatting, not a loop


@dataclass(frozen=True)
class RepetitionLoop:
    unit: str  # one repeat of the looping span
    repeats: float  # how many times it occurs at the end (the last one may be cut off)
    chars: int  # how much of the text's end the loop covers

    def describe(self) -> str:
        shown = self.unit if len(self.unit) <= 80 else self.unit[:77] + "..."
        return f"repetition loop: {shown!r} repeated {self.repeats:.1f} times at the end ({self.chars} chars)"

    def as_record(self) -> dict[str, object]:
        return {"unit": self.unit, "repeats": round(self.repeats, 1), "chars": self.chars}


def _run_at_end(text: str, period: int) -> int:
    """How many characters at the end equal the character `period` places before them."""
    n = 0
    i = len(text) - 1
    while i - period >= 0 and text[i] == text[i - period]:
        n += 1
        i -= 1
    return n


def repetition_loop(text: str | None) -> RepetitionLoop | None:
    """The loop the text ends in, if any: the shortest period whose repeats cover the most of the end,
    at least MIN_REPEATS repeats and MIN_LOOP_CHARS characters, with a letter or digit in it."""
    if not text:
        return None
    best: RepetitionLoop | None = None
    for period in range(1, min(MAX_UNIT_CHARS, len(text) // MIN_REPEATS) + 1):
        covered = _run_at_end(text, period) + period
        repeats = covered / period
        if repeats < MIN_REPEATS or covered < MIN_LOOP_CHARS:
            continue
        start = len(text) - covered
        unit = text[start:start + period]
        if not any(ch.isalnum() for ch in unit):  # rows of dashes or brackets are layout, not a loop
            continue
        if best is None or covered > best.chars:
            best = RepetitionLoop(unit, repeats, covered)
    return best
