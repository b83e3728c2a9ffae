"""The AFP vocabulary: words a baseline (conditions A and B) has no reason to use.

The protocol forbids scoring that requires AFP vocabulary, section names or fields. We derive that
vocabulary from the C and D instruction texts themselves, so a user's own AFP text brings its own terms:

- markdown heading texts (`#` .. `######`), and
- bold labels, written `**Label:**` or `**Label**:`,

lower-cased and stripped of list numbering and trailing punctuation; plus the fixed word "afp".

Dropped: terms shorter than 4 characters, and the stop-list below. The stop-list holds only everyday
words that any answer, fixture or rubric uses in plain English (and the protocol's own rubric
dimension names, which belong to the protocol, not to AFP). A term on it would make the validity gate
reject ordinary fixtures; a term missing from it only makes the gate stricter. Keep it short.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

FIXED_TERMS = frozenset({"afp"})
MIN_TERM_LENGTH = 4

STOP_TERMS = frozenset(
    {
        # everyday section words any instruction set or answer may use
        "answer", "context", "evidence", "example", "examples", "goal", "input", "inputs", "instructions",
        "note", "notes", "output", "overview", "purpose", "result", "results", "rules", "sources", "steps",
        "summary", "task", "tasks",
        # the protocol's shared rubric (reference/protocol.yaml), used by every condition's judging
        "task correctness", "evidence discipline", "uncertainty handling", "failure control",
    }
)

_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE)
_BOLD_LABEL = re.compile(r"\*\*([^*\n]+?):\*\*|\*\*([^*\n]+?)\*\*:")
_NUMBERING = re.compile(r"^(?:\d+(?:\.\d+)*[.)]?|[A-Za-z][.)])\s+")
_EDGE_PUNCT = " \t\"'`*_:;.,!?-–—()[]"


def normalise_space(text: str) -> str:
    return " ".join(text.split())


def _clean(raw: str) -> str:
    term = normalise_space(raw.replace("**", "").replace("__", "")).strip(_EDGE_PUNCT)
    term = _NUMBERING.sub("", term).strip(_EDGE_PUNCT)
    return term.casefold()


def afp_terms(instruction_texts: Iterable[str]) -> frozenset[str]:
    """Terms from the headings and bold labels of the given instruction texts (pass C and D)."""
    terms: set[str] = set(FIXED_TERMS)
    for text in instruction_texts:
        found = [m.group(1) for m in _HEADING.finditer(text)]
        found += [m.group(1) or m.group(2) for m in _BOLD_LABEL.finditer(text)]
        for raw in found:
            term = _clean(raw)
            if len(term) >= MIN_TERM_LENGTH and term not in STOP_TERMS:
                terms.add(term)
    return frozenset(terms)


def _term_regex(term: str) -> str:
    # Word-boundary aware without relying on \b (a term may start or end with a non-word character);
    # any run of whitespace in the text matches the single spaces of the term.
    words = [re.escape(w) for w in term.split()]
    return r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)"


def find_terms(text: str, terms: Iterable[str]) -> list[str]:
    """The terms that occur in `text` as whole words (case-insensitive), sorted.

    A plain substring test on the case-folded, space-normalised text comes first: it is implied by a
    match (the pattern's whitespace runs collapse to the term's single spaces), so only the few terms
    that pass it get the exact pattern. The validity gate calls this for every text of every fixture.
    """
    folded = normalise_space(text).casefold()
    prepared = _prepared(terms if isinstance(terms, frozenset) else frozenset(terms))
    return sorted(t for t, needle, pattern in prepared if needle in folded and pattern.search(text))


@functools.lru_cache(maxsize=16)  # a sweep has one vocabulary
def _prepared(terms: frozenset[str]) -> tuple[tuple[str, str, re.Pattern[str]], ...]:
    """(term, its folded text, its exact pattern) for each non-blank term."""
    return tuple((t, normalise_space(t).casefold(), re.compile(_term_regex(t), re.IGNORECASE))
                 for t in terms if t.strip())
