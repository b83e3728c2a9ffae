"""Provider outcome classification (the input to result states PROVIDER_BLOCK / INFRA_ERROR vs. a
scored model answer) and request building, checked against recorded third-party provider responses
in shared/provider-samples plus documented shapes the recordings lack."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from afpbench.workers.errors import MissingKey, UnknownProvider
from afpbench.workers.providers.classify import parse_duration, retry_after_from
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.openai_compat import OpenAICompatAdapter
from afpbench.workers.providers.types import ChatRequest, Endpoint, OutcomeClass, key_for
from tests.conftest import REPO

SAMPLES_DIR = Path(
    os.environ.get("AFP_PROVIDER_SAMPLES")
    or REPO.parent / "shared" / "provider-samples"
)
SAMPLES = sorted(SAMPLES_DIR.glob("*.json")) if SAMPLES_DIR.is_dir() else []
SAMPLE_FAMILY = {
    "openai": "openai",
    "azure-openai": "openai",
    "anthropic": "anthropic",
    "google-gemini": "gemini",
}

# Same neutral shape as scoring.render.CALCULATOR_TOOL (kept local so these tests do not depend on the
# fixture schema import chain).
CALCULATOR_TOOL = {
    "name": "calculator",
    "description": "Evaluate an arithmetic expression exactly.",
    "parameters": {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
}

# Where afpbench classes a recording differently from the recorder's label (each sample's notes call
# these judgment calls): waiting will not help a billing 429, and an over-long prompt fails that cell only.
PROJECT_CLASS = {
    "openai-responses-429-insufficient_quota-1": OutcomeClass.quota_exhausted,
    "openai-chat-context_length-1": OutcomeClass.context_too_long,
}


def expected_class(path: Path, sample: dict) -> OutcomeClass:
    return PROJECT_CLASS.get(path.stem) or OutcomeClass(sample["expected_class"])


OPENAI = adapter_for("openai")
ANTHROPIC = adapter_for("anthropic")
GEMINI = adapter_for("gemini")


def family_of(sample_provider: str) -> str:
    if sample_provider.startswith("openai-compatible"):
        return "openai"
    return SAMPLE_FAMILY[sample_provider]


def body_text_of(sample: dict) -> str:
    body = sample["body"]
    return body if isinstance(body, str) else json.dumps(body)


def load_sample(path: Path | None) -> dict:
    if path is None:
        pytest.skip(f"provider samples not found at {SAMPLES_DIR} (set AFP_PROVIDER_SAMPLES to the folder)")
    return json.loads(path.read_text(encoding="utf-8"))


# --- recorded samples ---------------------------------------------------------------------------


@pytest.mark.parametrize("path", SAMPLES or [None], ids=lambda p: p.stem if p else "no-samples")
def test_recorded_sample_classified_as_expected(path):
    """Every recorded response lands in its documented outcome class (what decides whether an
    attempt is scored, rerun as INFRA_ERROR, or recorded as PROVIDER_BLOCK)."""
    sample = load_sample(path)
    OutcomeClass(sample["expected_class"])  # validates the sample's class name
    expected = expected_class(path, sample)
    result = adapter_for(family_of(sample["provider"])).parse(
        sample["status"], sample["headers"], body_text_of(sample)
    )
    assert result.outcome == expected, f"{path.name}: {result.error}"
    assert result.http_status == sample["status"]
    if expected not in (OutcomeClass.answer, OutcomeClass.tool_call, OutcomeClass.truncated):
        assert result.error, "non-answer outcomes carry a one-line error"
        assert "\n" not in result.error and len(result.error) <= 200


@pytest.mark.parametrize("path", SAMPLES or [None], ids=lambda p: p.stem if p else "no-samples")
def test_recorded_sample_served_model_and_usage(path):
    """Run records need the served model version and token counts exactly as the provider sent them."""
    sample = load_sample(path)
    body = sample["body"]
    result = adapter_for(family_of(sample["provider"])).parse(
        sample["status"], sample["headers"], body_text_of(sample)
    )
    if not isinstance(body, dict):
        return
    served = body.get("modelVersion") or body.get("model")
    if served:
        assert result.served_model == served
    usage = body.get("usage") or {}
    meta = body.get("usageMetadata") or {}
    if "prompt_tokens" in usage:
        assert result.usage.input_tokens == usage["prompt_tokens"]
        assert result.usage.output_tokens == usage["completion_tokens"]
        details = usage.get("completion_tokens_details") or {}
        assert result.usage.reasoning_tokens == details.get("reasoning_tokens")
    elif "input_tokens" in usage:
        assert result.usage.input_tokens == usage["input_tokens"]
        assert result.usage.output_tokens == usage["output_tokens"]
        assert result.usage.cached_tokens == usage.get("cache_read_input_tokens")
    elif meta:
        assert result.usage.input_tokens == meta["promptTokenCount"]
        assert result.usage.output_tokens == meta.get("candidatesTokenCount")
        assert result.usage.reasoning_tokens == meta.get("thoughtsTokenCount")


@pytest.mark.parametrize("path", SAMPLES or [None], ids=lambda p: p.stem if p else "no-samples")
def test_recorded_sample_tool_calls_and_kept_headers(path):
    """Tool calls are extracted with JSON-object arguments; stored headers are a credential-free subset."""
    sample = load_sample(path)
    result = adapter_for(family_of(sample["provider"])).parse(
        sample["status"], sample["headers"], body_text_of(sample)
    )
    if result.outcome == OutcomeClass.tool_call:
        assert result.tool_calls
        for call in result.tool_calls:
            assert call.name and call.id
            assert isinstance(call.arguments, dict)
            assert json.loads(call.arguments_raw) == call.arguments
    lowered = {k.lower(): v for k, v in sample["headers"].items()}
    for name in ("retry-after", "x-request-id", "request-id", "x-ratelimit-limit-requests"):
        if name in lowered:
            assert result.headers[name] == lowered[name]
    assert not {"set-cookie", "server", "cf-ray", "connection"} & set(result.headers)
    rid = lowered.get("x-request-id") or lowered.get("request-id") or lowered.get("apim-request-id")
    if rid:
        assert result.request_id == rid


# --- documented shapes the recordings lack --------------------------------------------------------


def test_anthropic_529_overloaded():
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    result = ANTHROPIC.parse(529, {"retry-after": "10"}, json.dumps(body))
    assert result.outcome == OutcomeClass.overloaded
    assert result.retry_after_s == 10.0
    assert result.error == "529 overloaded_error: Overloaded"


def test_anthropic_overloaded_error_type_wins_over_500_status():
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert ANTHROPIC.parse(500, {}, json.dumps(body)).outcome == OutcomeClass.overloaded


def test_anthropic_refusal_stop_reason_is_provider_block():
    """stop_reason=refusal is set by the API's safety classifiers: PROVIDER_BLOCK, not a model answer."""
    body = {
        "model": "claude-x",
        "content": [{"type": "text", "text": "I"}],
        "stop_reason": "refusal",
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    result = ANTHROPIC.parse(200, {}, json.dumps(body))
    assert result.outcome == OutcomeClass.provider_block
    assert result.finish_reason == "refusal"


def test_gemini_prompt_feedback_block_reason_is_provider_block():
    body = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 7},
        "modelVersion": "gemini-2.5-flash",
    }
    result = GEMINI.parse(200, {}, json.dumps(body))
    assert result.outcome == OutcomeClass.provider_block
    assert result.finish_reason == "PROHIBITED_CONTENT"
    assert result.usage.input_tokens == 7


@pytest.mark.parametrize("finish", ["RECITATION", "BLOCKLIST", "SPII", "PROHIBITED_CONTENT"])
def test_gemini_block_finish_reasons(finish):
    body = {"candidates": [{"content": {}, "finishReason": finish}]}
    assert GEMINI.parse(200, {}, json.dumps(body)).outcome == OutcomeClass.provider_block


def test_gemini_unknown_finish_reason_other_is_infra_error():
    body = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": "OTHER"}]}
    assert GEMINI.parse(200, {}, json.dumps(body)).outcome == OutcomeClass.infra_error


def test_openai_200_with_empty_choices_is_infra_error():
    result = OPENAI.parse(200, {}, json.dumps({"id": "x", "model": "m", "choices": []}))
    assert result.outcome == OutcomeClass.infra_error
    assert "no choices" in result.error


def test_gemini_200_with_no_candidates_is_infra_error():
    result = GEMINI.parse(200, {}, json.dumps({"usageMetadata": {"promptTokenCount": 3}}))
    assert result.outcome == OutcomeClass.infra_error


@pytest.mark.parametrize("adapter", [OPENAI, ANTHROPIC, GEMINI], ids=lambda a: a.provider.family)
def test_malformed_json_200_is_infra_error(adapter):
    result = adapter.parse(200, {"content-type": "application/json"}, "<html>bad gateway</html>")
    assert result.outcome == OutcomeClass.infra_error
    assert "malformed JSON" in result.error


@pytest.mark.parametrize("adapter", [OPENAI, ANTHROPIC, GEMINI], ids=lambda a: a.provider.family)
def test_truncated_json_body_is_infra_error(adapter):
    full = json.dumps(
        {"id": "x", "model": "m", "choices": [{"message": {"content": "hello"}}], "content": []}
    )
    result = adapter.parse(200, {}, full[: len(full) // 2])
    assert result.outcome == OutcomeClass.infra_error
    assert "truncated JSON" in result.error


@pytest.mark.parametrize("adapter", [OPENAI, ANTHROPIC, GEMINI], ids=lambda a: a.provider.family)
def test_empty_body_is_infra_error(adapter):
    assert adapter.parse(200, {}, "").outcome == OutcomeClass.infra_error


def test_retry_after_http_date_measured_against_server_date():
    headers = {"Date": "Wed, 21 Oct 2026 07:28:00 GMT", "Retry-After": "Wed, 21 Oct 2026 07:28:30 GMT"}
    body = {"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}
    result = OPENAI.parse(429, headers, json.dumps(body))
    assert result.outcome == OutcomeClass.rate_limited
    assert result.retry_after_s == 30.0


def test_retry_after_ms_preferred_and_reset_durations_only_as_fallback():
    norm = {"retry-after-ms": "1500", "retry-after": "2"}
    assert retry_after_from(norm, OutcomeClass.rate_limited) == 1.5
    resets = {"x-ratelimit-reset-requests": "12ms", "x-ratelimit-reset-tokens": "6m0s"}
    assert retry_after_from(resets, OutcomeClass.rate_limited) == 360.0
    assert retry_after_from(resets, OutcomeClass.answer) is None  # on a 200 a reset is not a retry hint


@pytest.mark.parametrize(
    "text,seconds", [("12ms", 0.012), ("6m0s", 360.0), ("1h2m3.5s", 3723.5), ("0s", 0.0), ("7", None)]
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == (pytest.approx(seconds) if seconds is not None else None)


def test_gemini_retry_info_delay_is_retry_hint():
    body = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "message": "quota",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}],
        }
    }
    result = GEMINI.parse(429, {}, json.dumps(body))
    assert result.outcome == OutcomeClass.rate_limited and result.retry_after_s == 37.0


def test_gemini_503_model_overloaded():
    body = {"error": {"code": 503, "status": "UNAVAILABLE", "message": "The model is overloaded. Try later."}}
    assert GEMINI.parse(503, {}, json.dumps(body)).outcome == OutcomeClass.overloaded


def test_gemini_invalid_key_400_is_auth_error():
    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "API key not valid."}}
    assert GEMINI.parse(400, {}, json.dumps(body)).outcome == OutcomeClass.auth_error


def test_azure_prompt_filter_400_is_provider_block():
    body = {
        "error": {
            "code": "content_filter",
            "message": "The response was filtered",
            "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    assert OPENAI.parse(400, {}, json.dumps(body)).outcome == OutcomeClass.provider_block


def test_openai_refusal_field_is_the_models_answer_not_a_block():
    """A refusal the model wrote is scored (it may be the right behaviour); only provider filters block."""
    body = {
        "model": "m",
        "choices": [
            {"message": {"content": None, "refusal": "I can't help with that."}, "finish_reason": "stop"}
        ],
    }
    result = OPENAI.parse(200, {}, json.dumps(body))
    assert result.outcome == OutcomeClass.answer
    assert result.text == "I can't help with that."


def test_openai_200_with_error_object_is_not_an_answer():
    body = {"error": {"code": 502, "message": "upstream failed"}}
    assert OPENAI.parse(200, {}, json.dumps(body)).outcome == OutcomeClass.infra_error


@pytest.mark.parametrize(
    "status,expected",
    [
        (301, "auth_error"),
        (408, "infra_error"),
        (410, "not_found"),
        (413, "context_too_long"),
        (402, "quota_exhausted"),
        (502, "infra_error"),
        (403, "auth_error"),
    ],
)
def test_status_only_classification(status, expected):
    assert OPENAI.parse(status, {}, "").outcome == OutcomeClass(expected)


def test_tool_call_with_unparseable_arguments_keeps_raw_text():
    body = {
        "model": "m",
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "calculator", "arguments": "{bad"},
                        }
                    ],
                },
            }
        ],
    }
    result = OPENAI.parse(200, {}, json.dumps(body))
    assert result.outcome == OutcomeClass.tool_call
    assert result.tool_calls[0].arguments is None and result.tool_calls[0].arguments_raw == "{bad"


def test_parse_masks_known_key_in_raw_body_and_error():
    key = "sk-test-" + "a1b2c3d4" * 4
    body = {"error": {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}}
    result = OPENAI.parse(401, {"Set-Cookie": "sid=1"}, json.dumps(body), secrets=[key])
    assert key not in result.raw_body and key not in result.error
    assert result.error.startswith("401 invalid_api_key: Incorrect API key provided")


# --- request building ---------------------------------------------------------------------------

CONVERSATION = [
    {"role": "system", "content": "Be exact."},
    {"role": "user", "content": "What is 2+2?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "name": "calculator", "arguments_raw": '{"expression": "2+2"}'}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "4"},
]


def endpoint(provider, monkeypatch, **kw):
    monkeypatch.setenv("AFP_UNIT_KEY", "sk-unit-key-0000000000000000")
    return Endpoint(
        provider=provider,
        model=kw.pop("model", "m-1"),
        base_url=kw.pop("base_url", ""),
        api_key_env="AFP_UNIT_KEY",
        params=kw.pop("params", {}),
        **kw,
    )


def test_openai_build_converts_neutral_messages_and_tools(monkeypatch):
    ep = endpoint(
        "openai",
        monkeypatch,
        base_url="http://h:1/v1",
        params={"temperature": 0, "model": "override-attempt", "reasoning_effort": "low"},
    )
    call = OPENAI.build(ep, ChatRequest(CONVERSATION, [CALCULATOR_TOOL]))
    assert call.url == "http://h:1/v1/chat/completions"
    assert call.headers["Authorization"] == "Bearer sk-unit-key-0000000000000000"
    body = call.json
    assert body["model"] == "m-1" and body["temperature"] == 0
    assert body["messages"][2]["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "calculator", "arguments": '{"expression": "2+2"}'},
        }
    ]
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "4"}
    assert body["tools"] == [{"type": "function", "function": CALCULATOR_TOOL}]
    assert call.reasoning_params == {"reasoning_effort": "low"}
    assert "tools" not in OPENAI.build(ep, ChatRequest(CONVERSATION[:2], [])).json


def test_anthropic_build_system_tool_blocks_and_default_max_tokens(monkeypatch):
    call = ANTHROPIC.build(endpoint("anthropic", monkeypatch), ChatRequest(CONVERSATION, [CALCULATOR_TOOL]))
    assert call.url == "https://api.anthropic.com/v1/messages"
    assert call.headers["x-api-key"] == "sk-unit-key-0000000000000000"
    assert call.headers["anthropic-version"] == "2023-06-01"
    body = call.json
    assert body["system"] == "Be exact." and body["max_tokens"] == 1024
    assert [t["role"] for t in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "calculator", "input": {"expression": "2+2"}}
    ]
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "4"}
    ]
    assert body["tools"][0]["input_schema"] == CALCULATOR_TOOL["parameters"]


def test_gemini_build_key_in_header_never_in_url(monkeypatch):
    ep = endpoint(
        "gemini",
        monkeypatch,
        model="models/gemini-2.5-flash",
        params={"temperature": 0, "max_tokens": 99, "thinkingConfig": {"thinkingBudget": 0}},
    )
    conversation = [dict(m) for m in CONVERSATION]
    conversation[2] = {
        **conversation[2],
        "tool_calls": [{**conversation[2]["tool_calls"][0], "thought_signature": "sig"}],
    }
    call = GEMINI.build(ep, ChatRequest(conversation, [CALCULATOR_TOOL]))
    assert (
        call.url == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert "sk-unit-key" not in call.url and call.headers["x-goog-api-key"] == "sk-unit-key-0000000000000000"
    body = call.json
    assert body["systemInstruction"] == {"parts": [{"text": "Be exact."}]}
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][1]["parts"] == [
        {"functionCall": {"name": "calculator", "args": {"expression": "2+2"}}, "thoughtSignature": "sig"}
    ]
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "calculator", "response": {"result": "4"}}}
    ]
    assert body["generationConfig"] == {
        "temperature": 0,
        "maxOutputTokens": 99,
        "thinkingConfig": {"thinkingBudget": 0},
    }
    assert call.reasoning_params == {"thinkingConfig": {"thinkingBudget": 0}}
    assert body["tools"] == [{"functionDeclarations": [CALCULATOR_TOOL]}]


# --- registry -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["openai", "openai-compatible", "vllm", "ollama", "sim", "OpenAI"])
def test_openai_compatible_names(name):
    """These names speak Chat Completions (the simulator's adapter differs only at the preflight)."""
    assert isinstance(adapter_for(name), OpenAICompatAdapter)
    assert adapter_for(name).provider.name == name.lower()


def test_unknown_provider_names_the_known_ones():
    with pytest.raises(UnknownProvider, match=r"unknown provider 'bogus'; known: .*anthropic.*gemini"):
        adapter_for("bogus")


def test_missing_key_names_variable_not_value(monkeypatch):
    monkeypatch.delenv("AFP_ABSENT_KEY", raising=False)
    ep = Endpoint("openai", "m", "http://h/v1", "AFP_ABSENT_KEY", {})
    with pytest.raises(MissingKey, match="AFP_ABSENT_KEY"):
        key_for(ep)
    result = OPENAI.call(ep, ChatRequest([{"role": "user", "content": "hi"}], []))
    assert result.outcome == OutcomeClass.auth_error and "AFP_ABSENT_KEY" in result.error
    assert key_for(Endpoint("ollama", "m", "http://h/v1", None, {})) is None


# --- provider semantics: quota, over-long prompts, retry advice (documented shapes) ---------------


@pytest.mark.parametrize(
    "adapter,status,body",
    [
        pytest.param(OPENAI, 429, {"error": {"type": "insufficient_quota", "code": None,
                                             "message": "You exceeded your current quota."}}, id="openai-type-only"),
        pytest.param(OPENAI, 429, {"error": {"code": "rate_limit_exceeded", "type": "requests", "message":
                     "Rate limit reached for gpt-4 on requests per day (RPD): Limit 10000, Used 10000."}},
                     id="openai-per-day"),
        pytest.param(OPENAI, 402, {"error": {"code": 402, "message": "Insufficient credits."}}, id="openrouter-402"),
        pytest.param(ANTHROPIC, 400, {"type": "error", "error": {"type": "invalid_request_error", "message":
                     "Your credit balance is too low to access the Anthropic API."}}, id="anthropic-credit"),
        pytest.param(ANTHROPIC, 402, {"type": "error", "error": {"type": "billing_error", "message": "billing"}},
                     id="anthropic-billing-error"),
        pytest.param(ANTHROPIC, 400, {"type": "error", "error": {"type": "invalid_request_error", "message":
                     "You have reached your specified API usage limits. You will regain access on 2026-01-01."}},
                     id="anthropic-usage-limits"),
        pytest.param(GEMINI, 429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message":
                     "You exceeded your current quota, please check your plan and billing details.",
                     "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                         {"quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}]}]}}, id="gemini-per-day"),
        pytest.param(GEMINI, 429, {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message":
                     "Quota exceeded for metric: generate_content_free_tier_requests, limit: 0"}}, id="gemini-limit-0"),
    ],
)
def test_billing_or_quota_answers_are_quota_exhausted(adapter, status, body):
    """Rule: billing/quota refusals stop the model (waiting will not help); the error line says so."""
    result = adapter.parse(status, {}, json.dumps(body))
    assert result.outcome == OutcomeClass.quota_exhausted, result.error
    assert "waiting will not help" in result.error or status == 402


def test_a_per_minute_gemini_quota_with_billing_wording_is_a_rate_limit():
    """Rule: Gemini words per-minute limits like billing ones; its QuotaFailure details decide."""
    body = {"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message":
            "You exceeded your current quota, please check your plan and billing details.",
            "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                {"quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}
    result = GEMINI.parse(429, {}, json.dumps(body))
    assert result.outcome == OutcomeClass.rate_limited and result.retry_after_s == 37.0


@pytest.mark.parametrize(
    "adapter,status,body",
    [
        pytest.param(OPENAI, 400, {"object": "error", "type": "BadRequestError", "code": 400, "message":
                     "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."},
                     id="vllm-top-level-message"),
        pytest.param(OPENAI, 400, {"error": {"code": 400, "type": "exceed_context_size_error",
                     "message": "the request exceeds the available context size"}}, id="llama-cpp"),
        pytest.param(OPENAI, 413, {"error": {"code": "rate_limit_exceeded", "type": "tokens",
                     "message": "Request too large for model on tokens per minute (TPM)"}}, id="groq-413"),
        pytest.param(ANTHROPIC, 400, {"type": "error", "error": {"type": "invalid_request_error",
                     "message": "prompt is too long: 212000 tokens > 200000 maximum"}}, id="anthropic-prompt-long"),
        pytest.param(ANTHROPIC, 413, {"type": "error", "error": {"type": "request_too_large",
                     "message": "Request exceeds the maximum allowed number of bytes."}}, id="anthropic-413"),
        pytest.param(GEMINI, 400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message":
                     "The input token count (1300000) exceeds the maximum number of tokens allowed (1048576)."}},
                     id="gemini-input-tokens"),
    ],
)
def test_over_long_prompts_are_context_too_long(adapter, status, body):
    """Rule: a prompt that does not fit fails that cell only (context_too_long), it does not stop the model."""
    assert adapter.parse(status, {}, json.dumps(body)).outcome == OutcomeClass.context_too_long


def test_a_429_advising_a_shorter_prompt_is_still_a_rate_limit():
    """Anthropic's 429 says "reduce the prompt length ... or try again later": a rate, not a context error."""
    body = {"type": "error", "error": {"type": "rate_limit_error", "message":
            "Please reduce the prompt length or the maximum tokens requested, or try again later."}}
    assert ANTHROPIC.parse(429, {"retry-after": "3"}, json.dumps(body)).outcome == OutcomeClass.rate_limited


def test_gemini_api_key_invalid_detail_is_auth_error():
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
    body = {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "API key not valid.", "details": [info]}}
    assert GEMINI.parse(400, {}, json.dumps(body)).outcome == OutcomeClass.auth_error


@pytest.mark.parametrize("value,expected", [("false", False), ("true", True), ("TRUE", True), ("maybe", None)])
def test_x_should_retry_header_is_read_into_should_retry(value, expected):
    """Rule: the provider's own retry advice (Anthropic `x-should-retry`) reaches the retry policy."""
    body = {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
    assert ANTHROPIC.parse(500, {"X-Should-Retry": value}, json.dumps(body)).should_retry is expected
    assert ANTHROPIC.parse(500, {}, json.dumps(body)).should_retry is None


@pytest.mark.parametrize(
    "provider,base_url,model,url",
    [
        ("anthropic", "https://api.anthropic.com/v1/", "claude-x", "https://api.anthropic.com/v1/messages"),
        ("gemini", "https://generativelanguage.googleapis.com/v1beta", "models/gemini-x",
         "https://generativelanguage.googleapis.com/v1beta/models/gemini-x:generateContent"),
        ("openai", "http://h/v1/chat/completions", "m", "http://h/v1/chat/completions"),
    ],
)
def test_build_accepts_a_base_url_that_already_names_the_api_root(monkeypatch, provider, base_url, model, url):
    monkeypatch.setenv("AFP_T_KEY", "k" * 20)
    prepared = adapter_for(provider).build(Endpoint(provider, model, base_url, "AFP_T_KEY"), ChatRequest([]))
    assert prepared.url == url
