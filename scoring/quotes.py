"""Does a judge's quote occur in the response? Compared after normalising what does not change the words.

Both texts are normalised the same way: Unicode compatibility forms (no-break and thin spaces, the
ellipsis character), typographic quotes and apostrophes to ' and ", dashes and the minus sign to -,
Markdown emphasis and code marks (*, _, `) removed, heading / blockquote / list markers at a line
start removed, whitespace collapsed, case folded. The quote may be wrapped in quotation marks, may
leave out its ends with "..." and may elide a middle part with "..."; every remaining fragment must
occur in the response, in order. Anything else (a paraphrase, a different word) is not found: the
judgement is then unusable, and the judge is asked again (a judge error, not a dispute).
"""

from __future__ import annotations

import re
import unicodedata

_QUOTE_MARKS = str.maketrans({"‘": "'", "’": "'", "‚": "'", "‛": "'", "′": "'",
                              "“": '"', "”": '"', "„": '"', "‟": '"', "″": '"', "«": '"', "»": '"',
                              "‐": "-", "‑": "-", "‒": "-", "–": "-", "—": "-", "―": "-", "\u2212": "-"})  # fmt: skip
_LINE_MARKERS = re.compile(r"^[ \t]*(?:#{1,6}|>+|[-*+•]|\d+[.)])[ \t]+", re.MULTILINE)
_EMPHASIS = re.compile(r"[*_`]+")
_EDGES = " \"'.,;:!?-"


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").translate(_QUOTE_MARKS)
    text = _LINE_MARKERS.sub("", text)
    text = _EMPHASIS.sub("", text)
    return " ".join(text.split()).casefold()


def quote_in(quote: str, response: str) -> bool:
    """True when every fragment of the quote (split at "...") occurs in the response, in order."""
    haystack = normalise(response)
    fragments = [f.strip(_EDGES) for f in normalise(quote).split("...")]
    fragments = [f for f in fragments if f]
    position = 0
    for fragment in fragments:
        found = haystack.find(fragment, position)
        if found < 0:
            return False
        position = found + len(fragment)
    return bool(fragments)
