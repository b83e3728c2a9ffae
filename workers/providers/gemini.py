"""Google Gemini generateContent: POST {base}/v1beta/models/{model}:generateContent.

The key travels in the x-goog-api-key header, never in the URL, so it cannot leak into the stored
request. Tool calls are detected from functionCall parts: Gemini reports finishReason STOP for them.
The conversation and params as Gemini takes them: gemini_request.py. The preflight asks
GET {base}/v1beta/models/{model}; a bad key is a 400 INVALID_ARGUMENT (reason API_KEY_INVALID), not a 401.
Usage: promptTokenCount includes the cached tokens; thoughtsTokenCount is beside candidatesTokenCount.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from afpbench.workers.providers.base import Adapter
from afpbench.workers.providers.classify import (
    assemble,
    body_snippet,
    error_line,
    int_or_none,
    load_json,
    normalize_headers,
    parse_duration,
    status_class,
)
from afpbench.workers.providers.gemini_batch import GeminiBatch
from afpbench.workers.providers.gemini_request import split_params, to_gemini_contents
from afpbench.workers.providers.semantics import gemini_quota_exhausted, is_context_error
from afpbench.workers.providers.structured import gemini_schema, schema_for, sent_params, structured_mode
from afpbench.workers.providers.types import (
    AdapterResult,
    ChatRequest,
    Endpoint,
    OutcomeClass,
    PreparedCall,
    ProbeAnswer,
    ProbeFinding,
    ProbeKind,
    ProbeRequest,
    ToolCall,
    Usage,
    UsageCounting,
    key_for,
)

_BLOCK_FINISH = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "LANGUAGE",
    }
)
_ANSWER_FINISH = frozenset({"STOP", "MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", None})


_VERSIONED = re.compile(r"/v1(alpha|beta)?$")


def model_id(model: str) -> str:
    """The model's id in a URL: Gemini's listing names models `models/x`, the URL wants `x`."""
    return model.removeprefix("models/")


def _usage(body: dict) -> Usage:
    raw = body.get("usageMetadata") or {}
    return Usage(
        input_tokens=int_or_none(raw.get("promptTokenCount")),
        output_tokens=int_or_none(raw.get("candidatesTokenCount")),
        cached_tokens=int_or_none(raw.get("cachedContentTokenCount")),
        reasoning_tokens=int_or_none(raw.get("thoughtsTokenCount")),
    )


def _retry_delay(err: dict) -> float | None:
    """google.rpc.RetryInfo.retryDelay ('37s') from error.details, if any."""
    for detail in err.get("details") or []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            return parse_duration(str(detail.get("retryDelay", "")))
    return None


def _error_reason(err: dict) -> str | None:
    """google.rpc.ErrorInfo.reason (e.g. API_KEY_INVALID) from error.details, if any."""
    for detail in err.get("details") or []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("ErrorInfo"):
            return str(detail.get("reason") or "") or None
    return None


class GeminiAdapter(Adapter, GeminiBatch):  # the batch API where the provider row offers it
    usage_counting = UsageCounting(cached_inside_input=True, reasoning_inside_output=False)

    def api_root(self, endpoint: Endpoint) -> str:
        """The versioned root (default /v1beta) under which /models/{model} lives; base_url may name it."""
        base = self.base_url(endpoint)
        return base if _VERSIONED.search(base) else base + "/v1beta"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-goog-api-key": key}

    def probe(self, endpoint: Endpoint) -> ProbeRequest:
        key = key_for(endpoint)
        url = f"{self.api_root(endpoint)}/models/{model_id(endpoint.model)}"
        return ProbeRequest(url, self.auth_headers(key) if key else {})

    def read_probe(self, endpoint: Endpoint, answer: ProbeAnswer) -> ProbeFinding | None:
        if answer.status == 400 and "API_KEY_INVALID" in answer.body_text:
            return ProbeFinding(ProbeKind.key_refused)
        # The probe names the model: a 404 is about the model, and a 2xx confirms it.
        return ProbeFinding(ProbeKind.unknown_model) if answer.status == 404 else None

    def build(self, endpoint: Endpoint, request: ChatRequest) -> PreparedCall:
        key = key_for(endpoint)
        url = f"{self.api_root(endpoint)}/models/{model_id(endpoint.model)}:generateContent"
        headers = {"Content-Type": "application/json", **request.extra_headers}
        if key is not None:
            headers.update(self.auth_headers(key))
        top, gen = split_params(sent_params(endpoint.params))
        instruction, contents = to_gemini_contents(request.messages)
        body: dict[str, Any] = {"contents": contents, **top}
        if instruction:
            body["systemInstruction"] = instruction
        if request.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": t["name"],
                            "description": t.get("description", ""),
                            "parameters": t["parameters"],
                        }
                        for t in request.tools
                    ]
                }
            ]
        wanted = request.response_schema
        mode = structured_mode(endpoint, self.provider.structured_output) if wanted else "off"
        if wanted and mode != "off":
            gen["responseMimeType"] = "application/json"
            gen["responseSchema"] = gemini_schema(schema_for(mode, wanted.schema))
        if gen:
            body["generationConfig"] = gen
        reasoning = {"thinkingConfig": gen["thinkingConfig"]} if "thinkingConfig" in gen else {}
        return PreparedCall("POST", url, headers, body, reasoning)

    def parse(
        self, status: int, headers: Mapping[str, Any], body_text: str, *, secrets: Iterable[str] = ()
    ) -> AdapterResult:
        norm = normalize_headers(headers)
        body, bad = load_json(body_text)
        if status >= 300 or (isinstance(body, dict) and isinstance(body.get("error"), dict)):
            return self._error(status, norm, body_text, body, secrets)
        if bad or not isinstance(body, dict):
            return assemble(
                OutcomeClass.infra_error,
                status,
                norm,
                body_text,
                secrets,
                error=error_line(status, None, bad or "JSON body is not an object", secrets),
            )
        fields: dict[str, Any] = dict(
            served_model=body.get("modelVersion"), usage=_usage(body), request_id=body.get("responseId")
        )
        block = (body.get("promptFeedback") or {}).get("blockReason")
        if block:
            return assemble(
                OutcomeClass.provider_block,
                status,
                norm,
                body_text,
                secrets,
                finish_reason=block,
                error=error_line(status, block, "prompt blocked"),
                **fields,
            )
        candidates = body.get("candidates") or []
        if not candidates or not isinstance(candidates[0], dict):
            return assemble(
                OutcomeClass.infra_error,
                status,
                norm,
                body_text,
                secrets,
                error=error_line(status, None, "200 with no candidates", secrets),
                **fields,
            )
        cand = candidates[0]
        finish = cand.get("finishReason")
        parts = (cand.get("content") or {}).get("parts") or []
        texts = [p["text"] for p in parts if isinstance(p, dict) and "text" in p and not p.get("thought")]
        calls = [
            ToolCall(
                id=fc.get("id") or f"call_{i}",
                name=fc.get("name", ""),
                arguments=fc.get("args") if isinstance(fc.get("args"), dict) else None,
                arguments_raw=json.dumps(fc.get("args", {}), ensure_ascii=False),
                thought_signature=p.get("thoughtSignature"),
            )
            for i, p in enumerate(parts)
            if isinstance(p, dict)
            for fc in [p.get("functionCall")]
            if isinstance(fc, dict)
        ]
        text = "".join(texts) if texts else None
        error = None
        if finish in _BLOCK_FINISH:
            outcome, error = (
                OutcomeClass.provider_block,
                error_line(status, finish, cand.get("finishMessage")),
            )
        elif finish == "MAX_TOKENS":
            outcome = OutcomeClass.truncated
        elif calls:
            outcome = OutcomeClass.tool_call
        elif finish in _ANSWER_FINISH:
            # MALFORMED_FUNCTION_CALL is the model's own failure: scored, not rerun.
            outcome, text = OutcomeClass.answer, text or ""
        else:  # OTHER, FINISH_REASON_UNSPECIFIED, future values: cause unknown, rerun
            outcome, error = (
                OutcomeClass.infra_error,
                error_line(status, finish, cand.get("finishMessage"), secrets),
            )
        return assemble(
            outcome,
            status,
            norm,
            body_text,
            secrets,
            text=text,
            tool_calls=calls,
            finish_reason=finish,
            error=error,
            **fields,
        )

    def _error(
        self, status: int, norm: dict, body_text: str, body: Any, secrets: Iterable[str]
    ) -> AdapterResult:
        secrets = list(secrets)  # used twice below (snippet, assemble): an iterator would run dry
        err = body.get("error") if isinstance(body, dict) else None
        err = err if isinstance(err, dict) else {}
        code = err.get("status")  # e.g. RESOURCE_EXHAUSTED; err["code"] only repeats the HTTP status
        message = err.get("message") if err else (body_snippet(body_text, secrets=secrets) if body_text else None)
        effective = status if status >= 300 else int_or_none(err.get("code")) or 502
        outcome = status_class(effective) or OutcomeClass.infra_error
        if effective == 503 and "overloaded" in str(message).lower():
            outcome = OutcomeClass.overloaded
        elif code == "RESOURCE_EXHAUSTED" and gemini_quota_exhausted(err):
            outcome = OutcomeClass.quota_exhausted
            message = f"quota exhausted, waiting will not help: {message or ''}"
        elif _error_reason(err) == "API_KEY_INVALID":
            outcome = OutcomeClass.auth_error  # Gemini answers a bad key with 400 INVALID_ARGUMENT, not 401
        elif is_context_error(effective, code, message):
            outcome = OutcomeClass.context_too_long  # "The input token count (N) exceeds the maximum ..."
        return assemble(
            outcome,
            status,
            norm,
            body_text,
            secrets,
            retry_hint=_retry_delay(err),
            error=error_line(status, code, message, secrets),
        )
