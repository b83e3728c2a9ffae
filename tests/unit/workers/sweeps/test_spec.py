"""The sweep spec: documented format, errors that name the field, and the matrix expansion rules."""

from __future__ import annotations

import re

import pytest

from afpbench.workers.errors import SpecError
from afpbench.workers.sweeps.coordinator import plan_cells
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import demo_spec, load_spec, parse_spec

SIM = {"provider": "sim", "model": "sim-1"}


def test_demo_matrix_is_56_cells_with_high_risk_raised_to_three_repeats():
    """Rerun rule: P05-P07 get >= 3 repeats per condition; 5 x 1 + 3 x 3 = 14 cells per condition."""
    spec = demo_spec()
    plan = plan_cells(spec, load_inputs(spec))
    assert len(plan.cells) == 56
    per_fixture = {}
    for c in plan.cells:
        per_fixture.setdefault((c.condition, c.fixture_id), []).append(c.repeat)
    assert per_fixture[("A", "P05")] == [1, 2, 3]
    assert per_fixture[("D", "P01")] == [1]
    assert any("3 repeats per condition" in n for n in plan.notices)


def test_repeats_multiply_every_fixture_and_models_multiply_the_matrix():
    spec = parse_spec({"models": [SIM, {**SIM, "model": "sim-2"}], "judges": [], "repeats": 4,
                       "conditions": ["A", "C"]})
    plan = plan_cells(spec, load_inputs(spec))
    assert len(plan.cells) == 2 * 2 * 8 * 4  # high-risk already at 4 >= 3


def test_unknown_provider_is_named():
    with pytest.raises(SpecError, match=r"models\.0\.provider: unknown provider 'opnai'"):
        parse_spec({"models": [{"provider": "opnai", "model": "x"}], "judges": []})


def test_a_literal_key_in_the_spec_is_refused():
    """Secrets come from the environment only."""
    with pytest.raises(SpecError, match="api_key_env"):
        parse_spec({"models": [{**SIM, "api_key": "sk-live-123"}], "judges": []})


def test_unknown_field_and_bad_condition_are_named():
    with pytest.raises(SpecError, match=r"repeets"):
        parse_spec({"models": [SIM], "judges": [], "repeets": 2})
    with pytest.raises(SpecError, match=r"conditions\.0"):
        parse_spec({"models": [SIM], "judges": [], "conditions": ["E"]})


def test_malformed_yaml_names_the_file_and_line(tmp_path):
    bad = tmp_path / "sweep.yaml"
    bad.write_text("models:\n  - provider: sim\n   model: [\n")
    with pytest.raises(SpecError, match=r"sweep\.yaml: not valid YAML at line \d+"):
        load_spec(bad)


def test_model_hash_is_deterministic_and_sensitive_to_params():
    a = parse_spec({"models": [SIM], "judges": []}).models[0]
    b = parse_spec({"models": [SIM], "judges": []}).models[0]
    c = parse_spec({"models": [{**SIM, "params": {"temperature": 0.5}}], "judges": []}).models[0]
    assert a.model_hash == b.model_hash != c.model_hash


COUNT_FIELDS = {
    "repeats": {"repeats": True},
    "high_risk_repeats": {"high_risk_repeats": True},
    "models.0.limits.burst": {"models": [{**SIM, "limits": {"burst": True}}]},
    "models.0.limits.max_in_flight": {"models": [{**SIM, "limits": {"max_in_flight": True}}]},
    "pass_rule.min_dimension": {"pass_rule": {"min_dimension": True}},
    "pass_rule.min_total": {"pass_rule": {"min_total": False}},
    "dispute_rule.dimension_gap": {"dispute_rule": {"dimension_gap": True}},
    "dispute_rule.max_parse_retries": {"dispute_rule": {"max_parse_retries": False}},
}


@pytest.mark.parametrize("field", list(COUNT_FIELDS))
def test_a_boolean_is_never_read_as_a_count(field):
    """Lax mode would read true as 1 and false as 0; every count field refuses a boolean by name."""
    data = {"models": [SIM], **COUNT_FIELDS[field]}
    with pytest.raises(SpecError, match=re.escape(field) + ": expected a number, got the boolean"):
        parse_spec(data)


def test_unstorable_text_is_located_also_inside_params_keys_and_lists():
    with pytest.raises(SpecError, match=r"models\.0\.params: a key contains a NUL character"):
        parse_spec({"models": [{**SIM, "params": {"a\x00": 1}}]})
    with pytest.raises(SpecError, match=r"models\.0\.params\.stop\.1: contains a lone surrogate U\+DC80"):
        parse_spec({"models": [{**SIM, "params": {"stop": ["ok", "x\udc80"]}}]})


def test_the_resolved_spec_parses_again_unchanged():
    """Workers re-parse the stored spec: the stricter types must accept everything they produce."""
    spec = parse_spec({"models": [{**SIM, "base_url": "HTTP://h:1/v1/", "limits": {"requests_per_min": 60.5},
                                   "params": {"temperature": 0.0}}], "conditions": ["B", "A"], "repeats": 2,
                       "judges": []})
    again = parse_spec(spec.resolved())
    assert again.resolved() == spec.resolved() and again.models[0].base_url == "http://h:1/v1"


def test_comparisons_default_to_every_pair_and_are_left_out_of_the_resolved_spec():
    """Rule (issue 37): no `comparisons:` compares every pair of the conditions run; the resolved (sealed)
    spec of such a spec is what it was before the key existed."""
    spec = parse_spec({"models": [SIM], "judges": [], "conditions": ["D", "A", "C"]})
    assert [p.label for p in spec.comparison_family()] == ["C vs A", "D vs A", "D vs C"]
    assert "comparisons" not in spec.resolved() and "judge_check" not in spec.resolved()


def test_declared_comparisons_are_sealed_as_pairs_and_a_bad_one_is_named():
    spec = parse_spec({"models": [SIM], "judges": [], "comparisons": ["D vs A", ["C", "B"]]})
    assert spec.resolved()["comparisons"] == [["D", "A"], ["C", "B"]]
    assert parse_spec(spec.resolved()).resolved() == spec.resolved()
    with pytest.raises(SpecError, match=r"comparisons\[1\] 'A vs D': the same pair as 'D vs A'"):
        parse_spec({"models": [SIM], "judges": [], "comparisons": ["D vs A", "A vs D"]})
    with pytest.raises(SpecError, match=r"condition 'B' is not run by this sweep"):
        parse_spec({"models": [SIM], "judges": [], "conditions": ["A", "D"], "comparisons": [["B", "A"]]})


def test_a_condition_subset_keeps_the_declared_pairs_it_still_makes():
    """Rule: `run --conditions A,D` compares what it runs: declared pairs outside it are dropped, and with
    none left every pair of the kept conditions is compared."""
    from afpbench.workers.sweeps.subset import Subset, apply_subset

    spec = parse_spec({"models": [SIM], "judges": [], "comparisons": ["D vs A", "C vs B"]})
    kept = apply_subset(spec, Subset(conditions=["A", "D"]))
    assert [p.label for p in kept.comparison_family()] == ["D vs A"]
    none_left = apply_subset(spec, Subset(conditions=["A", "C"]))
    assert none_left.comparisons is None and [p.label for p in none_left.comparison_family()] == ["C vs A"]


def test_judge_check_is_on_for_real_judges_by_default_and_takes_a_boolean():
    spec = parse_spec({"models": [SIM], "judges": [SIM, {"provider": "openai", "model": "gpt-x",
                                                         "api_key_env": "OPENAI_API_KEY"}]})
    check = spec.judge_check_settings()
    assert [check.applies_to(j) for j in spec.judges] == [False, True] and check.answers == 4
    off = parse_spec({"models": [SIM], "judges": [], "judge_check": False})
    assert off.judge_check is not None and off.judge_check.enabled is False
    assert off.resolved()["judge_check"] == {"enabled": False, "answers": 4}
    assert check.min_agreement == off.judge_check.min_agreement == 0.75


# The spec component of the seal (json_sha256 of the resolved spec) of specs written before
# judge_check.min_agreement existed, as the code before it computed them.
_SEALED_BEFORE_MIN_AGREEMENT = {
    None: "97066384462dcfa609300dad0368dfb715d6d7e6f1adbf18f516bbe8a8d46e25",
    False: "98368447d801f03894ae59e9d440a9bb06b95bd1974c4a4f17b3be16fb7d9e3a",
    "enabled": "fc8fd70ddb93a42ed50f1918848ba3c0396eee38c0fcc97c4167a164e00c4953",
    "answers": "cb2909b45c8924d5dde12a7032fce0cac62377ca3e5e8b7f429c295d86deea76",
}


def test_a_spec_from_before_min_agreement_resolves_and_seals_as_it_did():
    """Rule (seal): a field added later is left out of the resolved spec at its default, so a spec written
    before it (with or without `judge_check:`) seals exactly as before; a declared value is sealed."""
    from afpbench.reference.hashing import json_sha256

    real = {"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:8080/v1"}
    written = {None: None, False: False, "enabled": {"enabled": True}, "answers": {"answers": 6}}
    for case, check in written.items():
        raw = {"models": [{"provider": "sim", "model": "sim-1"}], "judges": [real]}
        if check is not None:
            raw["judge_check"] = check
        spec = parse_spec(raw)
        assert json_sha256(spec.resolved()) == _SEALED_BEFORE_MIN_AGREEMENT[case], case
        assert json_sha256(parse_spec(spec.resolved()).resolved()) == _SEALED_BEFORE_MIN_AGREEMENT[case], case
    declared = parse_spec({"models": [SIM], "judges": [], "judge_check": {"min_agreement": 0.5}})
    assert declared.resolved()["judge_check"] == {"enabled": None, "answers": 4, "min_agreement": 0.5}
    with pytest.raises(SpecError, match=r"judge_check.min_agreement: Input should be greater than 0"):
        parse_spec({"models": [SIM], "judges": [], "judge_check": {"min_agreement": 0}})
