"""OpenAI Chat Completions and compatible servers (vLLM, Ollama, Groq, Azure v1, the simulator).

POST {base_url}/chat/completions with Bearer auth (Azure: `api-key`). Classification keys on
`finish_reason`, tool calls and Azure filter results, never on the mere presence of filter blocks.
The preflight reads GET {base_url}/models (openai_listing.py). Usage: prompt_tokens include the cached
tokens, completion_tokens the reasoning tokens.
"""

from __future__ import annotations

import json
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
    status_class,
    tool_call_from_raw,
)
from afpbench.workers.providers.openai_batch import OpenAIBatch
from afpbench.workers.providers.openai_listing import listing_finding
from afpbench.workers.providers.semantics import is_context_error, is_quota_error
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

# Body keys the adapter owns; endpoint params cannot override them.
_RESERVED = frozenset({"model", "messages", "tools", "stream"})
_REASONING_KEYS = ("reasoning_effort", "reasoning", "thinking", "enable_thinking")
# Error codes that mean the provider refused to serve the content (Azure prompt filter, OpenAI
# prompt flagged by its safety system).
_BLOCK_CODES = frozenset({"content_filter", "content_policy_violation", "invalid_prompt"})
_NOT_FOUND_CODES = frozenset({"model_not_found"})


def _message_to_openai(msg: dict) -> dict:
    role = msg["role"]
    if role == "tool":
        return {
            "role": "tool",
            "tool_call_id": msg.get("tool_call_id", ""),
            "content": msg.get("content") or "",
        }
    out: dict[str, Any] = {"role": role, "content": msg.get("content")}
    calls = msg.get("tool_calls") or []
    if role == "assistant" and calls:
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c.get("arguments_raw") or "{}"},
            }
            for c in calls
        ]
    elif out["content"] is None:
        out["content"] = ""
    return out


def _reasoning_params(params: Mapping[str, Any]) -> dict:
    picked = {k: params[k] for k in _REASONING_KEYS if k in params}
    template = params.get("chat_template_kwargs")
    if isinstance(template, dict) and any("think" in k for k in template):
        picked["chat_template_kwargs"] = template
    return picked


def _content_text(content: Any) -> str | None:
    """Message content as text; some compatible servers send a list of typed parts."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def _filtered(results: Any) -> bool:
    """True when any Azure filter category reports filtered=true."""
    if not isinstance(results, dict):
        return False
    return any(isinstance(v, dict) and v.get("filtered") is True for v in results.values())


def _tool_calls(message: dict) -> list[ToolCall]:
    calls = []
    for i, raw in enumerate(message.get("tool_calls") or []):
        fn = raw.get("function") or {}
        args = fn.get("arguments")
        args_raw = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
        calls.append(tool_call_from_raw(raw.get("id") or f"call_{i}", fn.get("name", ""), args_raw))
    legacy = message.get("function_call")
    if not calls and isinstance(legacy, dict) and legacy.get("name"):
        calls.append(tool_call_from_raw("call_0", legacy["name"], legacy.get("arguments") or ""))
    return calls


def _usage(body: dict) -> Usage:
    raw = body.get("usage") or {}
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    return Usage(
        input_tokens=int_or_none(raw.get("prompt_tokens")),
        output_tokens=int_or_none(raw.get("completion_tokens")),
        cached_tokens=int_or_none(prompt_details.get("cached_tokens")),
        reasoning_tokens=int_or_none(completion_details.get("reasoning_tokens")),
    )


class OpenAICompatAdapter(Adapter, OpenAIBatch):  # the batch API where the provider row offers it
    usage_counting = UsageCounting(cached_inside_input=True, reasoning_inside_output=True)

    def api_root(self, endpoint: Endpoint) -> str:
        """Where /chat/completions and /models live; a base_url naming the chat endpoint itself is accepted."""
        return self.base_url(endpoint).removesuffix("/chat/completions")

    def auth_headers(self, key: str) -> dict[str, str]:
        """Bearer auth, or the key alone in a provider's own header (Azure's `api-key`, families.py)."""
        name = self.provider.auth_header
        return {name: f"Bearer {key}" if name == "Authorization" else key}

    def probe(self, endpoint: Endpoint) -> ProbeRequest:
        key = key_for(endpoint)
        return ProbeRequest(f"{self.api_root(endpoint)}/models", self.auth_headers(key) if key else {})

    def read_probe(self, endpoint: Endpoint, answer: ProbeAnswer) -> ProbeFinding | None:
        if answer.status == 404:
            return ProbeFinding(ProbeKind.no_listing)
        if answer.status >= 300:
            return None
        return listing_finding(endpoint.model, answer.body_text, names_models=self.provider.lists_models)

    def build(self, endpoint: Endpoint, request: ChatRequest) -> PreparedCall:
        key = key_for(endpoint)
        url = self.api_root(endpoint) + "/chat/completions"
        headers = {"Content-Type": "application/json", **request.extra_headers}
        if key is not None:
            headers.update(self.auth_headers(key))
        body: dict[str, Any] = {k: v for k, v in sent_params(endpoint.params).items() if k not in _RESERVED}
        body["model"] = endpoint.model
        body["messages"] = [_message_to_openai(m) for m in request.messages]
        if request.tools:
            body["tools"] = [{"type": "function", "function": dict(t)} for t in request.tools]
        wanted = request.response_schema
        mode = structured_mode(endpoint, self.provider.structured_output) if wanted else "off"
        if wanted and mode != "off":
            spec: dict[str, Any] = {"name": wanted.name, "strict": True, "schema": schema_for(mode, wanted.schema)}
            if wanted.description:
                spec["description"] = wanted.description
            body["response_format"] = {"type": "json_schema", "json_schema": spec}
        return PreparedCall("POST", url, headers, body, _reasoning_params(endpoint.params))

    def parse(
        self, status: int, headers: Mapping[str, Any], body_text: str, *, secrets: Iterable[str] = ()
    ) -> AdapterResult:
        norm = normalize_headers(headers)
        body, bad = load_json(body_text)
        err = body.get("error") if isinstance(body, dict) else None
        if status >= 300 or isinstance(err, dict | str):
            return self._error(status, norm, body_text, body, secrets)
        if bad or not isinstance(body, dict):
            reason = bad or "JSON body is not an object"
            return assemble(
                OutcomeClass.infra_error,
                status,
                norm,
                body_text,
                secrets,
                error=error_line(status, None, reason, secrets),
            )
        fields: dict[str, Any] = dict(served_model=body.get("model"), usage=_usage(body), request_id=body.get("id"))
        prompt_blocked = any(
            _filtered(p.get("content_filter_results"))
            for p in body.get("prompt_filter_results") or []
            if isinstance(p, dict)
        )
        choices = body.get("choices") or []
        if not choices:
            if prompt_blocked:
                return assemble(
                    OutcomeClass.provider_block,
                    status,
                    norm,
                    body_text,
                    secrets,
                    error=error_line(status, "prompt_filtered", "prompt blocked by content filter"),
                    **fields,
                )
            return assemble(
                OutcomeClass.infra_error,
                status,
                norm,
                body_text,
                secrets,
                error=error_line(status, None, "200 with no choices", secrets),
                **fields,
            )
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message") or {}
        finish = choice.get("finish_reason")
        text = _content_text(message.get("content"))
        if text is None and isinstance(message.get("refusal"), str):
            # A structured-output refusal is the model's own answer, not a provider block.
            text = message["refusal"]
        calls = _tool_calls(message)
        if finish == "content_filter" or prompt_blocked or _filtered(choice.get("content_filter_results")):
            outcome, error = (
                OutcomeClass.provider_block,
                error_line(status, finish, "output blocked by content filter"),
            )
        elif finish == "length":
            outcome, error = OutcomeClass.truncated, None
        elif calls:  # finish_reason alone is not enough: the loop needs calls to run
            outcome, error = OutcomeClass.tool_call, None
        else:
            outcome, error = OutcomeClass.answer, None
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
        code = message = None
        if isinstance(err, dict):
            code = err.get("code") or err.get("type")
            message = err.get("message")
            inner = err.get("innererror") or {}
            if isinstance(inner, dict) and inner.get("code") == "ResponsibleAIPolicyViolation":
                code = "content_filter"
        elif isinstance(err, str):
            message = err
        elif isinstance(body, dict) and isinstance(body.get("message"), str):
            message = body["message"]  # vLLM's older shape: {"object": "error", "message": ..., "code": 400}
        elif body_text:
            message = body_snippet(body_text, secrets=secrets)
        # Some proxies answer 200 with an error object; an int code there is the real status.
        effective = status
        if status < 300:
            effective = code if isinstance(code, int) and code >= 300 else 502
        outcome = status_class(effective) or OutcomeClass.infra_error
        err_type = err.get("type") if isinstance(err, dict) else None
        if code in _BLOCK_CODES and effective == 400:
            outcome = OutcomeClass.provider_block
        elif code in _NOT_FOUND_CODES:
            outcome = OutcomeClass.not_found
        elif is_quota_error(effective, code, message) or is_quota_error(effective, err_type, None):
            # HTTP says 429 for OpenAI's insufficient_quota, but the message says waiting will not help.
            outcome = OutcomeClass.quota_exhausted
            message = f"quota exhausted, waiting will not help: {message or ''}"
        elif is_context_error(effective, code, message) or is_context_error(effective, err_type, None):
            outcome = OutcomeClass.context_too_long
        return assemble(
            outcome, status, norm, body_text, secrets, error=error_line(status, code, message, secrets)
        )
