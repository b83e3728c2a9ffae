"""The comparison family (issue 37): every pair of the conditions a sweep runs, or a declared list, checked."""

from __future__ import annotations

import json

import pytest

from afpbench.reference.errors import AfpbenchError
from afpbench.scoring.comparison_family import ComparisonFamilyError, ConditionPair, declared_family, default_family


def test_the_default_family_of_a_to_d_is_all_six_pairs_later_condition_first():
    """Rule: the default is every pair of the conditions the sweep runs, the later condition first."""
    family = default_family(["D", "B", "A", "C"])
    assert [p.label for p in family] == ["B vs A", "C vs A", "C vs B", "D vs A", "D vs B", "D vs C"]
    assert all(isinstance(p, ConditionPair) for p in family)


def test_a_subset_run_compares_what_it_contains():
    """Rule: subset runs compare what they contain (`--conditions A,D` gives D vs A)."""
    assert default_family(["A", "D"]) == [ConditionPair("D", "A")]
    assert default_family(["C"]) == []


def test_a_pair_unpacks_and_serialises_as_two_conditions():
    first, second = ConditionPair("D", "A")
    assert (first, second) == ("D", "A")
    assert json.dumps(ConditionPair("D", "A")) == '["D", "A"]'


def test_a_declared_list_keeps_its_order_and_direction():
    family = declared_family([["A", "D"], "C vs B"], conditions="ABCD")
    assert family == [ConditionPair("A", "D"), ConditionPair("C", "B")]
    assert family[0].label == "A vs D"


@pytest.mark.parametrize(("pairs", "conditions", "names"), [
    ([["D", "E"]], None, ["comparisons[0]", "'E'", "not one of A, B, C, D"]),
    ([["D", "A"], ["C", "B"]], "ABD", ["comparisons[1]", "'C'", "not run by this sweep"]),
    ([["C", "C"]], None, ["comparisons[0]", "'C vs C'", "itself"]),
    ([["D", "A"], ["A", "D"]], None, ["comparisons[1]", "'A vs D'", "'D vs A'", "twice"]),
    ([["D"]], None, ["comparisons[0]", "two conditions"]),
    (["D versus A"], None, ["comparisons[0]", "'D versus A'"]),
    ([], None, ["empty"]),
])
def test_a_bad_declared_list_is_one_clear_error_naming_the_value(pairs, conditions, names):
    """Rule: bad input is a one-line error naming the value (exit status 2: an AfpbenchError)."""
    with pytest.raises(ComparisonFamilyError) as raised:
        declared_family(pairs, conditions=conditions)
    message = str(raised.value)
    assert "\n" not in message
    for name in names:
        assert name in message
    assert isinstance(raised.value, AfpbenchError) and isinstance(raised.value, ValueError)
    assert raised.value.exit_code == 2


def test_the_default_family_rejects_an_unknown_condition():
    with pytest.raises(ComparisonFamilyError, match="'E'"):
        default_family(["A", "E"])
