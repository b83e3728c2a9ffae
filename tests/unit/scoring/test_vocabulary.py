"""AFP vocabulary: derived from the C/D instruction headings and bold labels (validity gate item 5)."""

import re

from afpbench.scoring.vocabulary import STOP_TERMS, _term_regex, afp_terms, find_terms

C_TEXT = """# AFP Core Workflow

## 1. Evidence Ledger
Keep one line per source.

### Step 2: Conflict Register ###

**Authority Check:** rank the sources.
**Gate**: four letters is long enough.
**Human Review Trigger**: stop and ask.
## Summary
## Sources
#NotAHeading because there is no space
"""


def test_terms_come_from_headings_and_bold_labels_lower_cased():
    terms = afp_terms([C_TEXT])
    assert {"afp core workflow", "evidence ledger", "step 2: conflict register", "authority check"} <= terms
    assert "human review trigger" in terms


def test_fixed_word_afp_is_always_a_term():
    assert afp_terms([]) == frozenset({"afp"})


def test_short_terms_stop_words_and_non_headings_are_ignored():
    terms = afp_terms([C_TEXT])
    assert "gate" in terms  # exactly four characters: kept
    assert {"summary", "sources"} <= STOP_TERMS
    assert "summary" not in terms and "sources" not in terms
    assert not any("notaheading" in t for t in terms)
    assert all(len(t) >= 4 for t in terms - {"afp"})


def test_short_label_below_four_characters_is_dropped():
    assert afp_terms(["**Go:** now\n## Ask\n"]) == frozenset({"afp"})


def test_rubric_dimension_names_are_protocol_words_not_afp_terms():
    terms = afp_terms(["## Evidence discipline\n## Task correctness\n"])
    assert terms == frozenset({"afp"})


def test_find_terms_is_case_insensitive_and_whitespace_tolerant():
    terms = afp_terms([C_TEXT])
    text = "I built an EVIDENCE\n  ledger and an Authority check."
    assert find_terms(text, terms) == ["authority check", "evidence ledger"]


def test_find_terms_respects_word_boundaries():
    assert find_terms("The staff party was fun; laffp.", {"afp"}) == []
    assert find_terms("Following AFP, I checked.", {"afp"}) == ["afp"]
    assert find_terms("gatekeeping", {"gate"}) == []


def test_find_terms_equals_the_plain_search_of_every_term():
    """The prepared substring pre-test and patterns find exactly what each term's own pattern finds."""
    terms = frozenset({"evidence ledger", "authority check", "afp", "gate", "claim-scope", "ledger", "  "})
    texts = ["Evidence\n  Ledger: see the AUTHORITY check", "the evidence-ledger", "AFP's gate; gatekeeping",
             "claim-scope (claim scope)", "ledgers", "\u212aelvin afp\u00a0gate", "", "Ledger\tafp"]
    for text in texts:
        plain = sorted(t for t in terms if t.strip() and re.search(_term_regex(t), text, re.IGNORECASE))
        assert find_terms(text, terms) == find_terms(text, set(terms)) == plain, text
