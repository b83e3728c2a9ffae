"""Conditions A-D differ only in the system instruction: task and evidence render byte-identically."""

from __future__ import annotations

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_instructions
from afpbench.scoring.render import render

FIXTURES = load_fixtures()


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.id for f in FIXTURES])
def test_user_message_and_tools_identical_across_conditions(fixture):
    ins = load_instructions()
    prompts = {c: render(c, fixture, ins.text(c)) for c in "ABCD"}
    users = {p.user.encode("utf-8") for p in prompts.values()}
    assert len(users) == 1
    assert len({repr(p.tools) for p in prompts.values()}) == 1
    assert prompts["A"].system is None and [m["role"] for m in prompts["A"].messages()] == ["user"]
    for c in "BCD":
        assert prompts[c].system == ins.text(c)
        assert prompts[c].messages()[1]["content"] == prompts["A"].user


def test_fixture_text_is_data_not_template():
    """Template syntax inside evidence is inserted verbatim."""
    fx = FIXTURES[0]
    tricky = fx.model_copy(
        update={"task": fx.task + " {task} ${evidence} {{ x }} <b>&amp;</b> '; DROP TABLE cell;--"}
    )
    out = render("C", tricky, "instruction").user
    assert "{task} ${evidence} {{ x }} <b>&amp;</b> '; DROP TABLE cell;--" in out
