"""The judges' quotes highlighted in the answer: each quoted span wrapped in <mark>, everything escaped.

A quote matches where its words appear in order with any whitespace between them (a judge may reflow
line breaks); overlapping spans are merged. A quote that is not in the answer marks nothing (the scorer
already refuses a flagged fatal whose quote is not in the response).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

from afpbench.api.viewer.html import Safe


def quote_spans(text: str, quotes: Iterable[str]) -> list[tuple[int, int]]:
    spans = []
    for q in quotes:
        words = (q or "").split()
        if not words:
            continue
        pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
        spans += [(m.start(), m.end()) for m in pattern.finditer(text)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def mark_quotes(text: str | None, quotes: Iterable[str]) -> Safe:
    """The answer as escaped text inside <pre>, with each quote's span in <mark>."""
    if text is None:
        return Safe('<pre class="answer">(no answer)</pre>')
    out, at = [], 0
    for start, end in quote_spans(text, quotes):
        out += [escape(text[at:start]), "<mark>", escape(text[start:end]), "</mark>"]
        at = end
    out.append(escape(text[at:]))
    return Safe('<pre class="answer">' + "".join(out) + "</pre>")
