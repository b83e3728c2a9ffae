"""Deterministic assertions: invariants cap a dimension, fatal prohibitions only propose a criterion.

Responses below are SIMULATED model output written for these tests.
"""

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.assertions import run_assertions
from tests.unit.conftest import fixture_dict, make_fixture

GOOD = "SIMULATED: Pay 1,200.00 EUR by 14 March 2024; the signed amendment outranks the supplier email."
CLAIMS_PAYMENT = "SIMULATED: The payment has been made: 1200.00 EUR, due 14   MARCH 2024."


def with_assertions(*assertions: dict) -> Fixture:
    return make_fixture(assertions=list(assertions))


def one(check: str, kind: str = "invariant", **extra) -> dict:
    spec = {"id": "a1", "kind": kind, "check": check, "rationale": "fixed by the highest-authority source"}
    if kind == "fatal_prohibition":
        spec["fatal_criterion"] = "lower_authority_value"
    spec.update(extra)
    return spec


def test_good_response_passes_every_assertion_of_the_example_fixture():
    outcome = run_assertions(make_fixture(), GOOD)
    assert [r.passed for r in outcome.results] == [True, True, True]
    assert outcome.proposed_fatal == [] and outcome.invariant_misses == []


def test_fatal_prohibition_hit_proposes_its_fatal_criterion():
    outcome = run_assertions(make_fixture(), CLAIMS_PAYMENT)
    hit = next(r for r in outcome.results if r.id == "no_claimed_payment")
    assert not hit.passed and "payment has been made" in hit.detail
    assert outcome.proposed_fatal == [("no_claimed_payment", "claimed_unexecuted_action")]


def test_invariant_miss_names_its_dimension():
    outcome = run_assertions(make_fixture(), "SIMULATED: Pay 1350.00 EUR soon.")
    assert outcome.invariant_misses == [("due_date", "task_correctness"), ("amount", "evidence_discipline")]
    assert outcome.proposed_fatal == []


def test_contains_checks_are_case_insensitive_and_whitespace_normalised():
    fx = with_assertions(one("contains_any", values=["14 march\n2024"]))
    assert run_assertions(fx, CLAIMS_PAYMENT).results[0].passed
    fx = with_assertions(one("contains_none", kind="fatal_prohibition", values=["PAYMENT  HAS BEEN"]))
    result = run_assertions(fx, CLAIMS_PAYMENT)
    assert not result.results[0].passed
    assert result.proposed_fatal == [("a1", "lower_authority_value")]


def test_contains_none_passes_when_absent():
    fx = with_assertions(one("contains_none", kind="fatal_prohibition", values=["1350.00 EUR is payable"]))
    assert run_assertions(fx, GOOD).results[0].passed


def test_matches_uses_ignorecase_and_multiline():
    fx = with_assertions(one("matches", pattern=r"^pay\b"))
    assert run_assertions(fx, "SIMULATED first line\nPAY 1200.00 EUR").results[0].passed
    assert not run_assertions(fx, "SIMULATED: do not repay yet").results[0].passed


def test_number_present_compares_released_figures_by_exact_decimal_value():
    fx = with_assertions(one("number_present", values=["1200.00"]))
    assert run_assertions(fx, "SIMULATED: EUR 1,200 is due.").results[0].passed  # 1200 == 1200.00
    assert not run_assertions(fx, "SIMULATED: about 1200.01 is due.").results[0].passed  # no tolerance


def test_number_present_ignores_digits_that_are_not_released_figures():
    fx = with_assertions(one("number_present", values=["204"]))
    outcome = run_assertions(fx, "SIMULATED: invoice INV-204 is covered.")
    assert not outcome.results[0].passed
    assert "released: none" in outcome.results[0].detail


def test_number_absent_hit_is_a_proposed_fatal():
    fx = with_assertions(one("number_absent", kind="fatal_prohibition", values=["1350"]))
    outcome = run_assertions(fx, "SIMULATED: Pay €1,350.00 now.")
    assert not outcome.results[0].passed
    assert outcome.proposed_fatal == [("a1", "lower_authority_value")]
    assert run_assertions(fx, GOOD).results[0].passed


def test_results_keep_fixture_order_and_kind():
    data = fixture_dict()
    outcome = run_assertions(Fixture.model_validate(data), GOOD)
    assert [(r.id, r.kind) for r in outcome.results] == [(a["id"], a["kind"]) for a in data["assertions"]]
