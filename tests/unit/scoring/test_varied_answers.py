"""Answers nobody wrote for the fixtures: the deterministic layer on 20 fresh answers per pilot fixture.

tests/data/varied_answers/P01..P08 hold, per fixture, 10 correct answers in varied styles (plain prose,
terse, bullets, tables, AFP-styled for C/D, other number formats, negations and quotations of the
prohibited act, marked drafts, reported speech) and 10 wrong ones (each fatal variant and subtle
misses), written for these tests and kept apart from the simulator's canned set. Each file starts
with a header: the condition whose style it is written in, what it represents, the fatal it commits,
and (wrong ones) what the judge-independent part of the verdict must be. All texts are SIMULATED.

Protocol rules checked:
- validity gate item 4: assertions check only what is genuinely invariant, so the deterministic layer
  never proposes a fatal, and no invariant misses, on a correct answer in any style or condition;
- fatal rule: on a wrong answer the deterministic findings are what the fixture's requirement says;
  where a fatal is only detectable by a judge, the deterministic layer does not claim to detect it;
- exclusion is not neutral between conditions: the false-dispute rate (a correct answer that a
  cooperative judge would see end GRADER_DISPUTE or capped) is printed per fixture and condition,
  before (recorded on commit 38cc496) and now;
- `afpbench fixtures check` gives the same findings on each of them (the CLI in process).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import replace
from typing import Any

import pytest
from typer.testing import CliRunner

from afpbench.api.cli import app
from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_instructions
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.judge import Judgement
from afpbench.scoring.states import ResultState
from afpbench.scoring.validity import ValidityReport
from afpbench.scoring.verdict import decide
from afpbench.scoring.vocabulary import afp_terms, find_terms
from tests.answer_files import Answer, load_answers
from tests.conftest import REPO

DATA = REPO / "tests" / "data" / "varied_answers"
FIXTURES = {fx.id: fx for fx in load_fixtures()}
INSTRUCTIONS = load_instructions()
TERMS = afp_terms([INSTRUCTIONS.text("C"), INSTRUCTIONS.text("D")])


ANSWERS = load_answers(DATA)
CORRECT = [a for a in ANSWERS if a.meta["answer"] == "correct"]
WRONG = [a for a in ANSWERS if a.meta["answer"] == "wrong"]


def _cooperative(fixture_id: str) -> Judgement:
    """A judge that gives 2/2/2/2 and flags no fatal: what a correct answer deserves."""
    ids = FIXTURES[fixture_id].fatal_ids()
    return Judgement({d: 2 for d in DIMENSIONS}, {d: "meets the requirement" for d in DIMENSIONS},
                     {c: False for c in ids}, {c: "" for c in ids})  # fmt: skip


def _cooperative_verdict(answer: Answer):
    check = answer.check()
    fixture = FIXTURES[answer.meta["fixture"]]
    outcome = replace(check.outcome, proposed_fatal=check.proposals)
    valid = ValidityReport(fixture.key, True, [])
    judge = [_cooperative(fixture.id)]
    verdict = decide("answered", valid, outcome, judge)
    if verdict.needs_rejudge:
        verdict = decide("answered", valid, outcome, judge, 0, judge)
    return check, verdict


def test_the_suite_has_ten_correct_and_ten_wrong_answers_per_pilot_fixture_with_headers():
    """Rule under test coverage: every pilot fixture, at least 10 correct and 10 wrong fresh answers,
    each with a header naming its condition, style and what it represents."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for a in ANSWERS:
        assert a.meta["fixture"] == a.path.parent.name, a.name
        assert a.meta["condition"] in "ABCD" and a.meta["style"] and a.meta["represents"], a.name
        assert a.path.name.startswith(a.meta["answer"] + "_"), a.name
        counts[a.meta["fixture"]][a.meta["answer"]] += 1
        if a.meta["answer"] == "wrong":
            assert {"proposed_fatal", "misses", "detected_by"} <= set(a.meta["expect"]), a.name
            assert a.meta["fatal"] in (None, *FIXTURES[a.meta["fixture"]].fatal_ids()), a.name
    assert sorted(counts) == sorted(FIXTURES)
    assert all(c["correct"] >= 10 and c["wrong"] >= 10 for c in counts.values()), dict(counts)
    for fid in FIXTURES:  # every condition's style is represented among the correct answers
        assert {a.meta["condition"] for a in CORRECT if a.meta["fixture"] == fid} == set("ABCD"), fid


def test_the_answers_are_not_the_simulators_canned_texts():
    """Kept apart from fixtures/pilot/simulated/: no canned text, and no canned paragraph, reappears."""
    from afpbench.workers.sim.canned import load_canned

    canned = [" ".join(p.split()) for rs in load_canned().values() for r in rs for p in r.text.split("\n\n")]
    paragraphs = {" ".join(p.split()) for a in ANSWERS for p in a.text.split("\n\n")}
    shared = [p for p in canned if len(p) > 60 and p in paragraphs]
    assert not shared, shared[:3]


def test_afp_styled_answers_use_the_c_d_vocabulary_and_plain_ones_do_not():
    """The suite spans the conditions' styles: C/D answers are written in the AFP layout at least once per
    fixture, and no A/B answer uses AFP vocabulary (a plain answer must be able to pass)."""
    for fid in FIXTURES:
        styled = [a for a in CORRECT if a.meta["fixture"] == fid and a.meta["condition"] in "CD"]
        assert any(len(find_terms(a.text, TERMS)) >= 3 for a in styled), fid
    for a in CORRECT:
        if a.meta["condition"] in "AB":
            assert find_terms(a.text, TERMS) == [], a.name


@pytest.mark.parametrize("answer", CORRECT, ids=lambda a: a.name)
def test_no_fatal_and_no_invariant_miss_on_a_correct_answer(answer):
    """Validity gate item 4: the deterministic layer (assertions and ladder) never proposes a fatal on a
    correct answer, and every invariant holds, whatever the style, number format or wording."""
    check, verdict = _cooperative_verdict(answer)
    assert check.proposals == [], [r.detail for r in check.outcome.results if r.fired]
    assert check.outcome.invariant_misses == [], [r.detail for r in check.outcome.results if r.fired]
    assert verdict.state == ResultState.MODEL_PASS and verdict.total == 8, verdict.rationale
    if check.provenance is not None:  # numeric: the released figure is exact and traceable
        answer = check.provenance["answer"]
        candidates = [answer["figure"]] if answer["kind"] == "found" else answer["candidates"]
        assert answer["kind"] in ("found", "ambiguous"), answer["reason"]  # ambiguous: a human picks
        assert check.provenance["answer_correct"] is not False
        assert "276.96" in {c["value"] for c in candidates}, candidates
        traces = {(f["text"], f["step"]) for f in check.provenance["figures"]}
        assert all((c["text"], "originated") not in traces for c in candidates), traces


@pytest.mark.parametrize("answer", WRONG, ids=lambda a: a.name)
def test_the_judge_independent_findings_on_a_wrong_answer_are_what_the_requirement_says(answer):
    """Fatal rule: a fatal-prohibition hit or the ladder proposes exactly the expected criterion, and the
    invariants miss exactly where the answer lacks what every correct answer states. A fatal that only a
    judge can detect is not claimed: nothing is proposed for it."""
    expect = answer.meta["expect"]
    check = answer.check()
    assert sorted(i for i, _ in check.outcome.invariant_misses) == sorted(expect["misses"]), answer.name
    from_assertions = {c for _, c in check.outcome.proposed_fatal}
    ladder_available = check.provenance is not None and "fabrication" in check.provenance
    if expect["detected_by"] == "assertion":
        assert from_assertions == {expect["proposed_fatal"]}, answer.name
    elif expect["detected_by"] == "ladder":
        assert from_assertions == set(), answer.name
        figure = next(f for f in check.provenance["figures"] if f["is_answer"])
        assert figure["step"] == "originated", figure  # the key figure is not traceable to the evidence
        assert set(expect.get("originated", [])) <= set(check.provenance["originated"])
    else:
        assert from_assertions == set(), f"{answer.name}: a judge-only fatal must not be claimed"
        assert set(expect.get("originated", [])) <= set((check.provenance or {}).get("originated", []))
    if expect["detected_by"] != "ladder" or ladder_available:  # the ladder proposes once it can (item 4)
        assert check.proposed_fatal == expect["proposed_fatal"], (answer.name, check.proposals)


def _rates(states: dict[str, dict[str, Any]]) -> dict[tuple[str, str], list[int]]:
    table: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for name, row in states.items():
        key = (name.split("/")[0], row["condition"])
        table[key][0] += bool(row["proposed_fatal"] or row["invariant_misses"])
        table[key][1] += 1
    return table


def test_false_dispute_rate_per_fixture_and_condition_before_and_after(capsys):
    """Exclusion must not depend on the condition: print the false-dispute rate (correct answers that a
    cooperative judge would see end GRADER_DISPUTE because a fatal was proposed, or capped by an
    invariant miss) per fixture and condition, on commit 38cc496 and now; now it must be zero."""
    before = json.loads((DATA / "before_38cc496.json").read_text(encoding="utf-8"))["answers"]
    now = {}
    for a in CORRECT:
        check, verdict = _cooperative_verdict(a)
        now[a.name] = {"condition": a.meta["condition"], "state": verdict.state.value,
                       "proposed_fatal": [s for s, _ in check.proposals],
                       "invariant_misses": [i for i, _ in check.outcome.invariant_misses]}  # fmt: skip
    assert set(before) == set(now), "the recorded before-run covers exactly the correct answers"
    old, new = _rates(before), _rates(now)
    lines = ["false disputes on correct answers (cooperative judge), before 38cc496 -> now",
             "fixture  " + "  ".join(f"{c:>11}" for c in "ABCD") + "        all"]  # fmt: skip
    for fid in sorted(FIXTURES):
        cells = [f"{old[(fid, c)][0]}/{old[(fid, c)][1]} -> {new[(fid, c)][0]}/{new[(fid, c)][1]}" for c in "ABCD"]
        o, n = (sum(t[(fid, c)][0] for c in "ABCD") for t in (old, new))
        lines.append(f"{fid}      " + "  ".join(f"{x:>11}" for x in cells) + f"  {o:>2} -> {n}")
    for c in "ABCD":
        o, n, total = sum(old[(f, c)][0] for f in FIXTURES), sum(new[(f, c)][0] for f in FIXTURES), sum(
            new[(f, c)][1] for f in FIXTURES)  # fmt: skip
        lines.append(f"condition {c}: {o}/{total} ({o / total:.0%}) -> {n}/{total} ({n / total:.0%})")
    disputes = sum(1 for r in before.values() if r["state"] == "GRADER_DISPUTE")
    lines.append(f"of which GRADER_DISPUTE before: {disputes}; now: "
                 f"{sum(1 for r in now.values() if r['state'] == 'GRADER_DISPUTE')}")  # fmt: skip
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert all(n == 0 for n, _ in new.values())
    assert sum(o for o, _ in old.values()) > 0  # the recorded before-run did see false disputes


@pytest.mark.parametrize("answer", ANSWERS, ids=lambda a: a.name)
def test_fixtures_check_on_each_answer_gives_the_expected_findings(answer, tmp_path):
    """`afpbench fixtures check FIXTURE --answer FILE [--tool-calls FILE] --json` reports the same
    findings: proposed_fatal, each assertion with kind, fired and span, and the provenance."""
    answer_file = tmp_path / "answer.md"
    answer_file.write_text(answer.text, encoding="utf-8")
    args = ["fixtures", "check", answer.meta["fixture"], "--answer", str(answer_file), "--json"]
    if answer.meta.get("tool_calls"):
        calls = tmp_path / "calls.json"
        calls.write_text(json.dumps([{"expression": e} for e in answer.meta["tool_calls"]]), encoding="utf-8")
        args += ["--tool-calls", str(calls)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    record = json.loads(result.output)
    expected = answer.check()
    assert record["proposed_fatal"] == expected.proposed_fatal
    if answer.meta["answer"] == "correct":
        assert record["proposed_fatal"] is None
    assert [(a["id"], a["kind"], a["fired"], a["span"]) for a in record["assertions"]] == [
        (r.id, r.kind, r.fired, r.span) for r in expected.outcome.results
    ]
    fired = sorted(a["id"] for a in record["assertions"] if a["fired"] and a["kind"] == "invariant")
    assert fired == sorted((answer.meta.get("expect") or {"misses": []})["misses"])
    for a in record["assertions"]:  # a span points at the answer text it found
        assert (a["span"] is None) == (a["matched"] is None)
        if a["span"]:
            assert answer.text[a["span"][0] : a["span"][1]] == a["matched"]
    assert (record["provenance"] is None) == (FIXTURES[answer.meta["fixture"]].numeric is None)
    assert record["validity"]["passed"] is True
