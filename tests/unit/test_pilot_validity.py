"""Validity gate on broken copies of every pilot fixture: each break becomes INVALID_TEST naming its check.

- a grader fact hidden from the model           -> visible_to_model
- an AFP term inside an assertion               -> assertions_scoped
- evidence that differs between conditions      -> same_requirement
And the intact pilot set passes every check.
"""

from __future__ import annotations

import pytest

from afpbench.fixtures.loader import load_fixtures
from afpbench.reference.loader import load_instructions, load_judge_prompt
from afpbench.scoring.render import RenderedPrompt, render
from afpbench.scoring.states import ResultState
from afpbench.scoring.validity import check_fixture
from afpbench.scoring.verdict import decide
from afpbench.scoring.vocabulary import afp_terms

FIXTURES = load_fixtures()
INSTRUCTIONS = load_instructions()
TERMS = afp_terms([INSTRUCTIONS.text("C"), INSTRUCTIONS.text("D")])
JUDGE_PROMPT = load_judge_prompt()
IDS = [f.id for f in FIXTURES]


def _prompts(fx):
    return {c: render(c, fx, INSTRUCTIONS.text(c)) for c in "ABCD"}


def _invalid(report, check: str) -> str:
    assert not report.passed and check in report.failed_checks(), report
    verdict = decide("answered", report, None, [])
    assert verdict.state == ResultState.INVALID_TEST
    assert check in verdict.rationale
    return verdict.rationale


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_intact_pilot_fixture_passes_the_gate(fx):
    report = check_fixture(fx, _prompts(fx), TERMS, JUDGE_PROMPT)
    assert report.passed, report.failures


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_hidden_grader_fact_is_invalid(fx):
    hidden = "the reconciliation was signed off by the regional auditor on 2 February"
    broken = fx.model_copy(update={"grader_facts": [*fx.grader_facts, hidden]})
    rationale = _invalid(check_fixture(broken, _prompts(broken), TERMS, JUDGE_PROMPT), "visible_to_model")
    assert "regional auditor" in rationale


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_afp_term_in_an_assertion_is_invalid(fx):
    term = sorted(TERMS)[0]
    assertion = {
        "id": "uses-afp-label",
        "kind": "invariant",
        "check": "matches",
        "pattern": term,
        "rationale": "requires the workflow's own label (this is exactly what the gate forbids)",
    }
    data = fx.model_dump(mode="json", by_alias=True)
    data["assertions"] = [*data["assertions"], assertion]
    broken = type(fx).model_validate(data)
    _invalid(check_fixture(broken, _prompts(broken), TERMS, JUDGE_PROMPT), "assertions_scoped")


@pytest.mark.parametrize("fx", FIXTURES, ids=IDS)
def test_evidence_differing_by_condition_is_invalid(fx):
    prompts = _prompts(fx)
    c = prompts["C"]
    prompts["C"] = RenderedPrompt(c.condition, c.system, c.user.replace("\n", "\n(verified) ", 1), c.tools)
    rationale = _invalid(check_fixture(fx, prompts, TERMS, JUDGE_PROMPT), "same_requirement")
    assert "C" in rationale
