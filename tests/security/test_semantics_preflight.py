"""The preflight recognises each provider's bad-key and unknown-model answers and a base URL that is not
an API root, before anything is written (docs/SECURITY.md; workers/providers/preflight.py).

Recorded provider bodies (shared/provider-samples) and documented shapes the recordings lack are
served by a stdlib server on loopback; the preflight's requests are checked as the server saw them.
"""

from __future__ import annotations

import logging

import pytest

from afpbench.workers.errors import PreflightError
from afpbench.workers.sweeps.endpoints import preflight_model as preflight
from afpbench.workers.sweeps.spec import ModelSpec
from tests.e2e.test_cli_errors import afpbench, one_line_error, row_count, write_spec
from tests.security.semantics_server import LoopbackProvider, Reply, listing, reply_json, sample

KEY_ENV = "AFP_SEMANTICS_KEY"
KEY = "k-semantics-" + "3b9e1f7a2c4d6e8f0a1b"
# Gemini's documented answer to a bad key (no recording in the samples): 400, not 401.
GEMINI_BAD_KEY = {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                            "message": "API key not valid. Please pass a valid API key.",
                            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                         "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}
ANTHROPIC_MODEL = {"type": "model", "id": "claude-x", "display_name": "Claude X"}
GEMINI_MODEL = {"name": "models/gemini-x", "supportedGenerationMethods": ["generateContent"]}


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def model(provider: str, name: str, base_url: str) -> ModelSpec:
    return ModelSpec(provider=provider, model=name, base_url=base_url, api_key_env=KEY_ENV)


def refusal(spec: ModelSpec) -> str:
    with pytest.raises(PreflightError) as caught:
        preflight(spec)
    line = str(caught.value)
    assert "\n" not in line and line.startswith(f"model {spec.display}")
    assert KEY not in line
    return line


# --- bad keys and unknown models ---------------------------------------------------------------


def test_gemini_bad_key_400_fails_preflight_through_the_cli(tmp_path):
    """Rule: Gemini's bad-key answer (400 INVALID_ARGUMENT, API_KEY_INVALID) stops the run before any row,
    with one line naming the model and the key variable, exit 2.
    Replays: the 400 was let through, only 401/403 counted."""
    routes = {("GET", "/v1beta/models/gemini-x"): reply_json(400, GEMINI_BAD_KEY)}
    with LoopbackProvider(routes) as server:
        spec = write_spec(tmp_path / "s.yaml", judges=[], models=[
            {"provider": "gemini", "model": "gemini-x", "base_url": server.url, "api_key_env": KEY_ENV}])
        proc = afpbench(["run", str(spec)], tmp_path, env={KEY_ENV: KEY})
        line = one_line_error(proc)
        assert server.requests("POST") == [], "no generateContent call after a failed preflight"
    assert proc.returncode == 2
    assert "gemini-x" in line and "the API key was refused" in line and KEY_ENV in line
    assert row_count(tmp_path / "afpbench.db") == 0


@pytest.mark.parametrize("name,expect", [("anthropic-messages-401-1", "the API key was refused"),
                                         ("anthropic-messages-404-1", "unknown model 'claude-x'")])
def test_anthropic_bad_key_and_unknown_model_fail_preflight(name, expect):
    """Rule: Anthropic's recorded 401 authentication_error and 404 not_found_error are each one line."""
    with LoopbackProvider({("GET", "/v1/models/claude-x"): sample(name)}) as server:
        line = refusal(model("anthropic", "claude-x", server.url))
    assert expect in line


# --- OpenAI-compatible listings ----------------------------------------------------------------


def test_openai_compatible_base_url_without_v1_fails_preflight_through_the_cli(tmp_path):
    """Rule: a listing that 404s (base URL without /v1) stops the run before any row, exit 2, naming the
    URL and the fix. Replays: the 404 was ignored, the run started and its cells failed, exit 0."""
    routes = {("GET", "/v1/models"): listing("m-1"), ("POST", "/v1/chat/completions"): listing("m-1")}
    with LoopbackProvider(routes) as server:
        spec = write_spec(tmp_path / "s.yaml", judges=[], models=[
            {"provider": "openai-compatible", "model": "m-1", "base_url": server.url}])
        proc = afpbench(["run", str(spec)], tmp_path)
        line = one_line_error(proc)
        assert [r["path"] for r in server.requests("GET")] == ["/models"]
        assert server.requests("POST") == []
    assert proc.returncode == 2
    assert f"no model listing at {server.url}/models (HTTP 404)" in line and "/v1" in line
    assert row_count(tmp_path / "afpbench.db") == 0


@pytest.mark.parametrize("provider", ["openai-compatible", "vllm", "ollama", "groq", "openrouter"])
def test_a_listing_that_does_not_name_the_model_fails_preflight_for_every_openai_family_provider(provider):
    """Rule: the unknown-model check holds for the whole OpenAI family, not only `openai`; the line names
    the listed ids nearest to the name."""
    with LoopbackProvider({("GET", "/v1/models"): listing("llama-3-8b", "llama-3-70b")}) as server:
        line = refusal(model(provider, "llama-3-8x", f"{server.url}/v1"))
    assert "unknown model 'llama-3-8x'" in line and "llama-3-8b" in line


def test_ollama_default_tag_counts_as_listed():
    with LoopbackProvider({("GET", "/v1/models"): listing("gemma3:latest")}) as server:
        preflight(model("ollama", "gemma3", f"{server.url}/v1"))


def test_a_listing_that_is_not_a_model_list_fails_preflight():
    """Rule (decided): a 200 that is not an OpenAI model list (an HTML page, a JSON without `data`) means
    base_url is not the API root: refused, naming what came back."""
    page = ("<html><body>Open WebUI</body></html>", {"Content-Type": "text/html"})
    with LoopbackProvider({("GET", "/v1/models"): Reply(200, *page)}) as server:
        line = refusal(model("openai-compatible", "m-1", f"{server.url}/v1"))
    assert "did not answer with a model list (HTTP 200, text/html)" in line


def test_an_empty_listing_is_let_through_with_a_warning(caplog):
    """Rule (decided): an empty listing (a local server serving one model under any name) cannot confirm
    the model; the run goes on, and the warning says the name was not checked."""
    with LoopbackProvider({("GET", "/v1/models"): listing()}) as server, caplog.at_level(logging.WARNING):
        preflight(model("openai-compatible", "m-1", f"{server.url}/v1"))
    assert any("lists no models" in r.getMessage() and "m-1" in r.getMessage() for r in caplog.records)


# --- URLs and headers the preflight builds ---------------------------------------------------------


@pytest.mark.parametrize(
    "provider,name,base_path,expected_path",
    [
        ("anthropic", "claude-x", "/v1", "/v1/models/claude-x"),  # not /v1/v1/models/claude-x
        ("anthropic", "claude-x", "", "/v1/models/claude-x"),
        ("gemini", "gemini-x", "/v1beta", "/v1beta/models/gemini-x"),  # not /v1beta/v1beta/...
        ("gemini", "models/gemini-x", "", "/v1beta/models/gemini-x"),  # not /v1beta/models/models/...
        ("openai-compatible", "m-1", "/v1/chat/completions", "/v1/models"),  # not .../chat/completions/models
        ("openai-compatible", "m-1", "/v1/", "/v1/models"),
    ],
)
def test_preflight_probes_the_same_api_root_the_adapter_posts_to(provider, name, base_path, expected_path):
    """Rule: a base_url that already names the API root (or the chat endpoint) is probed once, at the
    listing under that root, and the model passes."""
    answers = {"anthropic": reply_json(200, ANTHROPIC_MODEL), "gemini": reply_json(200, GEMINI_MODEL),
               "openai-compatible": listing("m-1")}
    with LoopbackProvider({("GET", expected_path): answers[provider]}) as server:
        preflight(model(provider, name, server.url + base_path))
        assert [r["path"] for r in server.requests("GET")] == [expected_path]


def test_azure_preflight_sends_the_api_key_header_not_bearer():
    """Rule: Azure's v1 API takes the key in `api-key` (families.py auth_header), also at the preflight;
    its listing names base models, not deployments, so a deployment name is not refused for it."""
    with LoopbackProvider({("GET", "/openai/v1/models"): listing("gpt-4o-2024-11-20")}) as server:
        preflight(model("azure-openai", "my-deployment", f"{server.url}/openai/v1"))
        (seen,) = server.requests("GET")
    assert seen["headers"].get("api-key") == KEY
    assert "authorization" not in seen["headers"]


def test_a_redirect_at_the_listing_is_not_followed():
    """Rule: a redirect is refused, not followed (the key travels in custom headers for some providers)."""
    with LoopbackProvider({("GET", "/v1/models"): Reply(301, "", {"Location": "http://127.0.0.1:9/v1/models"})}) as s:
        line = refusal(model("openai-compatible", "m-1", f"{s.url}/v1"))
        assert len(s.requests("GET")) == 1
    assert "answered 301 (a redirect, not followed)" in line
