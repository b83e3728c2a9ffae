"""The figures a rendered prompt shows, each distinct part scanned once.

A prompt's visible text is its parts (system instruction, user message, tool descriptions) joined by
newlines. The four conditions of a fixture share the user message and tools, and every fixture of a
sweep shares each condition's instruction, so the validity gate scanned the same long instruction texts
a thousand times over (two thirds of a 1,000-fixture sweep's creation). Here each part's figures come
from a small cache, shifted to their place in the joined text. The result is exactly `figures_in` of the
joined text: where a figure could reach across a junction (a part ending in "EUR", the next starting
with "100"; a number followed by a unit word; a label word before a number), the text around the
junction is scanned both ways and, if they differ, the whole joined text is scanned instead. The
prompts of one fixture share junctions (user message to tools) and window texts (the user message's
head), so `figures_by_prompt` checks each of those once for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from afpbench.scoring.numbers import Figure, figures_in
from afpbench.scoring.render import VISIBLE_JOIN as JOIN
from afpbench.scoring.vocabulary import normalise_space

# Wider than anything a figure's pattern or its context looks at across a junction (a currency code and a
# space before a number, a label word up to 20 characters before it, a scale, percent or unit word after).
_JUNCTION_WINDOW = 64
assert JOIN.isspace(), "folded_text joins the parts' words: no word may span a junction"


@lru_cache(maxsize=64)  # bounded: the instructions of a sweep plus a few fixtures' user messages
def _part_figures(part: str) -> tuple[Figure, ...]:
    return tuple(figures_in(part))


def _shifted(figures: Sequence[Figure], by: int) -> list[Figure]:
    if not by:
        return list(figures)
    # The constructor, not dataclasses.replace: a third of the scan's time went to replace's introspection.
    return [Figure(f.text, f.value, f.start + by, f.end + by, f.currency, f.percent, f.unit, f.words)
            for f in figures]


class _Junctions:
    """Whether junctions are inert, each (tail, head) pair and each window scanned once per instance."""

    def __init__(self) -> None:
        self._inert: dict[tuple[str, str], bool] = {}
        self._scans: dict[str, list[Figure]] = {}

    def _scan(self, window: str) -> list[Figure]:
        if window not in self._scans:
            self._scans[window] = figures_in(window)
        return self._scans[window]

    def inert(self, before: str, after: str) -> bool:
        """True when the text around one junction has the same figures scanned whole as scanned in parts."""
        tail, head = before[-_JUNCTION_WINDOW:], after[:_JUNCTION_WINDOW]
        if (tail, head) not in self._inert:
            apart = [*self._scan(tail), *_shifted(self._scan(head), len(tail) + len(JOIN))]
            self._inert[tail, head] = figures_in(tail + JOIN + head) == apart
        return self._inert[tail, head]


def figures_in_parts(parts: Sequence[str], junctions: _Junctions | None = None) -> list[Figure]:
    """`figures_in(JOIN.join(parts))`, computed part by part."""
    junctions = junctions or _Junctions()
    if not all(junctions.inert(a, b) for a, b in zip(parts, parts[1:], strict=False)):
        return figures_in(JOIN.join(parts))
    out: list[Figure] = []
    offset = 0
    for part in parts:
        out += _shifted(_part_figures(part), offset)
        offset += len(part) + len(JOIN)
    return out


def figures_by_prompt(parts_of: Mapping[str, Sequence[str]]) -> dict[str, list[Figure]]:
    """`figures_in_parts` of each prompt (e.g. condition -> visible parts), sharing the junction checks."""
    junctions = _Junctions()
    return {key: figures_in_parts(parts, junctions) for key, parts in parts_of.items()}


@lru_cache(maxsize=64)  # the same parts as `_part_figures`
def _folded_part(part: str) -> str:
    return normalise_space(part).casefold()


def folded_text(parts: Sequence[str]) -> str:
    """`normalise_space(JOIN.join(parts)).casefold()`, part by part: JOIN is whitespace, so no word spans
    two parts, and case folding maps each character on its own."""
    return " ".join(folded for folded in map(_folded_part, parts) if folded)
