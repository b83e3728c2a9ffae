"""Anthropic Messages API: POST {base}/v1/messages with x-api-key and anthropic-version.

System text goes to the top-level `system`; tool calls and results travel as tool_use /
tool_result content blocks; consecutive same-role turns are merged (tool results for one assistant
turn must share a single user message). The preflight asks GET {base}/v1/models/{model}. Usage:
input_tokens exclude the cache reads; thinking is not reported apart from output_tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from afpbench.workers.providers.anthropic_batch import AnthropicBatch
from afpbench.workers.providers.base import Adapter
from afpbench.workers.providers.classify import (
    assemble,
    body_snippet,
    error_line,
    int_or_none,
    load_json,
    normalize_headers,
    status_class,
)
from afpbench.workers.providers.semantics import is_billing_message, is_context_error
from afpbench.workers.providers.structured import schema_for, sent_params, structured_mode
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

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024
_RESERVED = frozenset({"model", "messages", "system", "tools", "stream"})
_ANSWER_STOPS = frozenset({"end_turn", "stop_sequence", "pause_turn"})
_TRUNCATED_STOPS = frozenset({"max_tokens", "model_context_window_exceeded"})
# Error `type` values that decide the class even when the HTTP status is unusual.
_TYPE_CLASS = {
    "overloaded_error": OutcomeClass.overloaded,
    "rate_limit_error": OutcomeClass.rate_limited,
    "authentication_error": OutcomeClass.auth_error,
    "permission_error": OutcomeClass.auth_error,
    "not_found_error": OutcomeClass.not_found,
    "api_error": OutcomeClass.infra_error,
}


def _tool_input(call: dict) -> dict:
    try:
        parsed = json.loads(call.get("arguments_raw") or "{}")
    except json.JSONDecodeError:
        parsed = None
    # tool_use.input must be an object; keep unparseable arguments visible rather than dropping them.
    return parsed if isinstance(parsed, dict) else {"_raw_arguments": call.get("arguments_raw")}


def _blocks(msg: dict) -> list[dict]:
    role = msg["role"]
    if role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": msg.get("tool_call_id", ""),
                "content": msg.get("content") or "",
            }
        ]
    blocks: list[dict] = []
    if msg.get("content"):
        blocks.append({"type": "text", "text": msg["content"]})
    if role == "assistant":
        for call in msg.get("tool_calls") or []:
            blocks.append(
                {"type": "tool_use", "id": call["id"], "name": call["name"], "input": _tool_input(call)}
            )
    return blocks


def to_anthropic_messages(messages: list[dict]) -> tuple[str | None, list[dict]]:
    system_parts = [m.get("content") or "" for m in messages if m["role"] == "system"]
    turns: list[dict] = []
    for msg in messages:
        if msg["role"] == "system":
            continue
        role = "assistant" if msg["role"] == "assistant" else "user"
        blocks = _blocks(msg)
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return ("\n\n".join(system_parts) if system_parts else None), turns


def _thinking_on(params: Mapping[str, Any]) -> bool:
    thinking = params.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") not in (None, "disabled")


def _usage(body: dict) -> Usage:
    raw = body.get("usage") or {}
    return Usage(
        input_tokens=int_or_none(raw.get("input_tokens")),
        output_tokens=int_or_none(raw.get("output_tokens")),
        cached_tokens=int_or_none(raw.get("cache_read_input_tokens")),
        reasoning_tokens=None,  # Anthropic does not report thinking tokens separately
    )


class AnthropicAdapter(Adapter, AnthropicBatch):  # the batch API where the provider row offers it
    # No reasoning count is reported (reasoning_tokens None), so there is nothing to take out of output.
    usage_counting = UsageCounting(cached_inside_input=False, reasoning_inside_output=False)

    def api_root(self, endpoint: Endpoint) -> str:
        """The versioned root (/v1) under which /messages and /models live; base_url may or may not name it."""
        base = self.base_url(endpoint)
        return base if base.endswith("/v1") else base + "/v1"

    def auth_headers(self, key: str) -> dict[str, str]:
        return {"x-api-key": key}

    def version_headers(self) -> dict[str, str]:
        return {"anthropic-version": API_VERSION}

    def probe(self, endpoint: Endpoint) -> ProbeRequest:
        key = key_for(endpoint)
        headers = {**self.auth_headers(key), "anthropic-version": API_VERSION} if key else {}
        return ProbeRequest(f"{self.api_root(endpoint)}/models/{endpoint.model}", headers)

    def read_probe(self, endpoint: Endpoint, answer: ProbeAnswer) -> ProbeFinding | None:
        # The probe names the model: a 404 is about the model, and a 2xx confirms it.
        return ProbeFinding(ProbeKind.unknown_model) if answer.status == 404 else None

    def build(self, endpoint: Endpoint, request: ChatRequest) -> PreparedCall:
        key = key_for(endpoint)
        url = self.api_root(endpoint) + "/messages"
        headers = {
            "Content-Type": "application/json",
            "anthropic-version": API_VERSION,
            **request.extra_headers,
        }
        if key is not None:
            headers.update(self.auth_headers(key))
        body: dict[str, Any] = {k: v for k, v in sent_params(endpoint.params).items() if k not in _RESERVED}
        body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        body["model"] = endpoint.model
        system, turns = to_anthropic_messages(request.messages)
        if system is not None:
            body["system"] = system
        body["messages"] = turns
        tools = [
            {"name": t["name"], "description": t.get("description", ""), "input_schema": t["parameters"]}
            for t in request.tools
        ]
        wanted = request.response_schema
        mode = structured_mode(endpoint, self.provider.structured_output) if wanted else "off"
        # Extended thinking refuses a forced tool_choice: with thinking on, the prompt contract stays.
        if wanted and mode != "off" and not _thinking_on(endpoint.params):
            description = wanted.description or "Record the answer in the required shape."
            tools.append({"name": wanted.name, "description": description,
                          "input_schema": schema_for(mode, wanted.schema)})
            body["tool_choice"] = {"type": "tool", "name": wanted.name}
        if tools:
            body["tools"] = tools
        reasoning = {k: endpoint.params[k] for k in ("thinking",) if k in endpoint.params}
        return PreparedCall("POST", url, headers, body, reasoning)

    def parse(
        self, status: int, headers: Mapping[str, Any], body_text: str, *, secrets: Iterable[str] = ()
    ) -> AdapterResult:
        norm = normalize_headers(headers)
        body, bad = load_json(body_text)
        is_error = isinstance(body, dict) and (
            body.get("type") == "error" or isinstance(body.get("error"), dict)
        )
        if status >= 300 or is_error:
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
        fields: dict[str, Any] = dict(served_model=body.get("model"), usage=_usage(body), request_id=body.get("id"))
        content = body.get("content")
        stop = body.get("stop_reason")
        if not isinstance(content, list) or (not content and stop not in _ANSWER_STOPS | {"refusal"}):
            return assemble(
                OutcomeClass.infra_error,
                status,
                norm,
                body_text,
                secrets,
                finish_reason=stop,
                error=error_line(status, stop, "200 with no content", secrets),
                **fields,
            )
        texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        calls = [
            ToolCall(
                id=b.get("id", ""),
                name=b.get("name", ""),
                arguments=b.get("input") if isinstance(b.get("input"), dict) else None,
                arguments_raw=json.dumps(b.get("input", {}), ensure_ascii=False),
            )
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_use"
        ]
        text = "".join(texts) if texts else None
        error = None
        if stop == "refusal":
            # Set by the API's safety classifiers, not a refusal the model wrote.
            outcome, error = (
                OutcomeClass.provider_block,
                error_line(status, stop, "stopped by provider safety filter"),
            )
        elif stop in _TRUNCATED_STOPS:
            outcome = OutcomeClass.truncated
        elif calls:  # stop_reason tool_use without a tool_use block is scored as text
            outcome = OutcomeClass.tool_call
        elif stop in _ANSWER_STOPS or stop in (None, "tool_use"):
            outcome, text = OutcomeClass.answer, text or ""
        else:
            outcome, error = (
                OutcomeClass.infra_error,
                error_line(status, stop, "unknown stop_reason", secrets),
            )
        return assemble(
            outcome,
            status,
            norm,
            body_text,
            secrets,
            text=text,
            tool_calls=calls,
            finish_reason=stop,
            error=error,
            **fields,
        )

    def _error(
        self, status: int, norm: dict, body_text: str, body: Any, secrets: Iterable[str]
    ) -> AdapterResult:
        secrets = list(secrets)  # used twice below (snippet, assemble): an iterator would run dry
        err = body.get("error") if isinstance(body, dict) else None
        err_type = err.get("type") if isinstance(err, dict) else None
        snippet = body_snippet(body_text, secrets=secrets) if body_text else None
        message = err.get("message") if isinstance(err, dict) else snippet
        outcome = _TYPE_CLASS.get(err_type or "") if (status < 300 or err_type == "overloaded_error") else None
        outcome = outcome or status_class(status) or OutcomeClass.infra_error
        if err_type == "billing_error" or (
            err_type in ("invalid_request_error", "permission_error") and is_billing_message(message)
        ):
            # "Your credit balance is too low", "You have reached your specified API usage limits":
            # a 400 or 403 today, but waiting will not help.
            outcome = OutcomeClass.quota_exhausted
            message = f"quota exhausted, waiting will not help: {message or ''}"
        elif is_context_error(status, err_type, message):
            outcome = OutcomeClass.context_too_long  # "prompt is too long: 212000 tokens > 200000 maximum"
        return assemble(
            outcome,
            status,
            norm,
            body_text,
            secrets,
            request_id=body.get("request_id") if isinstance(body, dict) else None,
            error=error_line(status, err_type, message, secrets),
        )
