"""The figures a rendered prompt shows, each distinct part scanned once.

A prompt's visible text is its parts (system instruction, user message, tool descriptions) joined by
newlines. The four conditions of a fixture share the user message and tools, and every fixture of a
sweep shares each condition's instruction, so the validity gate scanned the same long instruction texts
a thousand times over (two thirds of a 1,000-fixture sweep's creation). Here each part's figures come
from a small cache, shifted to their place in the joined text. The result is exactly `figures_in` of the
joined text: where a figure could reach across a junction (a part ending in "EUR", the next starting
with "100"; a number followed by a unit word; a label word before a number), the text around the
junction is scanned both ways and, if they differ, the whole joined text is scanned instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from afpbench.scoring.numbers import Figure, figures_in
from afpbench.scoring.render import VISIBLE_JOIN as JOIN

# Wider than anything a figure's pattern or its context looks at across a junction (a currency code and a
# space before a number, a label word up to 20 characters before it, a scale, percent or unit word after).
_JUNCTION_WINDOW = 64


@lru_cache(maxsize=64)  # bounded: the instructions of a sweep plus a few fixtures' user messages
def _part_figures(part: str) -> tuple[Figure, ...]:
    return tuple(figures_in(part))


def _shifted(figures: Sequence[Figure], by: int) -> list[Figure]:
    if not by:
        return list(figures)
    # The constructor, not dataclasses.replace: a third of the scan's time went to replace's introspection.
    return [Figure(f.text, f.value, f.start + by, f.end + by, f.currency, f.percent, f.unit, f.words)
            for f in figures]


def _junction_inert(before: str, after: str) -> bool:
    """True when the text around one junction has the same figures scanned whole as scanned in parts."""
    tail, head = before[-_JUNCTION_WINDOW:], after[:_JUNCTION_WINDOW]
    apart = [*figures_in(tail), *_shifted(figures_in(head), len(tail) + len(JOIN))]
    return figures_in(tail + JOIN + head) == apart


def figures_in_parts(parts: Sequence[str]) -> list[Figure]:
    """`figures_in(JOIN.join(parts))`, computed part by part."""
    if not all(_junction_inert(a, b) for a, b in zip(parts, parts[1:], strict=False)):
        return figures_in(JOIN.join(parts))
    out: list[Figure] = []
    offset = 0
    for part in parts:
        out += _shifted(_part_figures(part), offset)
        offset += len(part) + len(JOIN)
    return out
