"""Figures of a prompt scanned part by part are exactly the figures of its joined visible text."""

from __future__ import annotations

import dataclasses
import random

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_instructions
from afpbench.scoring.numbers import figures_in
from afpbench.scoring.prompt_figures import figures_by_prompt, figures_in_parts, folded_text
from afpbench.scoring.render import VISIBLE_JOIN, render
from afpbench.scoring.vocabulary import normalise_space
from tests.unit.scoring.test_numbers import VARIED


def test_every_pilot_prompt_matches_the_joined_scan():
    instructions = load_instructions()
    fixtures = load_fixtures("fixtures/pilot")
    checked = 0
    for fx in fixtures:
        for condition in "ABCD":
            prompt = render(condition, fx, instructions.text(condition))
            assert figures_in_parts(prompt.visible_parts()) == figures_in(prompt.visible_text()), (fx.id, condition)
            checked += 1
    assert len(fixtures) >= 8 and checked == 4 * len(fixtures)


def _naive(parts: list[str]) -> list:
    """Each part scanned alone and shifted, with no look at the junctions."""
    out, offset = [], 0
    for part in parts:
        out += [dataclasses.replace(f, start=f.start + offset, end=f.end + offset) for f in figures_in(part)]
        offset += len(part) + len(VISIBLE_JOIN)
    return out


@pytest.mark.parametrize("parts", [
    ["Pay the supplier EUR", "1,200.00 by Friday."],  # a currency code before the junction
    ["The deadline is 10", "days after receipt."],  # a unit word after it
    ["See step", "2 of the procedure."],  # a label word before a number
    ["twenty", "five percent of the fee"],  # number words across it
])
def test_figures_reaching_across_a_junction_are_the_joined_ones(parts):
    joined = figures_in(VISIBLE_JOIN.join(parts))
    assert _naive(parts) != joined, "the case must change when the junction is ignored to mean anything"
    assert figures_in_parts(parts) == joined


def test_condition_a_has_an_empty_system_part():
    parts = ["", "3 invoices, 2 reminders", "Evaluate 1200.50 + 300"]
    assert figures_in_parts(parts) == figures_in(VISIBLE_JOIN.join(parts)) == _naive(parts)


def test_prompts_sharing_junctions_match_the_joined_scans_on_varied_parts():
    """Varied number forms at every junction (end of one part, start of the next), in prompts that share
    parts the way one fixture's conditions do: `figures_by_prompt` and `folded_text` equal the plain
    scans of each joined text."""
    rng = random.Random(5)
    forms = [*VARIED, "Pay the supplier EUR", "see step", "twenty", "percent of the fee", "days after receipt"]
    for _ in range(150):
        user = rng.choice(forms) + " invoice INV-204 \u2212 " + rng.choice(forms)
        tools = [rng.choice(forms)] if rng.random() < 0.5 else []
        prompts = {c: [rng.choice(["", *forms]), user, *tools] for c in "ABCD"}
        found = figures_by_prompt(prompts)
        for condition, parts in prompts.items():
            joined = VISIBLE_JOIN.join(parts)
            assert found[condition] == figures_in(joined), parts
            assert folded_text(parts) == normalise_space(joined).casefold(), parts
