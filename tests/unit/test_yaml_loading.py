"""fixtures/yaml_loading.py:load_yaml, YAML with limits: a repeated key is refused (YAML would keep the last), an
alias is always found before it can expand, a value YAML cannot hold is a named error, not a crash."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from afpbench.fixtures import yaml_loading as loader_module
from afpbench.fixtures.loader import FixtureError, FixtureFile, parse_fixture
from afpbench.fixtures.yaml_loading import _ANCHOR, load_yaml
from afpbench.reference.files import InputFileError

_ROOT = Path(__file__).resolve().parents[2]
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


# --- the direct construction of alias-free documents (yaml_loading.py:_tree) against PyYAML's constructor -----

_PLAIN = ["yes", "No", "on", "OFF", "~", "null", "", "0x1F", "0o17", "017", "1_000", "1e3", "1.5e-3", ".inf", "-.Inf",
          ".nan", "12:30:00", "190:20:30.15", "2024-01-02", "2024-01-02T03:04:05Z", "2024-01-02 03:04:05.5 +01:00",
          "+12", "-0", "3.", "true", "False", "<<", "=", "a b", "'quoted'", '"dq \\u00e9"', "!!str 12", "!!int '7'",
          "!!float 1", "!!null ''", "!!bool true", "|-\n    block\n    text", ">\n    folded\n    text", "CHF 1'120.00"]


def _documents() -> list[str]:
    rng = random.Random(16)
    texts = [path.read_text() for folder in (_ROOT / "fixtures" / "pilot", _ROOT / "fixtures" / "pilot" / "simulated",
                                             _ROOT / "reference" / "specs", _ROOT / "reference")
             for path in sorted(folder.glob("*.yaml"))]
    texts += ["", "# only a comment\n", "a: 1\n---\nb: 2\n", "[1, [2, [3, {a: b}]]]", "? [a, b]\n: c\n",
              "? {a: 1}\n: c\n", "m: {<<: {a: 1}, b: 2}\n", "m: {<<: [{a: 1}, {c: 3}], b: 2}\n",
              "1: a\n'1': b\n", "1: a\n1: b\n",
              "a: {b: {c: 1, c: 2}}\n", "!!omap [a: 1, b: 2]", "!!pairs [a: 1, a: 2]", "!!set {a, b}", "!foo x",
              "!!python/object:os.system x", "a: !!binary aGVsbG8=\n", "[" * 50 + "]" * 50, "a: [1, 2\n", "\ta: 1",
              "x: 'caf\u00e9 \u2013 \U0001f600'\n", "? |\n  block key\n: v\n", "a:\n  - b: 1\n    c: [x, y]\n  - 2\n"]
    for _ in range(400):
        lines = []
        for i in range(rng.randint(1, 6)):
            value = rng.choice(_PLAIN)
            if "\n" in value:
                lines.append(f"k{i}: {value}")
            elif rng.random() < 0.3:
                lines.append(f"k{i}: [{value}, {{x: {rng.choice(_PLAIN[:30])}}}]")
            else:
                key = rng.choice([f"k{i}", f"'{i}'", str(i), "k0", "null", "2024-01-02"])
                lines.append(f"{key}: {value}")
        texts.append("\n".join(lines) + "\n")
    return texts


def _outcome(text: str) -> tuple[str, str]:
    try:
        return "value", repr(load_yaml(text))
    except InputFileError as exc:
        return "error", str(exc)


def test_alias_free_documents_load_as_pyyamls_constructor_loads_them(monkeypatch):
    """Values (types included: repr) and errors, on the pilot fixtures, the reference specs, edge cases (merges,
    repeated and unhashable keys, explicit tags, multiple documents) and 400 documents of YAML 1.1's tricky
    plain scalars (yes/on/~/0x1F/12:30:00/dates) in random places."""
    documents = _documents()
    direct = [_outcome(text) for text in documents]
    monkeypatch.setattr(loader_module, "_tree", lambda loader, node: loader.construct_document(node))
    through_pyyaml = [_outcome(text) for text in documents]
    assert sum(kind == "error" for kind, _ in direct) >= 10, "the corpus lost its error cases"
    for text, mine, theirs in zip(documents, direct, through_pyyaml, strict=True):
        assert mine == theirs, text
