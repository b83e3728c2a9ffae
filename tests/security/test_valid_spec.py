"""Validation closes the holes (issue #15, item 8): values no column, request body or error line can hold
faithfully are refused with one line naming the field, before anything is written.

Each case replays a spec that was accepted before: `requests_per_min: .inf` (a SQL error on PostgreSQL
and a half-written sweep), NaN in params, `conditions: []` (an empty "complete" sweep, exit 0),
`repeats: true`, NULs in names and ids, `base_url: "http://"` (kept as "http:"), and over the HTTP API a
lone surrogate in a path field (HTTP 500). The CLI runs as a subprocess on a SQLite file in a temp
dir; the API through the FastAPI app on its own SQLite file.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from afpbench.api.http.app import create_app
from afpbench.workers.errors import SpecError
from afpbench.workers.sweeps.spec_loading import load_spec, parse_spec
from tests.e2e.test_cli_errors import afpbench, one_line_error, row_count

SIM = "{provider: sim, model: sim-1"
TOKEN = "valid-spec-token-4b1e7d"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}

# case -> (spec YAML, words the one-line error must hold besides the file name)
SPEC_CASES: dict[str, tuple[str, list[str]]] = {
    "infinite-rate": (f"models: [{SIM}, limits: {{requests_per_min: .inf}}}}]\n",
                      ["models.0.limits.requests_per_min", "finite"]),
    "infinite-rate-as-text": (f"models: [{SIM}, limits: {{tokens_per_min: inf}}}}]\n",
                              ["models.0.limits.tokens_per_min", "finite"]),
    "nan-temperature": (f"models: [{SIM}, params: {{temperature: .nan}}}}]\n",
                        ["models.0.params.temperature", "finite"]),
    "nan-in-nested-param": (f"models: [{SIM}, params: {{logit_bias: {{'42': .nan}}}}}}]\n",
                            ["models.0.params.logit_bias.42", "finite"]),
    "nan-timeout": (f"models: [{SIM}, timeout_s: .nan}}]\n", ["models.0.timeout_s", "finite"]),
    "nan-price": (f"models: [{SIM}, prices: {{input_per_mtok: .nan}}}}]\n",
                  ["models.0.prices.input_per_mtok", "finite"]),
    "empty-conditions": (f"models: [{SIM}}}]\nconditions: []\n", ["conditions", "at least 1"]),
    "empty-fixture-list": (f"models: [{SIM}}}]\nfixtures: {{only: []}}\n", ["fixtures.only", "at least 1"]),
    "empty-models": ("models: []\n", ["models", "at least 1"]),
    "boolean-repeats": (f"models: [{SIM}}}]\nrepeats: true\n", ["repeats", "boolean true"]),
    "boolean-high-risk-repeats": (f"models: [{SIM}}}]\nhigh_risk_repeats: true\n",
                                  ["high_risk_repeats", "boolean"]),
    "boolean-burst": (f"models: [{SIM}, limits: {{burst: false}}}}]\n", ["models.0.limits.burst", "boolean false"]),
    "boolean-in-flight": (f"models: [{SIM}, limits: {{max_in_flight: true}}}}]\n",
                          ["models.0.limits.max_in_flight", "boolean"]),
    "boolean-rate": (f"models: [{SIM}, limits: {{requests_per_min: true}}}}]\n",
                     ["models.0.limits.requests_per_min", "boolean"]),
    "boolean-pass-rule": (f"models: [{SIM}}}]\npass_rule: {{min_total: true}}\n", ["pass_rule.min_total", "boolean"]),
    "nul-in-name": (f'name: "demo\\0"\nmodels: [{SIM}}}]\n', ["name", "NUL"]),
    "nul-in-model-id": ('models: [{provider: sim, model: "sim-1\\0"}]\n', ["models.0.model", "NUL"]),
    "nul-in-label": (f'models: [{SIM}, label: "a\\0b"}}]\n', ["models.0.label", "NUL"]),
    "nul-in-path": (f'models: [{SIM}}}]\nfixtures: {{dir: "/tmp/fx\\0"}}\n', ["fixtures.dir", "NUL"]),
    "nul-in-param": (f'models: [{SIM}, params: {{stop: ["a\\0"]}}}}]\n', ["models.0.params.stop.0", "NUL"]),
    "newline-in-model-id": ('models: [{provider: sim, model: "sim-1\\nx"}]\n',
                            ["models.0.model", "one line"]),
    "hostless-base-url": (f'models: [{SIM}, base_url: "http://"}}]\n', ["models.0.base_url", "no host"]),
    "hostless-base-url-with-path": (f'models: [{SIM}, base_url: "https:///v1"}}]\n',
                                    ["models.0.base_url", "no host"]),
    "base-url-with-password": (f'models: [{SIM}, base_url: "http://u:hunter22@127.0.0.1/v1"}}]\n',
                               ["models.0.base_url", "password"]),
}
# One subprocess per kind of hole (each is mostly start-up time on a shared machine).
CLI_CASES = ["infinite-rate", "empty-conditions", "boolean-repeats", "nul-in-model-id", "hostless-base-url"]


def _spec_file(root: Path, case: str) -> Path:
    work = root / case
    work.mkdir()
    # `judges: []` written, so the one error is the case's own (a spec without the key is refused too).
    (work / "bad-spec.yaml").write_text(SPEC_CASES[case][0] + "judges: []\n", encoding="utf-8")
    return work / "bad-spec.yaml"


@pytest.mark.parametrize("case", list(SPEC_CASES))
def test_spec_holes_are_refused_naming_the_field(tmp_path, case):
    """Rule: non-finite numbers, empty condition/fixture/model lists, booleans where counts belong, NULs
    and control characters in names, ids and paths, and a base URL without a host are refused with a
    message naming the file and the field (and never quoting a credential)."""
    with pytest.raises(SpecError) as info:
        load_spec(_spec_file(tmp_path, case))
    message = str(info.value)
    assert "bad-spec.yaml" in message and "\n" not in message, message
    assert all(word in message for word in SPEC_CASES[case][1]), message
    assert "hunter22" not in message


@pytest.fixture(scope="module")
def cli_outcomes(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("valid-spec-cli")
    specs = {case: _spec_file(root, case) for case in CLI_CASES}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {case: pool.submit(afpbench, ["run", str(spec)], spec.parent) for case, spec in specs.items()}
    return {case: (future.result(), specs[case].parent) for case, future in futures.items()}


@pytest.mark.parametrize("case", CLI_CASES)
def test_cli_refuses_each_spec_hole_with_exit_2_and_writes_nothing(cli_outcomes, case):
    """Rule: through `afpbench run` each hole is one line on stderr naming the field, exit status 2, and
    no row in the database (before: exit 0 with a written sweep, or a SQL error after half of it)."""
    proc, work = cli_outcomes[case]
    line = one_line_error(proc)
    assert proc.returncode == 2, (proc.returncode, line)
    assert "bad-spec.yaml" in line and all(word in line for word in SPEC_CASES[case][1]), line
    assert row_count(work / "afpbench.db") == 0


def test_a_scheme_in_capitals_is_accepted_and_normalised():
    """Rule: the base URL's scheme is checked case-insensitively (HTTP:// is http://), and stored in
    lower case so one endpoint is one limiter pool and one model hash."""
    upper = parse_spec({"models": [{"provider": "sim", "model": "m", "base_url": "HTTPS://Host:8443/v1/"}],
                        "judges": []})
    assert upper.models[0].base_url == "https://Host:8443/v1"
    lower = parse_spec({"models": [{"provider": "sim", "model": "m", "base_url": "https://Host:8443/v1"}],
                        "judges": []})
    assert upper.models[0].model_hash == lower.models[0].model_hash


def test_text_params_keep_their_line_breaks():
    """Rule: only NULs and lone surrogates are refused in free-form params; a stop sequence "\\n" is a
    legitimate request parameter and passes."""
    spec = parse_spec({"models": [{"provider": "sim", "model": "m", "params": {"stop": ["\n\n"], "top_p": 0.9}}],
                       "judges": []})
    assert spec.models[0].params == {"stop": ["\n\n"], "top_p": 0.9}


@pytest.fixture
def client(settings_env, sqlite_url):
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN=TOKEN, AFP_BROKER_URL="memory://")
    return TestClient(create_app(runtime=False))


MODEL = '{"provider": "sim", "model": "sim-1"'
# case -> (raw JSON body, expected loc, a word of the message). Raw text: NaN, Infinity and lone
# surrogates are what a client can send (Python's json module and FastAPI accept them).
API_CASES: dict[str, tuple[str, list, str]] = {
    "nan-rate": (f'{{"models": [{MODEL}, "limits": {{"requests_per_min": NaN}}}}]}}',
                 ["body", "models", 0, "limits", "requests_per_min"], "finite"),
    "infinite-temperature": (f'{{"models": [{MODEL}, "params": {{"temperature": Infinity}}}}]}}',
                             ["body", "models", 0, "params", "temperature"], "finite"),
    "surrogate-in-fixture-dir": (f'{{"models": [{MODEL}}}], "fixtures": {{"dir": "/tmp/\\ud800"}}}}',
                                 ["body", "fixtures", "dir"], "surrogate"),
    "surrogate-in-judge-prompt": (f'{{"models": [{MODEL}}}], "judge_prompt": "/tmp/\\udfff.md"}}',
                                  ["body", "judge_prompt"], "surrogate"),
    "surrogate-in-instructions-dir": (f'{{"models": [{MODEL}}}], "instructions": {{"dir": "\\udc80"}}}}',
                                      ["body", "instructions", "dir"], "surrogate"),
    "nul-in-label": (f'{{"models": [{MODEL}, "label": "x\\u0000"}}]}}', ["body", "models", 0, "label"], "NUL"),
    "empty-conditions": (f'{{"models": [{MODEL}}}], "conditions": []}}', ["body", "conditions"], "at least 1"),
    "empty-fixture-list": (f'{{"models": [{MODEL}}}], "fixtures": {{"only": []}}}}', ["body", "fixtures", "only"],
                           "at least 1"),
    "boolean-repeats": (f'{{"models": [{MODEL}}}], "repeats": true}}', ["body", "repeats"], "boolean"),
    "hostless-base-url": (f'{{"models": [{MODEL}, "base_url": "http://"}}]}}', ["body", "models", 0, "base_url"],
                          "no host"),
}


@pytest.mark.parametrize("case", list(API_CASES))
def test_api_refuses_each_spec_hole_with_422_naming_the_field(client, case):
    """Rule: over the HTTP API the same holes are a 422 whose detail names the field (loc); a lone
    surrogate in a path field was an HTTP 500. Nothing is written."""
    body, loc, word = API_CASES[case]
    body = body[:-1] + ', "judges": []}'  # written, so the one error is the case's own
    response = client.post("/sweeps", content=body.encode("utf-8"), headers=AUTH)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail[0]["loc"] == loc and word in detail[0]["msg"], detail
    assert client.get("/sweeps", headers=AUTH).json()["total"] == 0


def test_an_error_quoting_a_server_file_name_that_is_not_utf8_is_a_422(client, tmp_path):
    """Rule: no error message can turn a 422 into a 500. A file name that is not UTF-8 reaches Python as
    lone surrogates; an error naming it could not be encoded by the JSON response before."""
    folder = tmp_path / "fx"
    folder.mkdir()
    with open(bytes(folder) + b"/P\xff.yaml", "wb") as bad:  # neither the name nor the text is UTF-8
        bad.write(b"id: P01\n# caf\xe9\n")
    body = {"models": [{"provider": "sim", "model": "sim-1"}], "judges": [], "fixtures": {"dir": str(folder)}}
    response = client.post("/sweeps", content=json.dumps(body), headers=AUTH)
    assert response.status_code == 422, response.text
    assert response.json()["detail"], response.text
    assert client.get("/sweeps", headers=AUTH).json()["total"] == 0
