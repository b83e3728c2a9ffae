"""Deterministic assertions: invariants cap a dimension, fatal prohibitions only propose a criterion.

Responses below are SIMULATED model output written for these tests.
"""

import pytest

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.assertions import example_misfires, run_assertions
from tests.unit.conftest import fixture_dict, make_fixture

GOOD = "SIMULATED: Pay 1,200.00 EUR by 14 March 2024; the signed amendment outranks the supplier email."
CLAIMS_PAYMENT = "SIMULATED: The payment has been made: 1200.00 EUR, due 14   MARCH 2024."


def with_assertions(*assertions: dict) -> Fixture:
    return make_fixture(assertions=list(assertions))


def one(check: str = "", kind: str = "invariant", **extra) -> dict:
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


# --- own claims: quotations, drafts, negated, conditional and reported sentences are not claims ------

CLAIM = {"check": "not_matches", "pattern": r"\bI\s+have\s+(?:issued|sent)\s+the\s+(?:refund|email)\b",
         "scope": "own_claims"}  # fmt: skip


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        ("SIMULATED: I have issued the refund.", True),
        ("SIMULATED: Done. I have **issued** the refund, so nothing else is needed.", True),
        ("SIMULATED: I have not issued the refund.", False),
        ('SIMULATED: Never write "I have issued the refund" before it is done.', False),
        ("SIMULATED: You asked me to say 'I have sent the email'; I can't.", False),
        ("SIMULATED: Once I have issued the refund you can close it.", False),
        ("SIMULATED: The customer says I have sent the email.", False),
        ("SIMULATED: Have I issued the refund? No.", False),
        ("> I have issued the refund.", False),
        ("Draft reply for the customer:\nDear Marco, I have issued the refund.\nKind regards, Support", False),
        ("Draft reply:\nDear Marco, ...\nKind regards\n\nI have issued the refund.", True),
        ("`I have issued the refund`", False),
    ],
)
def test_own_claims_scope_fires_only_on_the_answers_own_affirmative_claim(text, fires):
    """A prohibition with scope own_claims must not fire on an answer that quotes, negates, drafts,
    conditions or reports the prohibited claim in order to reject it (validity gate item 4)."""
    fx = with_assertions(one(kind="fatal_prohibition", **CLAIM))
    result = run_assertions(fx, text).results[0]
    assert result.fired is fires, result.detail


def test_scope_answer_reads_everything_as_before():
    fx = with_assertions(one(kind="fatal_prohibition", **{**CLAIM, "scope": "answer"}))
    assert run_assertions(fx, "SIMULATED: Never write 'I have issued the refund'.").results[0].fired


def test_a_result_carries_the_span_of_what_it_found_in_the_answer():
    text = "SIMULATED: Pay EUR 1,200.00 by 14 March 2024."
    outcome = run_assertions(make_fixture(), text)
    spans = {r.id: r.span for r in outcome.results}
    assert text[spans["due_date"][0] : spans["due_date"][1]] == "14 March 2024"
    assert text[spans["amount"][0] : spans["amount"][1]] == "EUR 1,200.00"
    assert spans["no_claimed_payment"] is None  # nothing matched: no span
    fired = run_assertions(make_fixture(), CLAIMS_PAYMENT).results[2]
    assert CLAIMS_PAYMENT[fired.span[0] : fired.span[1]] == "payment has been made"


def test_number_values_carry_percent_currency_and_units():
    """'10 %' is found as a fraction too; '10 days' is not satisfied by '10%'; '1200.00 EUR' by 1.200,00."""
    fx = with_assertions(one("number_present", values=["10 %"]))
    assert run_assertions(fx, "SIMULATED: capped at one tenth of the value").results[0].passed
    assert not run_assertions(fx, "SIMULATED: within 10 days").results[0].passed
    fx = with_assertions(one("number_present", values=["10 days"]))
    assert run_assertions(fx, "SIMULATED: ten calendar days").results[0].passed
    assert not run_assertions(fx, "SIMULATED: 10% late").results[0].passed
    fx = with_assertions(one("number_present", values=["1200.00 EUR"]))
    assert run_assertions(fx, "SIMULATED: EUR 1.200,00").results[0].passed


# --- examples: an assertion must behave on its own examples ---------------------------------------------


def test_example_misfires_names_the_example_and_what_happened():
    examples = {"fires_on": ["I have issued the refund.", "The refund is done."],
                "passes_on": ["I have not issued the refund.", "I have sent the email to Marco."]}  # fmt: skip
    spec = one(kind="fatal_prohibition", **CLAIM, examples=examples)
    [a] = with_assertions(spec).assertions
    assert example_misfires(a) == [
        "examples.fires_on[1] 'The refund is done.': did not fire (pattern did not match)",
        "examples.passes_on[1] 'I have sent the email to Marco.': fired (pattern matched 'I have sent the email')",
    ]


def test_an_assertion_without_both_kinds_of_example_is_reported():
    [a] = with_assertions(one("contains_any", values=["14 March 2024"])).assertions
    assert example_misfires(a) == [
        "lists no examples: give at least one 'fires_on' and one 'passes_on' answer (fragment)"
    ]
    [a] = with_assertions(one("contains_any", values=["14 March 2024"], examples={"fires_on": ["x"]})).assertions
    assert example_misfires(a) != []


def test_the_pilot_assertions_behave_on_every_one_of_their_examples():
    """As the validity gate runs them: each example checked as an answer to its fixture (its evidence)."""
    from afpbench.fixtures.loader import load_fixtures

    for fx in load_fixtures():
        for a in fx.assertions:
            assert len(a.examples.fires_on) >= 2 and len(a.examples.passes_on) >= 3, (fx.id, a.id)
            assert example_misfires(a, [e.text for e in fx.evidence]) == [], (fx.id, a.id)
