"""Provider-neutral types and the adapter contract.

An adapter turns a neutral ChatRequest into one HTTP call (`build`), classifies one HTTP response
into an OutcomeClass plus the fields a run record needs (`parse`), and ties the two together over a
pooled `requests` session (`call`). `build` and `parse` are pure so they can be tested from recorded
samples; only `call` touches the network. One call is one attempt: adapters never retry.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from afpbench.workers.redact import mask_known, mask_secrets, scrub_headers


class OutcomeClass(StrEnum):
    answer = "answer"
    tool_call = "tool_call"
    provider_block = "provider_block"
    rate_limited = "rate_limited"
    overloaded = "overloaded"
    infra_error = "infra_error"
    # Also the bucket for non-retryable configuration errors (400 context length, bad base_url,
    # redirect not followed, missing key): retrying cannot fix them.
    auth_error = "auth_error"
    not_found = "not_found"
    truncated = "truncated"


class MissingKey(RuntimeError):
    """The endpoint names an API-key environment variable that is not set (message names the variable)."""


@dataclass(frozen=True)
class Endpoint:
    provider: str
    model: str
    base_url: str
    api_key_env: str | None
    params: dict = field(default_factory=dict)
    timeout_s: float = 60.0  # per socket read, and the overall deadline for reading the response
    connect_timeout_s: float = 10.0


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict | None  # None when arguments_raw is not a JSON object
    arguments_raw: str
    # Gemini returns an opaque signature with function calls that must be sent back in the history.
    thought_signature: str | None = None

    def to_message_dict(self) -> dict:
        """Neutral form for an assistant message's `tool_calls` list."""
        out = {"id": self.id, "name": self.name, "arguments_raw": self.arguments_raw}
        if self.thought_signature:
            out["thought_signature"] = self.thought_signature
        return out


@dataclass
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


@dataclass
class ChatRequest:
    messages: list[dict]
    tools: list[dict] = field(default_factory=list)
    extra_headers: dict[str, str] = field(default_factory=dict)


@dataclass
class PreparedCall:
    method: str
    url: str
    headers: dict[str, str]  # includes auth: never store this object
    json: dict
    reasoning_params: dict = field(default_factory=dict)


@dataclass
class AdapterResult:
    outcome: OutcomeClass
    http_status: int | None
    text: str | None
    tool_calls: list[ToolCall]
    finish_reason: str | None
    usage: Usage
    served_model: str | None
    request_id: str | None
    retry_after_s: float | None
    headers: dict[str, str]
    raw_body: str
    request_sent: dict = field(default_factory=dict)
    latency_ms: float = 0.0
    error: str | None = None
    reasoning_params: dict = field(default_factory=dict)


def key_for(endpoint: Endpoint) -> str | None:
    """The API key from the environment variable the endpoint names; None when it names none."""
    if not endpoint.api_key_env:
        return None
    value = os.environ.get(endpoint.api_key_env)
    if not value:
        raise MissingKey(
            f"environment variable {endpoint.api_key_env} is not set "
            f"(API key for provider {endpoint.provider!r})"
        )
    return value


def failure_result(
    outcome: OutcomeClass, error: str, *, http_status: int | None = None, raw_body: str = ""
) -> AdapterResult:
    """An AdapterResult for a call that produced no usable response."""
    return AdapterResult(
        outcome=outcome,
        http_status=http_status,
        text=None,
        tool_calls=[],
        finish_reason=None,
        usage=Usage(),
        served_model=None,
        request_id=None,
        retry_after_s=None,
        headers={},
        raw_body=raw_body,
        error=error,
    )


class Adapter(ABC):
    """One provider API family. Subclasses implement `build` and `parse`; `call` is shared."""

    name: str = "abstract"

    @abstractmethod
    def build(self, endpoint: Endpoint, request: ChatRequest) -> PreparedCall:
        """URL, headers (with auth) and JSON body for one request. Raises MissingKey."""

    @abstractmethod
    def parse(
        self, status: int, headers: Mapping[str, Any], body_text: str, *, secrets: Iterable[str] = ()
    ) -> AdapterResult:
        """Classify one HTTP response. `secrets` are masked out of raw_body, error and text."""

    def call(self, endpoint: Endpoint, request: ChatRequest) -> AdapterResult:
        """build -> POST on this thread's pooled session -> parse; network faults become infra_error."""
        from afpbench.workers.providers.transport import post_json  # local import: transport imports base

        try:
            prepared = self.build(endpoint, request)
        except MissingKey as exc:
            return failure_result(OutcomeClass.auth_error, f"missing API key: {exc}")
        secrets = [v for v in (key_for_quiet(endpoint),) if v]
        request_sent = sent_record(prepared, secrets)
        started = time.monotonic()
        outcome = post_json(endpoint, prepared)
        latency_ms = (time.monotonic() - started) * 1000.0
        if outcome.fault is not None:
            result = failure_result(outcome.fault_class, mask_secrets(outcome.fault, secrets))
        else:
            result = self.parse(outcome.status, outcome.headers, outcome.body_text, secrets=secrets)
        return replace(
            result,
            request_sent=request_sent,
            latency_ms=latency_ms,
            reasoning_params=dict(prepared.reasoning_params),
        )


def key_for_quiet(endpoint: Endpoint) -> str | None:
    try:
        return key_for(endpoint)
    except MissingKey:
        return None


def sent_record(prepared: PreparedCall, secrets: Iterable[str]) -> dict:
    """What was sent, for the attempt row: method, URL, non-secret headers, JSON body; key masked."""
    record = {
        "method": prepared.method,
        "url": prepared.url,
        "headers": scrub_headers(prepared.headers),
        "json": prepared.json,
    }
    # Only the known key is masked here: pattern-masking would alter fixture text the model saw.
    masked = mask_known(json.dumps(record, ensure_ascii=False), secrets)
    return json.loads(masked)
