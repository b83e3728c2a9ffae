"""Result states: exactly the protocol's six, and a pass rate over PASS and FAIL only."""

import pytest

from afpbench.reference.loader import protocol
from afpbench.scoring.states import IN_DENOMINATOR, ResultState, pass_rate


def test_result_states_are_exactly_the_protocol_result_states():
    assert {s.value for s in ResultState} == set(protocol()["result_states"])
    assert len(ResultState) == 6


def test_denominator_holds_exactly_the_states_the_protocol_marks_in_denominator():
    declared = {name for name, spec in protocol()["result_states"].items() if spec["in_denominator"]}
    assert {s.value for s in IN_DENOMINATOR} == declared == {"MODEL_PASS", "MODEL_FAIL"}


def test_pass_rate_is_pass_over_pass_plus_fail():
    assert pass_rate(3, 1) == pytest.approx(0.75)
    assert pass_rate(0, 4) == 0.0
    assert pass_rate(5, 0) == 1.0


def test_pass_rate_with_nothing_scored_is_none_not_zero():
    assert pass_rate(0, 0) is None


def test_pass_rate_rejects_negative_counts():
    with pytest.raises(ValueError):
        pass_rate(-1, 2)
