"""Keys by allow-list (issue #15, item 2): a model may only name a key variable the operator allowed
(AFP_KEY_VARS); nothing else is read, whether the spec came from the CLI or the API.

The hole: `api_key_env: AFP_FLOWER_PASSWORD` (or HOME, PATH, another model's key) made the preflight
send that variable as a bearer token to the spec's own base_url. The echo server here records what it
receives, so "refused" also means "never sent"."""

from __future__ import annotations

import os

import pytest
import requests
import yaml

from afpbench.workers.errors import KeyNotAllowed, MissingKey, SettingError
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import ChatRequest, Endpoint, OutcomeClass, key_for
from tests.security.door_harness import (
    AUTH,
    CANARY,
    EchoServer,
    cli,
    one_line_error,
    row_count,
    serve_env,
    serving,
)

pytestmark = pytest.mark.integration

SERVER_VARIABLES = ("AFP_FLOWER_PASSWORD", "HOME", "PATH", "POSTGRES_PASSWORD")


def _listing(_path: str) -> tuple[int, dict]:
    return 200, {"object": "list", "data": [{"id": "m", "object": "model"}]}


@pytest.fixture(scope="module")
def echo():
    with EchoServer(_listing).running() as server:
        yield server


def _model(echo: EchoServer, variable: str) -> dict:
    return {"provider": "openai-compatible", "model": "m", "base_url": echo.base_url("keys"), "api_key_env": variable}


def _spec(echo: EchoServer, variable: str) -> dict:
    return {"name": "keys", "models": [_model(echo, variable)], "judges": [], "conditions": ["A"],
            "fixtures": {"only": ["P01"]}}


def _bearers(echo: EchoServer) -> list[str]:
    return [s.headers.get("Authorization", "") for s in echo.seen]


def test_the_cli_refuses_key_variables_off_the_allow_list_and_sends_nothing(tmp_path, echo):
    """Rule: the CLI reads only allowed key variables: one line naming the variable and AFP_KEY_VARS,
    exit 2, no rows, and the echo server never receives the variable's value."""
    env = {"AFP_FLOWER_PASSWORD": CANARY, "POSTGRES_PASSWORD": CANARY}
    for variable in SERVER_VARIABLES:
        echo.seen.clear()
        spec_file = tmp_path / "s.yaml"
        spec_file.write_text(yaml.safe_dump(_spec(echo, variable)), encoding="utf-8")
        proc = cli(["run", str(spec_file)], tmp_path, env=env)
        line = one_line_error(proc)
        assert variable in line and "AFP_KEY_VARS" in line, line
        assert echo.seen == [], f"{variable}: the endpoint was called"
        assert CANARY not in proc.stdout + proc.stderr
        assert row_count(tmp_path / "afpbench.db") == 0


@pytest.fixture(scope="module")
def served(tmp_path_factory, echo):
    tmp = tmp_path_factory.mktemp("serve-keys")
    env = serve_env(tmp, AFP_ALLOWED_BASE_URLS=f"http://127.0.0.1:{echo.port}/keys/v1",
                    AFP_FLOWER_PASSWORD=CANARY, POSTGRES_PASSWORD=CANARY, AFP_KEY_DOOR="door-key-value-4471")
    env.pop("AFP_KEY_VARS", None)  # the server runs with the documented default allow-list
    with serving(env, tmp / "serve.log") as server:
        yield server


def test_the_api_refuses_key_variables_off_the_default_allow_list_and_sends_nothing(served, echo):
    """Rule: with AFP_KEY_VARS unset, a posted spec may name only the providers' well-known key
    variables and AFP_KEY_*: anything else is a 422 naming the variable and the setting, and nothing is
    sent to the spec's base_url."""
    for variable in SERVER_VARIABLES:
        echo.seen.clear()
        response = requests.post(f"{served.base}/sweeps", json=_spec(echo, variable), headers=AUTH, timeout=60)
        assert response.status_code == 422, (variable, response.text)
        detail = response.json()["detail"][0]
        assert detail["loc"] == ["body", "models", 0, "api_key_env"], detail
        assert variable in detail["msg"] and "AFP_KEY_VARS" in detail["msg"], detail
        assert echo.seen == [] and CANARY not in response.text
    assert requests.get(f"{served.base}/sweeps", headers=AUTH, timeout=10).json()["total"] == 0
    # An allowed variable (AFP_KEY_* is in the default list) is read and sent, to the allowed base only.
    echo.seen.clear()
    ok = requests.post(f"{served.base}/sweeps", json=_spec(echo, "AFP_KEY_DOOR"), headers=AUTH, timeout=60)
    assert ok.status_code == 201, ok.text
    assert "Bearer door-key-value-4471" in _bearers(echo)


def test_key_for_reads_only_allowed_variables(settings_env, monkeypatch):
    """Rule: the allow-list holds where the key is read (types.key_for), so no stored spec or hand-built
    endpoint gets past it; the default list, prefixes, reserved names and malformed settings."""
    monkeypatch.setenv("HOME", os.environ.get("HOME", "/root"))
    monkeypatch.setenv("AFP_KEY_MINE", "mine-key-value-123456")
    monkeypatch.setenv("AFP_FLOWER_PASSWORD", CANARY)
    monkeypatch.delenv("AFP_KEY_VARS")
    settings_env()
    ep = lambda var: Endpoint("openai-compatible", "m", "http://127.0.0.1:9/v1", var, {})  # noqa: E731
    with pytest.raises(KeyNotAllowed, match=r"HOME is not an allowed key variable: AFP_KEY_VARS allows OPENAI_API_KEY"):
        key_for(ep("HOME"))
    assert key_for(ep("AFP_KEY_MINE")) == "mine-key-value-123456"
    # An adapter call stops like a missing key (a configuration error), naming the variable, not a value.
    result = adapter_for("openai-compatible").call(ep("HOME"), ChatRequest([{"role": "user", "content": "hi"}], []))
    assert result.outcome == OutcomeClass.auth_error and "HOME" in (result.error or "")
    assert issubclass(KeyNotAllowed, MissingKey)

    settings_env(AFP_KEY_VARS="AFP_*,OPENAI_API_KEY")
    with pytest.raises(KeyNotAllowed, match="afpbench's own secret"):
        key_for(ep("AFP_FLOWER_PASSWORD"))  # reserved beats any prefix
    assert key_for(ep("AFP_KEY_MINE")) == "mine-key-value-123456"
    settings_env(AFP_KEY_VARS="")
    with pytest.raises(KeyNotAllowed, match="allows nothing"):
        key_for(ep("AFP_KEY_MINE"))
    for bad in ("*", "lower_case", "A B", "X*"):
        settings_env(AFP_KEY_VARS=bad)
        with pytest.raises(SettingError, match="AFP_KEY_VARS"):
            key_for(ep("AFP_KEY_MINE"))
