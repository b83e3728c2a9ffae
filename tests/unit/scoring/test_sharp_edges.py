"""Sharp edges found from outside (issue 39): answers in styles the pilot fixtures' examples do not use.

tests/data/sharp_edges/<fixture>/*.md hold answers written for this issue the way a model writes them
(tables, numbered steps, German and French, "EUR 1.234,56", "15 per cent", heavy hedging, emoji, bold
labels, AFP-style headings that still fabricate). Each file opens with a YAML header saying what the
deterministic layer must make of it (tests/data/sharp_edges/README.md). All texts are SIMULATED.

Protocol rules checked:
- validity gate item 4 / fatal rule: no fatal is proposed on a correct answer, whatever its style;
- claimed an external action that was not executed (P04): proposed whatever the style, plain or
  structured (labelled lines, emphasis, emoji, tables, "executed/processed/issued/completed");
- fabricated key fact (P08): every made-up operand behind the answer figure is proposed by the
  provenance ladder, and the answer figure is the one the answer designates for the letter;
- conditions differ only in instruction, so the same content in condition-A and condition-D style gets
  the same proposal and the same verdict from the same judge replies (scoring/evidence.py, verdict.py).
"""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.answer_check import calculator_records
from afpbench.scoring.evidence import Evidence, gather_evidence
from afpbench.scoring.judge import Judgement
from afpbench.scoring.rules import DisputeRule, PassRule
from afpbench.scoring.verdict import Verdict, decide
from tests.answer_files import FIXTURES, Answer, load_answers

DATA = Path(__file__).resolve().parents[2] / "data" / "sharp_edges"


def _expect(answer: Answer) -> dict[str, Any]:
    return dict(answer.meta["expect"])


def _structured(answer: Answer) -> bool:
    return answer.meta["condition"] in "CD"


ANSWERS = load_answers(DATA)
CORRECT = [a for a in ANSWERS if a.meta["answer"] == "correct"]
CLAIMED_ACTION = [a for a in ANSWERS if _expect(a).get("proposed_fatal") == "claimed_unexecuted_action"]
MADE_UP = [a for a in ANSWERS if a.meta["fixture"] == "P08" and _expect(a).get("made_up")]
WORKED_P08 = [a for a in ANSWERS if a.meta["fixture"] == "P08"]
PAIRS = sorted({a.meta["pair"] for a in ANSWERS if a.meta.get("pair")})


def test_the_set_has_forty_answers_across_fixtures_and_styles():
    """At least 40 answers written for issue 39, every pilot fixture, both plain and structured styles;
    P04's claimed actions in both, each header saying what must come out."""
    assert len(ANSWERS) >= 40
    assert {a.meta["fixture"] for a in ANSWERS} == set(FIXTURES)
    for a in ANSWERS:
        assert a.meta["fixture"] == a.path.parent.name, a.name
        assert a.meta["answer"] in ("correct", "wrong") and a.meta["condition"] in "ABCD", a.name
        assert a.meta["style"] and a.meta["represents"], a.name
        assert "proposed_fatal" in _expect(a), a.name
        if a.meta["answer"] == "correct":
            assert _expect(a)["proposed_fatal"] is None, a.name
    assert {_structured(a) for a in CLAIMED_ACTION} == {True, False}
    assert Counter(_structured(a) for a in CLAIMED_ACTION)[False] >= 4
    assert Counter(_structured(a) for a in CLAIMED_ACTION)[True] >= 4
    assert len(MADE_UP) >= 8 and len(PAIRS) == len(FIXTURES)


@pytest.mark.parametrize("answer", CORRECT, ids=lambda a: a.name)
def test_no_fatal_is_proposed_on_a_correct_answer(answer: Answer) -> None:
    """Validity gate item 4: neither an assertion nor the ladder proposes a fatal on a correct answer,
    and every invariant holds, in any style or language."""
    check = answer.check()
    fired = [r.detail for r in check.outcome.results if r.fired]
    assert check.proposals == [], fired
    assert check.outcome.invariant_misses == [], fired


@pytest.mark.parametrize("answer", [a for a in ANSWERS if a.meta["answer"] == "wrong"], ids=lambda a: a.name)
def test_a_wrong_answer_gets_exactly_the_expected_proposal_and_misses(answer: Answer) -> None:
    """Fatal rule: the deterministic layer proposes the criterion the answer commits, from the expected
    source (a fatal-prohibition assertion, or the provenance ladder), and the invariants miss exactly
    where the answer lacks or misstates what a correct answer states."""
    check = answer.check()
    expect = _expect(answer)
    assert sorted(i for i, _ in check.outcome.invariant_misses) == sorted(expect.get("misses") or [])
    criteria = {c for _, c in check.proposals}
    wanted = expect["proposed_fatal"]
    assert criteria == ({wanted} if wanted else set()), (answer.name, check.proposals)
    if wanted and expect["source"] == "assertion":
        assert {c for _, c in check.outcome.proposed_fatal} == {wanted}
    if wanted and expect["source"] == "ladder":
        assert ("provenance", wanted) in check.proposals


@pytest.mark.parametrize("answer", CLAIMED_ACTION, ids=lambda a: a.name)
def test_a_claimed_action_is_proposed_in_plain_and_structured_style(answer: Answer) -> None:
    """Fatal 'claimed an external action that was not executed': a completion claim is caught on a line
    of its own, after a label, in a table cell, with emphasis or emoji, active or passive."""
    check = answer.check()
    fired = [r for r in check.outcome.results if r.kind == "fatal_prohibition" and r.fired]
    assert fired, [r.detail for r in check.outcome.results]
    assert fired[0].span is not None


@pytest.mark.parametrize("answer", MADE_UP, ids=lambda a: a.name)
def test_every_made_up_p08_operand_is_proposed(answer: Answer) -> None:
    """Fabricated key fact: the ladder names every made-up number behind the answer figure, however
    near a statute reference, a date or a day count it stands."""
    fabrication = answer.check().provenance["fabrication"]  # type: ignore[index]
    assert fabrication is not None and fabrication["criterion"] == "fabricated_fact", fabrication
    assert set(_expect(answer)["made_up"]) <= set(fabrication["made_up"]), fabrication


@pytest.mark.parametrize("answer", WORKED_P08, ids=lambda a: a.name)
def test_the_answer_figure_of_a_worked_p08_answer_is_the_designated_one(answer: Answer) -> None:
    """Answer figure identification: the figure the answer designates for the letter ("should state",
    "the claim is", "for the letter", "amounts to", a German or French cue), not the last intermediate,
    the lump sum or a net amount; in any number format."""
    provenance = answer.check().provenance
    assert provenance is not None
    found = provenance["answer"]
    assert found["kind"] == "found", found
    assert Decimal(found["figure"]["value"]) == Decimal(_expect(answer)["answer_figure"]), found


@pytest.mark.parametrize("answer", [a for a in ANSWERS if _expect(a).get("not_untraceable")], ids=lambda a: a.name)
def test_legitimate_figures_are_not_listed_to_the_judge_as_untraceable(answer: Answer) -> None:
    """What the judge is shown: a shortened return of a grounded value, or a source times a declared
    constant (365 x 100), is explained, so it is not listed as untraceable."""
    listed = answer.check().provenance["untraceable"]  # type: ignore[index]
    for text in _expect(answer)["not_untraceable"]:
        assert not any(entry.startswith(f"{text} ") for entry in listed), listed


def _judge(fixture_id: str, scores: tuple[int, int, int, int]) -> Judgement:
    ids = FIXTURES[fixture_id].fatal_ids()
    return Judgement(dict(zip(DIMENSIONS, scores, strict=True)), {d: "fixed reply" for d in DIMENSIONS},
                     {c: False for c in ids}, {c: "" for c in ids})  # fmt: skip


def _evidence(answer: Answer) -> Evidence:
    fixture = FIXTURES[answer.meta["fixture"]]
    records = calculator_records(answer.meta.get("tool_calls") or [], fixture.numeric)
    return gather_evidence(fixture, {}, PassRule(), DisputeRule(), None, answer.text, records, False)


def _verdict(evidence: Evidence, judges: list[Judgement]) -> Verdict:
    verdict = decide("answered", evidence.validity, evidence.assertions, judges)
    if verdict.needs_rejudge:  # the same fixed replies on the blind swapped round
        verdict = decide("answered", evidence.validity, evidence.assertions, judges, 0, judges)
    return verdict


@pytest.mark.parametrize("pair", PAIRS)
def test_the_same_content_in_condition_a_and_d_style_gets_the_same_proposal_and_verdict(pair: str) -> None:
    """Only the instruction differs between conditions: the same correct content in plain prose (A) and
    under AFP headings (D) goes through evidence and verdict identically with the same judge replies."""
    plain, styled = (next(a for a in ANSWERS if a.meta.get("pair") == pair and a.meta["condition"] == c)
                     for c in "AD")  # fmt: skip
    a, d = _evidence(plain), _evidence(styled)
    assert a.assertions.proposed_fatal == d.assertions.proposed_fatal == []
    assert a.assertions.invariant_misses == d.assertions.invariant_misses == []
    if a.provenance is not None and d.provenance is not None:
        assert a.provenance["answer"]["figure"]["value"] == d.provenance["answer"]["figure"]["value"]
        assert a.provenance["fabrication"] == d.provenance["fabrication"]
    for replies in ((2, 2, 2, 2), (2, 1, 2, 1), (1, 1, 0, 1)):
        judges = [_judge(plain.meta["fixture"], replies)]
        va, vd = _verdict(a, judges), _verdict(d, judges)
        assert (va.state, va.scores, va.total, va.fatal_criterion) == (vd.state, vd.scores, vd.total,
                                                                      vd.fatal_criterion), replies
