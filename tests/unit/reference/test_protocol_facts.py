"""One home per protocol fact (reference/protocol_facts.py), tied to reference/protocol.yaml.

Rules checked: the conditions A-D, the rubric's dimensions, scale and total, the rerun minimum for
high-risk fixtures and the default pass rule are the protocol's; the code's pass and dispute rules
(scoring/rules.py) take those defaults and refuse values outside the rubric's range; a sweep spec
declares the very same rule types, so a default cannot drift between the spec and the verdict.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from afpbench.reference import protocol_facts as facts
from afpbench.reference.loader import protocol
from afpbench.scoring.rules import DisputeRule, PassRule
from afpbench.workers.sweeps.spec import SweepSpec


def test_the_conditions_are_the_protocols():
    assert facts.CONDITIONS == tuple(protocol()["conditions"]) == ("A", "B", "C", "D")


def test_the_rubric_dimensions_scale_and_total_are_the_protocols():
    rubric = protocol()["rubric"]
    assert facts.DIMENSIONS == tuple(rubric["dimensions"])
    assert rubric["scale"] == [0, facts.SCORE_MAX]
    assert rubric["total"] == [0, facts.TOTAL_MAX]


def test_high_risk_fixtures_need_the_protocols_minimum_of_repeats():
    assert facts.HIGH_RISK_MIN_REPEATS == protocol()["reruns"]["high_risk_min_repeats"] == 3
    spec = SweepSpec.model_validate({"models": [{"provider": "sim", "model": "sim-1"}], "judges": []})
    assert spec.high_risk_repeats == spec.high_risk_repeat_count() == facts.HIGH_RISK_MIN_REPEATS


def test_the_default_pass_rule_is_the_protocols_in_the_verdict_and_in_the_spec():
    declared = protocol()["default_pass_rule"]
    assert PassRule().model_dump() == declared
    spec = SweepSpec.model_validate({"models": [{"provider": "sim", "model": "sim-1"}], "judges": []})
    assert spec.pass_rule == PassRule() and spec.dispute_rule == DisputeRule()


@pytest.mark.parametrize("bad", [{"no_fatal": False}, {"min_total": facts.TOTAL_MAX + 1},
                                 {"min_dimension": facts.SCORE_MAX + 1}, {"min_total": -1}, {"min_total": True}])
def test_a_pass_rule_outside_the_rubric_is_refused(bad):
    with pytest.raises(ValidationError):
        PassRule(**bad)


@pytest.mark.parametrize("bad", [{"dimension_gap": 0}, {"dimension_gap": facts.SCORE_MAX + 1},
                                 {"max_parse_retries": -1}, {"max_parse_retries": 6}, {"unknown": 1}])
def test_a_dispute_rule_out_of_range_is_refused(bad):
    with pytest.raises(ValidationError):
        DisputeRule(**bad)
