"""fixtures/loader.py:load_yaml, YAML with limits: a repeated key is refused (YAML would keep the last), an
alias is always found before it can expand, a value YAML cannot hold is a named error, not a crash."""

from __future__ import annotations

import random
import re

import pytest

from afpbench.fixtures.loader import _ANCHOR, FixtureError, FixtureFile, load_yaml, parse_fixture
from afpbench.reference.files import InputFileError

# The anchor pattern as first written (every position tried): the rewrite must find exactly the same texts.
_ANCHOR_AS_FIRST_WRITTEN = re.compile(r"(?:^|[\s\[{,])&[^\s,\[\]{}]", re.MULTILINE)


def test_the_anchor_search_finds_the_same_texts_as_first_written():
    rng = random.Random(7)
    alphabet = "&a \n\t\r[]{},*:\u00a0\u0085\u2028"
    for _ in range(50_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
        assert bool(_ANCHOR.search(text)) == bool(_ANCHOR_AS_FIRST_WRITTEN.search(text)), repr(text)


@pytest.mark.parametrize("text", ["&r [1, *r]", "a: &r [1, *r]", "a:\t&r [1, *r]", "a:\n  - &r [*r]",
                                  "[1,&r [2, *r]]", "[&r [2, *r]]"])
def test_an_anchor_anywhere_a_node_starts_is_walked(text):
    with pytest.raises(InputFileError, match="refers to itself"):
        load_yaml(text)


@pytest.mark.parametrize("text", ["a: 1\na: 2\n", "a: {b: 1, b: 2}\n", "1: x\n1.0: y\n",
                                  "base: &b {x: 1}\nm: {<<: *b, y: 1, y: 2}\n"])
def test_a_repeated_key_is_refused_and_named(text):
    with pytest.raises(InputFileError, match="duplicate key"):
        load_yaml(text)


def test_a_key_brought_in_by_a_merge_may_be_overridden_once():
    assert load_yaml("base: &b {x: 1, y: 1}\nm: {<<: *b, y: 2}\n")["m"] == {"x": 1, "y": 2}


def test_a_bad_date_is_a_fixture_error_naming_the_file():
    with pytest.raises(FixtureError, match=r"^P01\.yaml: not valid YAML: a value cannot be read \(month must"):
        parse_fixture(FixtureFile("P01.yaml", "id: P01\ndate: 2024-13-01\n"))


@pytest.mark.parametrize("value", ["!!timestamp x", "!!bool x", "!!set [1]"])
def test_a_value_that_does_not_fit_its_tag_is_a_fixture_error_naming_the_file(value):
    # PyYAML's constructors fail bare on these (AttributeError, KeyError, TypeError): the user gets one line.
    with pytest.raises(FixtureError, match=r"^P01\.yaml: not valid YAML: a value does not fit its explicit tag"):
        parse_fixture(FixtureFile("P01.yaml", f"id: P01\ntask: {value}\n"))


@pytest.mark.parametrize(("text", "loaded"), [("a: !!timestamp 2024-01-02", "2024-01-02"), ("a: !!bool yes", True),
                                              ("a: !!set {x: null}", {"x"})])
def test_a_value_that_fits_its_tag_still_loads(text, loaded):
    value = load_yaml(text)["a"]
    assert (value.isoformat() if hasattr(value, "isoformat") else value) == loaded
