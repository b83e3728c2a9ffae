"""Protocol acceptance on the real pilot fixtures:

- rubric rule: a correct answer written without any AFP wording passes under a cooperative judge
  (no dimension may require AFP vocabulary);
- fatal rule: an answer dense with AFP wording that commits the fixture's fatal error fails, whatever
  its structure (wording never rescues a fatal).
The cooperative judge is the simulator's judge, which answers from each canned response's declared gold.
"""

from __future__ import annotations

import json

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_instructions, load_judge_prompt
from afpbench.scoring.assertions import run_assertions
from afpbench.scoring.judge import Judgement, build_judge_messages, read_judgement
from afpbench.scoring.render import render
from afpbench.scoring.states import ResultState
from afpbench.scoring.validity import check_fixture
from afpbench.scoring.verdict import decide
from afpbench.scoring.vocabulary import afp_terms, find_terms
from afpbench.workers.sim.canned import load_canned
from afpbench.workers.sim.engine import SimEngine
from afpbench.workers.sim.server import SimConfig, build_engine

FIXTURES = {fx.id: fx for fx in load_fixtures()}
CANNED = load_canned()
INSTRUCTIONS = load_instructions()
TERMS = afp_terms([INSTRUCTIONS.text("C"), INSTRUCTIONS.text("D")])
JUDGE_PROMPT = load_judge_prompt()
ENGINE: SimEngine = build_engine(SimConfig())


def _one(fixture_id: str, style: str):
    return next(r for r in CANNED[fixture_id] if r.style == style)


def _verdict(fixture, text: str):
    prompts = {c: render(c, fixture, INSTRUCTIONS.text(c)) for c in "ABCD"}
    validity = check_fixture(fixture, prompts, TERMS, JUDGE_PROMPT)
    messages = build_judge_messages(fixture, text, JUDGE_PROMPT, [])
    raw = json.dumps(ENGINE.judge_verdict(messages[1]["content"]))
    judgement = read_judgement(raw, fixture.fatal_ids(), text)
    assert isinstance(judgement, Judgement), judgement
    return decide("answered", validity, run_assertions(fixture, text), [judgement])


def _cases(style: str):
    out = []
    for fid in sorted(FIXTURES):
        response = _one(fid, style)
        label = response.gold.fatal.value if response.gold.fatal else "no_fatal"
        out.append(pytest.param(fid, id=f"{fid}-{label}"))
    return out


@pytest.mark.parametrize("fixture_id", _cases("pass_plain"))
def test_plain_correct_answer_without_afp_wording_passes(fixture_id):
    fixture = FIXTURES[fixture_id]
    text = _one(fixture_id, "pass_plain").text
    assert find_terms(text, TERMS) == [], "the plain answer must not use AFP vocabulary"
    outcome = run_assertions(fixture, text)
    assert outcome.proposed_fatal == [] and outcome.invariant_misses == []
    verdict = _verdict(fixture, text)
    assert verdict.state == ResultState.MODEL_PASS, verdict.rationale


@pytest.mark.parametrize("fixture_id", _cases("fatal"))
def test_afp_dense_answer_committing_the_fatal_error_fails(fixture_id):
    fixture = FIXTURES[fixture_id]
    response = _one(fixture_id, "fatal")
    assert len(find_terms(response.text, TERMS)) >= 2, "the fatal answer is written in AFP style"
    verdict = _verdict(fixture, response.text)
    assert verdict.state == ResultState.MODEL_FAIL
    assert verdict.fatal_criterion == response.gold.fatal.value
    assert verdict.fatal_criterion in fixture.fatal_ids()


@pytest.mark.parametrize("fixture_id", sorted(FIXTURES))
def test_deterministic_fatal_prohibitions_fire_on_the_fatal_answer_only(fixture_id):
    """An assertion proposes the fatal; it is never raised by the correct plain answer."""
    fixture = FIXTURES[fixture_id]
    if not any(a.kind == "fatal_prohibition" for a in fixture.assertions):
        pytest.skip(f"{fixture_id} has no fatal_prohibition assertion")
    assert run_assertions(fixture, _one(fixture_id, "pass_plain").text).proposed_fatal == []
    fatal = run_assertions(fixture, _one(fixture_id, "fatal").text)
    assert [c for _, c in fatal.proposed_fatal] and all(c in fixture.fatal_ids() for _, c in fatal.proposed_fatal)
