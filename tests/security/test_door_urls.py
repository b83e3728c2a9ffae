"""Outbound addresses by allow-list (issue #15, item 3): a posted spec's base URLs must be allowed by the
operator (AFP_ALLOWED_BASE_URLS, beside the providers' defaults and AFP_SIM_URL); query strings,
fragments and user info are refused everywhere; a provider's response body never comes back in an API
error.

The hole: `base_url: http://internal/anything?x=` turned the preflight's `{base}/models` into a GET of
any internal path, and the 424 carried the first 160 characters of whatever answered."""

from __future__ import annotations

import pytest
import requests
import yaml

from afpbench.workers.errors import SettingError, SpecError
from afpbench.workers.providers.url_policy import allowed_origins
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.security.door_harness import AUTH, CANARY, EchoServer, cli, one_line_error, serve_env, serving

pytestmark = pytest.mark.integration


def _route(path: str) -> tuple[int, dict]:
    if path.startswith("/refuse/"):
        return 401, {"error": {"message": f"internal secret page {CANARY}", "code": "invalid_api_key"}}
    if path.startswith("/redirect/"):
        return 302, {"location": "/elsewhere/v1/models"}
    if path.startswith("/list/"):
        return 200, {"object": "list", "data": [{"id": f"{CANARY}-model", "object": "model"}]}
    return 200, {"object": "list", "data": [{"id": "m", "object": "model"}]}


@pytest.fixture(scope="module")
def echo():
    with EchoServer(_route).running() as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory, echo):
    tmp = tmp_path_factory.mktemp("serve-urls")
    allowed = ",".join(f"http://127.0.0.1:{echo.port}/{p}/v1" for p in ("allowed", "refuse", "list", "redirect"))
    with serving(serve_env(tmp, AFP_ALLOWED_BASE_URLS=allowed), tmp / "serve.log") as server:
        yield server


def _spec(base_url: str, provider: str = "openai-compatible", model: str = "m") -> dict:
    return {"name": "urls", "models": [{"provider": provider, "model": model, "base_url": base_url}],
            "judges": [], "conditions": ["A"], "fixtures": {"only": ["P01"]}}


def _post(served, body: dict) -> requests.Response:
    return requests.post(f"{served.base}/sweeps", json=body, headers=AUTH, timeout=60)


def test_a_base_url_with_a_query_string_is_refused_everywhere(served, echo, tmp_path):
    """Rule: query strings, fragments and user info are refused in every base_url, CLI and API alike:
    a 422 / one line naming models.0.base_url, and the echo server is never called."""
    base = f"http://127.0.0.1:{echo.port}/allowed/v1"
    bad = (f"{base}?x=", f"{base}?x=/internal", f"{base}#frag", f"http://user:pw@127.0.0.1:{echo.port}/allowed/v1",
           f"{base}?")
    echo.seen.clear()
    for url in bad:
        response = _post(served, _spec(url))
        assert response.status_code == 422, (url, response.text)
        assert response.json()["detail"][0]["loc"] == ["body", "models", 0, "base_url"], response.text
        with pytest.raises(SpecError, match=r"models\.0\.base_url: base_url may not contain"):
            parse_spec(_spec(url))
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(yaml.safe_dump(_spec(f"{base}?x=")), encoding="utf-8")
    line = one_line_error(cli(["run", str(spec_file)], tmp_path))
    assert "models.0.base_url" in line and "query string" in line, line
    assert echo.seen == [], "a refused base_url was called"


def test_posted_base_urls_must_be_on_the_allow_list(served, echo):
    """Rule: a posted base URL matches an AFP_ALLOWED_BASE_URLS entry by exact scheme, host and port and
    a path prefix at a '/' boundary, with no '.'/'..' segments or percent-escapes; model names that go
    into a URL path cannot climb out of it either."""
    port = echo.port
    refused = (f"http://127.0.0.1:{port}/other/v1", f"http://127.0.0.1:{port}/allowed/v10",
               f"http://localhost:{port}/allowed/v1", f"https://127.0.0.1:{port}/allowed/v1",
               f"http://127.0.0.1:{port + 1}/allowed/v1", f"http://127.0.0.1:{port}/allowed/v1/../../other",
               f"http://127.0.0.1:{port}/allowed/v1/%2e%2e/x", "http://169.254.169.254/latest/meta-data")
    echo.seen.clear()
    for url in refused:
        response = _post(served, _spec(url))
        assert response.status_code == 422, (url, response.text)
        detail = response.json()["detail"][0]
        assert detail["loc"] == ["body", "models", 0, "base_url"], detail
        assert "AFP_ALLOWED_BASE_URLS" in detail["msg"] or "segments" in detail["msg"], detail
    for model in ("../../other", "x?y=1", "a/./b"):
        response = _post(served, _spec(f"http://127.0.0.1:{port}/allowed/v1", "anthropic", model))
        assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "model", response.text
    assert echo.seen == [], "a refused address was called"
    ok = _post(served, _spec(f"http://127.0.0.1:{port}/allowed/v1/deeper"))
    assert ok.status_code == 201, ok.text
    paths = [s.path for s in echo.seen]  # the preflight, then the embedded worker's calls
    assert paths[0] == "/allowed/v1/deeper/models" and all(p.startswith("/allowed/v1/deeper/") for p in paths)


def test_a_redirect_does_not_take_the_preflight_past_the_allow_list(served, echo):
    """Rule: the preflight follows no redirect (an allowed base could otherwise send it anywhere): a 3xx
    is a 424 naming the redirect, and the redirect's target is never called."""
    echo.seen.clear()
    response = _post(served, _spec(f"http://127.0.0.1:{echo.port}/redirect/v1"))
    assert response.status_code == 424 and "redirect" in response.json()["detail"], response.text
    paths = [s.path for s in echo.seen]  # (an earlier test's sweep may still be calling /allowed/)
    assert "/redirect/v1/models" in paths and not any(p.startswith("/elsewhere") for p in paths), paths


def test_an_api_error_never_contains_the_providers_body(served, echo, tmp_path):
    """Rule: a preflight refusal over the API is the status code and a one-line summary; nothing the
    endpoint wrote (its error body, the models it lists) comes back. The CLI keeps a masked snippet."""
    port = echo.port
    for spec in (_spec(f"http://127.0.0.1:{port}/refuse/v1"), _spec(f"http://127.0.0.1:{port}/list/v1", "openai")):
        response = _post(served, spec)
        assert response.status_code == 424, response.text
        assert CANARY not in response.text and "internal secret page" not in response.text, response.text
        detail = response.json()["detail"]
        assert "\n" not in detail and ("401" in detail or "unknown model" in detail), detail
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(yaml.safe_dump(_spec(f"http://127.0.0.1:{port}/refuse/v1")), encoding="utf-8")
    line = one_line_error(cli(["run", str(spec_file)], tmp_path))
    assert "401" in line and "internal secret page" in line, line


def test_a_malformed_allow_list_stops_serve_and_is_named(tmp_path):
    """Rule: a wrong AFP_ALLOWED_BASE_URLS or AFP_KEY_VARS entry stops `afpbench serve` before it
    listens, with one line naming the setting."""
    for name, value in (("AFP_ALLOWED_BASE_URLS", "ftp://files.example"),
                        ("AFP_ALLOWED_BASE_URLS", "http://h/v1?x="), ("AFP_KEY_VARS", "*")):
        line = one_line_error(cli(["serve", "--port", "1"], tmp_path, env={name: value}))
        assert name in line, line
    with pytest.raises(SettingError, match="AFP_ALLOWED_BASE_URLS"):
        allowed_origins("http://ok/v1,http://user@h/v1", "http://127.0.0.1:8765/v1")
