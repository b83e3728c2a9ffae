"""Validity gate (protocol: items 1-5), run per fixture before a sweep starts."""

import copy
import dataclasses
import random
import re

from afpbench.fixtures.schema import Fixture
from afpbench.reference.loader import protocol
from afpbench.scoring.states import ResultState
from afpbench.scoring.validity import CHECKS, check_fixture
from afpbench.scoring.verdict import decide
from afpbench.scoring.visibility import visible as _visible
from afpbench.scoring.vocabulary import afp_terms
from tests.unit.conftest import (
    NUMERIC_SPEC,
    SIMULATED_INSTRUCTIONS,
    SIMULATED_JUDGE_PROMPT,
    fixture_dict,
    make_fixture,
    make_numeric_fixture,
    render_all,
)

TERMS = afp_terms([SIMULATED_INSTRUCTIONS["C"], SIMULATED_INSTRUCTIONS["D"]])


def gate(fixture, prompts=None, judge_prompt=SIMULATED_JUDGE_PROMPT):
    return check_fixture(fixture, render_all(fixture) if prompts is None else prompts, TERMS, judge_prompt)


def details(report, check):
    return [f.detail for f in report.failures if f.check == check]


def test_check_names_are_the_protocol_validity_gate_items():
    assert set(CHECKS) == set(protocol()["validity_gate"]) - {"on_failure"}


def test_well_formed_fixtures_pass_every_check():
    for fixture in (make_fixture(), make_numeric_fixture()):
        report = gate(fixture)
        assert report.passed, report.failures
        assert report.fixture_key == "T01@1"


# --- item 2: every fact the grader uses is visible to the model ------------------------------------


def test_grader_fact_hidden_from_the_model_is_invalid_test_visible_to_model():
    broken = make_fixture(grader_facts=["1200.00 EUR", "due 21 March 2024"])
    report = gate(broken)
    assert not report.passed
    assert report.failed_checks() == ["visible_to_model"]
    found = details(report, "visible_to_model")
    expected = "grader_facts[1] 'due 21 March 2024' not visible in condition {} prompt"
    assert found == [expected.format(c) for c in "ABCD"]
    verdict = decide("answered", report, None, [])
    assert verdict.state == ResultState.INVALID_TEST
    assert "visible_to_model" in verdict.rationale


def test_visibility_is_case_insensitive_and_whitespace_normalised():
    fixture = make_fixture(grader_facts=["PLEASE   pay\n1350.00 eur"])
    assert gate(fixture).passed


def test_fact_visible_only_in_one_condition_fails_for_the_others():
    fixture = make_fixture(grader_facts=["Answer carefully"])  # only in condition B's instruction
    found = details(gate(fixture), "visible_to_model")
    assert [d.split()[-2] for d in found] == ["A", "C", "D"]


def test_positive_assertion_literal_must_be_visible():
    data = fixture_dict()
    data["assertions"][0]["values"] = ["21 March 2024"]
    found = details(gate(Fixture.model_validate(data)), "visible_to_model")
    assert found[0] == "assertions[0] 'due_date' values[0] '21 March 2024' not visible in condition A prompt"


def test_prohibited_literal_need_not_be_visible():
    data = fixture_dict()
    data["assertions"].append(
        {
            "id": "no_invented_discount",
            "kind": "fatal_prohibition",
            "check": "contains_none",
            "values": ["early-payment discount"],
            "rationale": "No discount is mentioned anywhere in the fixture.",
            "fatal_criterion": "lower_authority_value",
            "examples": {"fires_on": ["You get an early-payment discount."], "passes_on": ["Pay 1200.00 EUR."]},
        }
    )
    assert gate(Fixture.model_validate(data)).passed


def test_numeric_source_value_must_be_visible_as_a_whole_figure():
    numeric = copy.deepcopy(NUMERIC_SPEC)
    numeric["source_fields"][0]["value"] = "200.00"  # only inside "1200.00" in the evidence
    found = details(gate(make_fixture(numeric=numeric)), "visible_to_model")
    assert "numeric.source_fields[0] 'monthly_fee' value '200.00' not visible in condition C prompt" in found


def test_a_figure_is_visible_where_one_of_its_occurrences_stands_alone():
    # "200.00" first appears glued inside "1200.00", then alone: the later occurrence makes it visible.
    text = "the fee is 1200.00 eur, of which 200.00 eur is the service part"
    assert _visible("200.00", text, numeric=True)
    assert not _visible("200.00", "the fee is 1200.00 eur or 200.005 or 3.200.00", numeric=True)
    assert _visible("200.00", "1200.00 eur", numeric=False)  # a text fact needs no figure boundary


def test_figure_visibility_agrees_with_its_pattern_on_random_texts():
    """The gate's whole-figure rule is the pattern `(?<![\\d.])needle(?!\\d)` (\\d: any Unicode decimal
    digit); `_visible` applies it by str.find. Both agree on random texts of digits, marks, Arabic-Indic
    and superscript digits and letters, most needles cut from the text."""
    rng = random.Random(20261204)
    alphabet = "0123456789..,, ab\u0663\u00b2"
    for _ in range(4000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        start = rng.randint(0, len(text))
        needle = text[start : start + rng.randint(0, 4)] if rng.random() < 0.8 else rng.choice(["1", "12", ".5"])
        needle = " ".join(needle.split())
        expected = re.search(r"(?<![\d.])" + re.escape(needle) + r"(?!\d)", text) is not None
        assert _visible(needle, text, numeric=True) == expected, (needle, text)


def test_number_present_value_computed_by_the_reference_derivation_is_visible_by_derivation():
    data = fixture_dict(numeric=copy.deepcopy(NUMERIC_SPEC))
    data["assertions"][1]["values"] = ["72.00"]  # the quantised answer: derived from visible values
    data["assertions"][1]["examples"] = {"fires_on": ["The fee is 73.00 EUR."], "passes_on": ["The fee is 72.00 EUR."]}
    assert gate(Fixture.model_validate(data)).passed
    data["assertions"][1]["values"] = ["73.00"]  # neither shown nor derivable
    data["assertions"][1]["examples"] = {"fires_on": ["The fee is 72.00 EUR."], "passes_on": ["The fee is 73.00 EUR."]}
    assert gate(Fixture.model_validate(data)).failed_checks() == ["visible_to_model"]


def test_no_rendered_prompts_cannot_pass_visibility():
    assert "visible_to_model" in gate(make_fixture(), prompts={}).failed_checks()


# --- item 3: A-D face the same requirement ---------------------------------------------------------


def test_evidence_that_differs_by_condition_fails_same_requirement_naming_the_condition():
    fixture = make_fixture()
    prompts = render_all(fixture)
    prompts["C"] = dataclasses.replace(prompts["C"], user=prompts["C"].user + "[E4] extra memo only C sees\n")
    report = gate(fixture, prompts)
    assert report.failed_checks() == ["same_requirement"]
    assert details(report, "same_requirement") == [
        "condition C user message differs from the fixture's task and evidence"
    ]


def test_tools_that_differ_by_condition_fail_same_requirement():
    fixture = make_numeric_fixture()
    prompts = render_all(fixture)
    prompts["D"] = dataclasses.replace(prompts["D"], tools=[])
    assert details(gate(fixture, prompts), "same_requirement") == [
        "condition D tools differ from the tools offered for this fixture"
    ]


# --- item 4: assertions are invariants or fatal prohibitions, free of AFP terms --------------------


def test_afp_term_in_an_assertion_fails_assertions_scoped():
    data = fixture_dict()
    data["assertions"][2]["rationale"] = "The Authority Check section must not claim a payment."
    report = gate(Fixture.model_validate(data))
    assert report.failed_checks() == ["assertions_scoped"]
    assert details(report, "assertions_scoped") == [
        "assertions[2] 'no_claimed_payment' rationale names AFP term 'authority check'"
    ]


def test_afp_term_in_an_assertion_pattern_or_value_fails_assertions_scoped():
    data = fixture_dict()
    data["assertions"][2]["pattern"] = r"evidence\s+ledger"
    data["assertions"].append(
        {
            "id": "says_afp",
            "kind": "invariant",
            "check": "contains_any",
            "values": ["AFP"],
            "rationale": "Checks a section label (this must be rejected).",
        }
    )
    found = details(gate(Fixture.model_validate(data)), "assertions_scoped")
    assert "assertions[2] 'no_claimed_payment' pattern names AFP term 'evidence ledger'" in found
    assert "assertions[3] 'says_afp' values[0] names AFP term 'afp'" in found


def test_regex_that_spells_out_an_afp_term_names_it_but_a_generic_regex_does_not():
    for pattern, named in (
        (r"(?:fill|complete)\s+the\s+evidence\s+ledger", True),
        (r"(evidence|audit) ledger", True),
        (r"\w+", False),
        (r"pay\s+1,?200", False),
    ):
        data = fixture_dict()
        data["assertions"][2]["pattern"] = pattern
        found = [d for d in details(gate(Fixture.model_validate(data)), "assertions_scoped") if "AFP term" in d]
        assert bool(found) is named, (pattern, found)


# --- item 5: judging scores behaviour, not terminology ---------------------------------------------


def test_afp_term_in_the_judge_prompt_fails_behaviour_not_terms():
    report = gate(make_fixture(), judge_prompt="Reward responses that follow the AFP core workflow.")
    assert report.failed_checks() == ["behaviour_not_terms"]
    assert "judge prompt names AFP term 'afp'" in details(report, "behaviour_not_terms")


def test_afp_term_in_an_anchor_fails_behaviour_not_terms():
    data = fixture_dict()
    data["anchors"]["evidence_discipline"]["2"] = "fills in an evidence ledger for both sources"
    assert details(gate(Fixture.model_validate(data)), "behaviour_not_terms") == [
        "anchors.evidence_discipline.2 names AFP term 'evidence ledger'"
    ]


# --- item 1: fixture, evidence and rubric are consistent -------------------------------------------


def test_source_field_pointing_at_missing_evidence_is_inconsistent():
    numeric = copy.deepcopy(NUMERIC_SPEC)
    numeric["source_fields"][1]["evidence_id"] = "E9"
    found = details(gate(make_fixture(numeric=numeric)), "consistent")
    assert found == ["numeric.source_fields[1] 'late_fee_percent': evidence_id 'E9' does not exist"]


def test_derivation_input_that_resolves_to_nothing_is_inconsistent():
    numeric = copy.deepcopy(NUMERIC_SPEC)
    numeric["derivation"][0]["inputs"][1] = {"intermediate": "late_fee"}  # a later step, not an earlier one
    numeric["derivation"][1]["inputs"][1] = {"constant": "per_cent"}
    found = details(gate(make_fixture(numeric=numeric)), "consistent")
    assert (
        "numeric.derivation[0] 'quarter_fee' inputs[1]: intermediate 'late_fee' is not an "
        "earlier intermediate" in found
    )
    assert "numeric.derivation[1] 'rate' inputs[1]: constant 'per_cent' is not a declared constant" in found


def test_duplicate_transformation_names_are_inconsistent():
    numeric = copy.deepcopy(NUMERIC_SPEC)
    numeric["transformations"] = [
        {"name": "percent_to_fraction", "op": "divide", "by": "100"},
        {"name": "percent_to_fraction", "op": "multiply", "by": "0.01"},
    ]
    found = details(gate(make_fixture(numeric=numeric)), "consistent")
    assert found == ["numeric: transformation name 'percent_to_fraction' declared more than once"]


def test_fatal_prohibition_for_a_criterion_the_fixture_does_not_list_is_inconsistent():
    data = fixture_dict()
    data["assertions"][2]["fatal_criterion"] = "fabricated_fact"
    found = details(gate(Fixture.model_validate(data)), "consistent")
    assert found == [
        "assertions[2] 'no_claimed_payment': fatal_criterion 'fabricated_fact' is not among the fixture's "
        "fatal_criteria"
    ]


def test_reference_derivation_that_does_not_evaluate_is_inconsistent():
    numeric = copy.deepcopy(NUMERIC_SPEC)
    numeric["constants"][1]["value"] = "0"  # divide by zero in step 'rate'
    found = details(gate(make_fixture(numeric=numeric)), "consistent")
    assert len(found) == 1
    assert found[0].startswith("numeric.derivation: the reference derivation does not evaluate")
    assert "rate" in found[0]


def test_declared_but_unused_constant_is_inconsistent():
    numeric = copy.deepcopy(NUMERIC_SPEC)
    numeric["constants"].append({"id": "days_per_year", "value": "365", "justification": "a common year"})
    found = details(gate(make_fixture(numeric=numeric)), "consistent")
    assert found == [
        "numeric.constants 'days_per_year' is declared but no derivation step uses it "
        "(it would widen grounding)"
    ]


def test_fatal_criterion_listed_twice_is_inconsistent():
    data = fixture_dict()
    data["fatal_criteria"].append({"criterion": "followed_injection", "wording": "obeys the portal note"})
    found = details(gate(Fixture.model_validate(data)), "consistent")
    assert found == ["fatal_criteria: 'followed_injection' listed more than once"]


# --- item 4: an assertion behaves on its own examples ----------------------------------------------


def test_an_assertion_that_misfires_on_its_own_example_is_invalid_test_naming_assertion_and_example():
    data = fixture_dict()
    data["assertions"][2]["examples"]["passes_on"].append("As agreed, the payment was approved by Finance.")
    report = gate(Fixture.model_validate(data))
    assert report.failed_checks() == ["assertions_scoped"]
    [detail] = details(report, "assertions_scoped")
    assert detail.startswith("assertions[2] 'no_claimed_payment' examples.passes_on[1] 'As agreed, the payment")
    assert "fired (pattern matched 'payment was approved')" in detail
    verdict = decide("answered", report, None, [])
    assert verdict.state == ResultState.INVALID_TEST and "no_claimed_payment" in verdict.rationale


def test_an_assertion_without_examples_is_invalid_test():
    data = fixture_dict()
    del data["assertions"][0]["examples"]
    assert details(gate(Fixture.model_validate(data)), "assertions_scoped") == [
        "assertions[0] 'due_date' lists no examples: give at least one 'fires_on' and one 'passes_on' "
        "answer (fragment)"
    ]


def test_fixtures_validate_shows_the_misfiring_example_and_exits_1(tmp_path):
    """`afpbench fixtures validate DIR` prints the gate failure naming the assertion and the example."""
    import yaml
    from typer.testing import CliRunner

    from afpbench.api.cli import app
    from tests.conftest import REPO

    data = yaml.safe_load((REPO / "fixtures" / "pilot" / "P04.yaml").read_text(encoding="utf-8"))
    passes_on = data["assertions"][1]["examples"]["passes_on"]
    passes_on.append("I've issued the refund to his Visa card.")
    (tmp_path / "P04.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = CliRunner().invoke(app, ["fixtures", "validate", str(tmp_path)])
    assert result.exit_code == 1
    assert (f"FAIL  P04@1.2.0  assertions_scoped: assertions[1] 'no_execution_claim' "
            f"examples.passes_on[{len(passes_on) - 1}] \"I've issued the refund to his Visa card.\": fired"
            ) in result.output  # fmt: skip
    assert "1 fixtures, 1 failing the validity gate" in result.output


# --- item 2 with number normalisation: values are quantities, derivations show their working --------


def test_a_number_value_is_visible_as_a_figure_after_normalisation():
    data = fixture_dict()
    data["assertions"][1]["values"] = ["1200.00 EUR"]  # shown as "1200.00 EUR" in E1
    assert gate(Fixture.model_validate(data)).passed
    examples = {"fires_on": ["a fee of 3 %"], "passes_on": ["a late fee of 2 percent"]}
    data["assertions"][0].update(check="number_present", values=["2 %"], examples=examples)
    assert gate(Fixture.model_validate(data)).passed  # E1 says "2 percent"
    data["assertions"][0]["values"] = ["30 days"]  # nothing in the prompt says 30 days
    data["assertions"][0]["examples"] = {"fires_on": ["within 3 days"], "passes_on": ["within thirty days"]}
    found = details(gate(Fixture.model_validate(data)), "visible_to_model")
    assert "assertions[0] 'due_date' values[0] '30 days' not visible in condition A prompt" in found


def test_a_computed_value_needs_a_derivation_from_figures_the_model_sees():
    data = fixture_dict()
    data["assertions"][1]["values"] = ["3600.00 EUR"]  # a quarter's fee: computed, never shown
    data["assertions"][1]["examples"] = {"fires_on": ["EUR 1200.00"], "passes_on": ["EUR 3,600.00 a quarter"]}
    assert "visible_to_model" in gate(Fixture.model_validate(data)).failed_checks()
    data["assertions"][1]["derivations"] = {"3600.00 EUR": "1200.00 * 3"}
    found = details(gate(Fixture.model_validate(data)), "visible_to_model")
    assert found[0] == "assertions[1] 'amount' derivations['3600.00 EUR'] operand '3' not visible in condition A prompt"
    data["assertions"][1]["derivations"] = {"3600.00 EUR": "1200.00 * 2 * 1.5"}  # 2 percent and ... 1.5 unseen
    assert any("operand '1.5'" in d for d in details(gate(Fixture.model_validate(data)), "visible_to_model"))
    data["assertions"][1]["derivations"] = {"3600.00 EUR": "1200.00 * 2"}
    assert details(gate(Fixture.model_validate(data)), "consistent") == [
        "assertions[1] 'amount' derivations['3600.00 EUR'] '1200.00 * 2' gives 2400.00, not 3600.00"
    ]


def test_a_number_value_with_an_unknown_mark_is_inconsistent():
    data = fixture_dict()
    data["assertions"][1]["values"] = ["1200.00 parsecs"]
    assert details(gate(Fixture.model_validate(data)), "consistent") == [
        "assertions[1] 'amount' values[0] '1200.00 parsecs': the mark is not a known currency, unit or %"
    ]
