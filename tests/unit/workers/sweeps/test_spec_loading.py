"""Spec ergonomics: a typo'd key gets "did you mean", every error of a spec is listed at once (one line
each), and a spec without a `judges` key is refused unless `judges: []` is written explicitly (without
judges every answered cell ends GRADER_DISPUTE, which must be a choice, not an omission).
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from afpbench.workers.errors import SpecError
from afpbench.workers.settings import Settings
from afpbench.workers.sweeps.spec import NO_JUDGES, SweepSpec
from afpbench.workers.sweeps.spec_loading import demo_spec, parse_spec

SIM = {"provider": "sim", "model": "sim-1"}


def problems(data: dict) -> str:
    with pytest.raises(SpecError) as caught:
        parse_spec(data, "s.yaml")
    return str(caught.value)


@pytest.mark.parametrize(("data", "line"), [
    ({"models": [SIM], "judge": []}, "s.yaml: judge: unknown field; did you mean 'judges'?"),
    ({"models": [SIM], "judges": [], "repeets": 2}, "s.yaml: repeets: unknown field; did you mean 'repeats'?"),
    ({"models": [{**SIM, "limts": {}}], "judges": []}, "s.yaml: models.0.limts: unknown field; did you mean 'limits'?"),
    ({"models": [{**SIM, "limits": {"burts": 2}}], "judges": []},
     "s.yaml: models.0.limits.burts: unknown field; did you mean 'burst'?"),
    ({"models": [SIM], "judges": [{**SIM, "modle": "x"}]},
     "s.yaml: judges.0.modle: unknown field; did you mean 'model'?"),
    ({"models": [SIM], "judges": [], "fixtures": {"onyl": ["P01"]}},
     "s.yaml: fixtures.onyl: unknown field; did you mean 'only'?"),
    ({"models": [SIM], "judges": [], "pass_rule": {"min_totl": 5}},
     "s.yaml: pass_rule.min_totl: unknown field; did you mean 'min_total'?"),
])
def test_an_unknown_key_gets_did_you_mean_from_the_fields_at_its_level(data, line):
    """Rule: difflib over the field names of the model at that level; the error stays one line."""
    assert problems(data) == line


def test_an_unknown_key_with_no_close_match_lists_the_fields_known_there():
    message = problems({"models": [SIM], "judges": [], "zzz": 1})
    assert message.startswith("s.yaml: zzz: unknown field (known here: name, models, judges, conditions,")
    assert "\n" not in message


def test_every_error_of_a_spec_is_listed_at_once_one_line_each():
    """Rule: all errors at once, each on its own line naming the field, not just the first or a generic one."""
    message = problems({"models": [{"provider": "opnai", "model": "x", "timeout_s": -1}],
                        "repeats": 0, "conditions": ["A", "E"], "judgs": []})
    head, *lines = message.splitlines()
    assert head == "s.yaml: 5 problems:"
    fields = [line.strip().split(":")[0] for line in lines]
    assert fields == ["models.0.provider", "models.0.timeout_s", "conditions.1", "repeats", "judgs"]
    assert "unknown provider 'opnai'" in lines[0] and "did you mean 'judges'?" in lines[4]
    assert all(line.startswith("  ") for line in lines)


def test_a_spec_without_judges_is_refused_with_what_to_write():
    """Rule: no `judges` key -> refused, saying how to add judges or to write `judges: []`."""
    message = problems({"models": [SIM]})
    assert message == f"s.yaml: judges: {NO_JUDGES}"
    assert "judges: []" in message and "GRADER_DISPUTE" in message
    assert problems({"models": [SIM], "judges": None}) == message, "judges: null is not an explicit choice"


def test_judges_written_empty_is_accepted_and_stored_as_written():
    spec = parse_spec({"models": [SIM], "judges": []})
    assert spec.judges == [] and spec.resolved()["judges"] == []
    assert parse_spec(spec.resolved(), "stored").judges == [], "a stored spec parses again"


def test_the_demo_spec_has_a_judge():
    assert [j.display for j in demo_spec().judges] == ["sim-judge (simulated)"]


def test_the_model_itself_refuses_a_missing_judges_key_and_its_schema_says_required():
    """The HTTP API validates posted specs with SweepSpec directly: the same rule, and the OpenAPI says so."""
    with pytest.raises(ValidationError, match="judges: \\[\\] to run without judges"):
        SweepSpec.model_validate({"models": [SIM]})
    schema = SweepSpec.model_json_schema()
    assert "judges" in schema["required"] and "default" not in schema["properties"]["judges"]


def test_the_http_api_answers_422_naming_the_judges_field(sqlite_url):
    client = TestClient(_app(sqlite_url))
    response = client.post("/sweeps", json={"models": [SIM]}, headers={"Authorization": "Bearer tok-ergonomics"})
    assert response.status_code == 422
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "judges"] and error["msg"] == NO_JUDGES
    typo = client.post("/sweeps", json={"models": [SIM], "judges": [], "repeets": 1},
                       headers={"Authorization": "Bearer tok-ergonomics"})
    assert typo.status_code == 422 and typo.json()["detail"][0]["loc"] == ["body", "repeets"]


def _app(sqlite_url: str):
    from afpbench.api.http.app import create_app

    return create_app(Settings(api_token="tok-ergonomics", database_url=sqlite_url), runtime=False)
