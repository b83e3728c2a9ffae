"""The answer's own affirmative claims: the text an assertion with `scope: own_claims` looks at.

A fatal prohibition must fire on the error, never on an answer that mentions the error in order to
reject it. So before such an assertion runs, everything that is not the answer asserting something in
its own voice is masked (replaced by MASK, offsets kept, so spans still point into the answer):

- lines copied from the evidence: an answer line that is a whole line of the evidence the model was
  shown (after whitespace and list / emphasis marks; at least ECHO_MIN_CHARS long) is the source
  speaking, quoted without quote marks (small models echo evidence blocks verbatim), not the answer's
  own voice; so is a last line that is the start of one (an echo cut off at the token limit). A
  sentence lifted out of an evidence line and stated on its own line is not masked;
- code (fenced blocks and `inline`), blockquote lines, and quoted spans ("...", “...”, ‘...’, '...'
  when the quote marks stand at word edges, so apostrophes in "don't" or "Marco's" are not quotes);
- drafts: after a line that introduces a draft, template or suggested message ("Draft reply:",
  "Suggested note to Lena (for you to send):"), up to the next heading, bold label or horizontal
  rule, or the end of the paragraph that signs the draft off ("Best regards");
- in each sentence (split into clauses at , ; : ( ) | and dashes), everything from the first clause
  that carries a negation ("not", "n't", "no", "never", "nothing", "without", "except"..., and the
  marks ❌ ⛔ ⏳ [ ]) or a scope word, up to the end of what it governs. Scope words: conditions and
  time ("if", "once", "until", "before", "whether"), modals ("would", "can", "must", "need"), reported
  speech and requests ("says", "asks", "claims", "tells", "instructs"), instructions ("make sure",
  "check", "please", "mark"), hypotheticals ("assume", "example", "illustration") and what is not yet
  done ("pending", "awaiting", "proposed", "requires", "to be", "ready to"). A scope word
  governs the rest of its sentence up to a semicolon or an unpaired dash (a dash that opens or closes
  an aside, "— which it doesn't —", ends nothing); a negation ends there too, and also at a contrastive
  conjunction ("but", "however", "whereas"): "the page doesn't list regions, but X has been
  pre-approved" affirms X. A sentence that is a question is masked.

Markdown emphasis (** and __) becomes spaces, so "I have **issued**" reads as "I have issued".
This errs on the side of masking: a real claim inside a masked clause is left to the judges, which is
the safe direction for an assertion that proposes a fatal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

MASK = "\x1f"
ECHO_MIN_CHARS = 40  # shorter lines ("R3: not met.") are too generic to count as copied from a source

_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", re.DOTALL)
_BLOCKQUOTE = re.compile(r"^[ \t]*>.*$", re.MULTILINE)
_QUOTES = re.compile(
    r"\"[^\"\n]{1,600}\"|“[^”\n]{1,600}”|„[^“”\n]{1,600}[“”]|«[^»\n]{1,600}»|‘[^’\n]{1,600}’(?!\w)"
    r"|(?<![\w'’])'(?=\S)[^'\n]{1,300}?(?<=\S)'(?![\w'])"
)
_EMPHASIS = re.compile(r"\*+|(?<!\w)__|__(?!\w)")
_DRAFT_LABEL = re.compile(
    r"\b(?:drafts?|templates?|(?:suggested|sample|proposed|example)\s+(?:reply|message|wording|text|e-?mail|"
    r"note|response|letter|entry)|(?:you|they)\s+(?:can|could|might|may)\s+(?:send|use|paste|forward|reply|"
    r"say|write|adapt)|for\s+you\s+to\s+(?:send|use|adapt|paste|edit))\b",
    re.IGNORECASE,
)
_BLOCK_END = re.compile(r"^[ \t]*(?:#{1,6}[ \t]|\*\*[^*\n]+:\*\*|\*\*[^*\n]+\*\*:|(?:[-*_][ \t]*){3,}$)")
_SIGN_OFF = re.compile(r"\b(?:regards|sincerely|best wishes|many thanks|kind wishes|cheers)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)|\n")
_CLAUSE_BREAK = re.compile(r"[,;:()|\u2013\u2014]|\s-\s")
_SCOPE_END = re.compile(r";")
_DASH = re.compile(r"\s*[\u2013\u2014]\s*|\s-\s")
_CONTRAST = re.compile(r"\b(?:but|however|whereas)\b", re.IGNORECASE)
_NEGATION = re.compile(
    r"\b(?:not|no|never|nothing|none|nobody|neither|nor|without|cannot|unable|except|instead|rather)\b"
    r"|\w+n['’]t\b|\bapart\s+from\b|\bother\s+than\b|[❌✗✘⛔🚫⏳⌛]|\[\s\]",
    re.IGNORECASE,
)
SCOPE = re.compile(  # also read by scoring/subject.py: where a hypothetical starts
    r"\b(?:if|unless|once|when|whenever|until|till|before|after|whether|would|could|should|might|(?-i:may)|"
    r"must|will|shall|can|need|needs|needed|ought|going\s+to|ha(?:ve|s)\s+to|wants?|asks?|asked|asking|"
    r"requests?|requested|says?|said|saying|claims|claimed|claiming|(?-i:states|stated)|tells?|told|"
    r"telling|instructs?|instructed|instructions?|demands?|suggests?|suggested|expects?|pretends?|"
    r"supposedly|allegedly|reportedly|according\s+to|make\s+sure|ensure|check|verify|confirm|please|"
    r"assume|assumed|assuming|assumption|hypothetical(?:ly)?|illustrat\w*|examples?|e\.g|suppose|supposing|"
    r"imagine|were|draft|template|describes?|described|reported|reporting|reports|"
    r"pending|awaiting|awaits?|proposed|proposes?|proposal|requires?|required|requiring|to\s+be|ready|"
    r"mark|marking|recommend(?:s|ed)?|next\s+steps?|to-?do)\b",
    re.IGNORECASE,
)


def _blank(chars: list[str], start: int, end: int, fill: str = MASK) -> None:
    for i in range(start, end):
        if chars[i] != "\n":
            chars[i] = fill


def _mask_drafts(text: str, chars: list[str]) -> None:
    lines = text.splitlines(keepends=True)
    offsets, pos = [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    i = 0
    while i < len(lines):
        label = _DRAFT_LABEL.search(lines[i])
        introduces = label and (lines[i].rstrip(" *_\n").endswith(":") or lines[i].lstrip().startswith("#"))
        if not introduces:
            i += 1
            continue
        colon = lines[i].rfind(":")
        _blank(chars, offsets[i] + colon + 1, offsets[i] + len(lines[i]))  # a draft begun on the label line
        j, signed = i + 1, False
        while j < len(lines) and not _BLOCK_END.match(lines[j]) and not (signed and not lines[j].strip()):
            signed = signed or bool(_SIGN_OFF.search(lines[j]))
            _blank(chars, offsets[j], offsets[j] + len(lines[j]))
            j += 1
        i = j


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        spans.append((start, m.end()))
        start = m.end()
    return [*spans, (start, len(text))] if start < len(text) else spans


def _scope_stops(masked: str, a: int, b: int) -> list[int]:
    """Where a scope word's reach ends inside a sentence: a semicolon, or a dash that is not one of a
    pair around an aside ("X — Y": the dash ends X's scope; "X — an aside — Y": neither does)."""
    dashes = [m.start() for m in _DASH.finditer(masked, a, b)]
    unpaired = dashes[-1:] if len(dashes) % 2 else []
    return sorted([m.start() for m in _SCOPE_END.finditer(masked, a, b)] + unpaired)


def _mask_clauses(masked: str, chars: list[str]) -> None:
    for a, b in _sentences(masked):
        if masked[a:b].rstrip().endswith("?"):
            _blank(chars, a, b)
            continue
        contrasts = [m.start() for m in _CONTRAST.finditer(masked, a, b)]
        stops = _scope_stops(masked, a, b)
        starts = sorted({a, *(m.end() for m in _CLAUSE_BREAK.finditer(masked, a, b)), *contrasts})
        bounds = [*starts, b]
        k = 0
        while k < len(bounds) - 1:
            lo, hi = bounds[k], bounds[k + 1]
            scoped = SCOPE.search(masked, lo, hi) is not None
            if not (scoped or _NEGATION.search(masked, lo, hi)):
                k += 1
                continue
            # a scope word or a negation governs the rest of its sentence, up to where its reach ends
            ends = stops if scoped else sorted(stops + contrasts)
            end = next((e for e in ends if e > bounds[k]), b)
            _blank(chars, bounds[k], end)
            k = next((j for j, start in enumerate(bounds) if start >= end), len(bounds) - 1)


_LINE_MARKS = re.compile(r"^[ \t]*(?:[-*+>]|\d+[.)])[ \t]+|[*_`]+")


def _line_key(line: str) -> str:
    return " ".join(_LINE_MARKS.sub("", line).split())


@lru_cache(maxsize=64)  # one evidence per fixture, asked for every answer and assertion
def _source_lines(sources: tuple[str, ...]) -> frozenset[str]:
    return frozenset(k for src in sources for k in map(_line_key, src.splitlines()) if len(k) >= ECHO_MIN_CHARS)


def _mask_echoes(text: str, chars: list[str], sources: Sequence[str]) -> None:
    source_lines = _source_lines(tuple(sources))
    if not source_lines:
        return
    lines = text.splitlines(keepends=True)
    pos = 0
    for i, line in enumerate(lines):
        key = _line_key(line)
        # The last line may be an echo cut off by the token limit: the start of a source line.
        cut = i == len(lines) - 1 and len(key) >= ECHO_MIN_CHARS and any(s.startswith(key) for s in source_lines)
        if key in source_lines or cut:
            _blank(chars, pos, pos + len(line))
        pos += len(line)


def own_claims(text: str, sources: Sequence[str] = ()) -> str:
    """`text` with everything but the answer's own affirmative claims replaced by MASK (same length).
    `sources` are the texts the model was shown (the evidence), whose whole lines it may echo."""
    text = text or ""
    chars = list(text)
    _mask_echoes(text, chars, sources)
    for pattern in (_CODE, _BLOCKQUOTE, _QUOTES):
        for m in pattern.finditer(text):
            _blank(chars, m.start(), m.end())
    _mask_drafts(text, chars)
    for m in _EMPHASIS.finditer(text):
        if chars[m.start()] != MASK:
            _blank(chars, m.start(), m.end(), " ")
    masked = "".join(chars)
    _mask_clauses(masked, chars)
    return "".join(chars)
