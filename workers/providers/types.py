"""Provider-neutral types: what an adapter is bound to (its Provider row of the table, families.py), what
it is given (Endpoint, ChatRequest, a preflight's ProbeAnswer) and what it returns (AdapterResult with its
OutcomeClass, ProbeFinding), and where an endpoint's key comes from (its environment variable).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum

from afpbench.workers.errors import MissingKey
from afpbench.workers.providers.key_policy import check_key_variable


@dataclass(frozen=True)
class Provider:
    """One provider name's row in the table (families.py); its adapter is bound to it."""

    name: str
    family: str  # a key of families.FAMILIES: the wire protocol (adapter) and the execution queue
    default_base_url: str | None  # None: the spec must give base_url (a simulated provider: AFP_SIM_URL)
    auth_header: str = "Authorization"  # openai family only; Azure's v1 API takes "api-key"
    simulated: bool = False
    # Whether GET /models names what a request's `model` may be (Azure's names base models, not deployments).
    lists_models: bool = True
    # How a judge asks for structured output by default (workers/providers/structured.py): "json_schema"
    # (the full schema, length caps included), "strict_subset" (OpenAI strict mode refuses length
    # keywords), "off" (prompt-only: support depends on the model behind the endpoint).
    structured_output: str = "json_schema"
    # Whether the provider offers its family's batch API (workers/providers/batch.py; the spec's `lane`).
    batch: bool = False


@dataclass(frozen=True)
class UsageCounting:
    """How a family's usage report nests its counts; the cost rule reads it (scoring.measures.token_cost)."""

    cached_inside_input: bool  # the input count already includes the cached (cache-read) tokens
    reasoning_inside_output: bool  # the output count already includes the reasoning tokens


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
    # Billing or quota exhausted (OpenAI 429 insufficient_quota and the other providers' equivalents):
    # waiting does not help, so the model stops like an auth error.
    quota_exhausted = "quota_exhausted"
    # The prompt does not fit the model's context: that cell cannot run, the model's other cells can.
    context_too_long = "context_too_long"


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


@dataclass(frozen=True)
class ResponseSchema:
    """Structured output the caller asks for: a name (letters, digits, '_' or '-', at most 64) and a
    JSON Schema. Each adapter maps it to its provider's mechanism, or ignores it where the provider's
    structured output is off (workers/providers/structured.py); the caller parses strictly either way."""

    name: str
    schema: dict
    description: str = ""


@dataclass
class ChatRequest:
    messages: list[dict]
    tools: list[dict] = field(default_factory=list)
    extra_headers: dict[str, str] = field(default_factory=dict)
    response_schema: ResponseSchema | None = None


@dataclass
class PreparedCall:
    method: str
    url: str
    headers: dict[str, str]  # includes auth: never store this object
    json: dict
    reasoning_params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class ProbeRequest:
    """The preflight's one cheap GET (a model listing, never a paid call)."""

    url: str
    headers: dict[str, str]  # includes auth: never store or log this object


@dataclass(frozen=True)
class ProbeAnswer:
    """What the endpoint answered the probe: its status and body text (unmasked: read, never shown)."""

    status: int
    body_text: str


class ProbeKind(StrEnum):
    key_refused = "key_refused"  # a bad key said otherwise than 401/403 (Gemini's 400 API_KEY_INVALID)
    unknown_model = "unknown_model"
    no_listing = "no_listing"  # no model listing at that URL: base_url is not the API root
    not_a_listing = "not_a_listing"  # an answer that is not a model list: base_url is not the API root
    unconfirmed = "unconfirmed"  # an empty listing: the model name cannot be checked (the run goes on)


@dataclass(frozen=True)
class ProbeFinding:
    """What a family reads in a probe's answer beyond the general rules (workers/providers/preflight.py)."""

    kind: ProbeKind
    detail: str = ""  # the endpoint's own words (e.g. the ids it lists): shown apart from the summary


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
    # The body's exact bytes with secrets masked (redact.mask_bytes); None when no response was read.
    raw_bytes: bytes | None = None
    request_sent: dict = field(default_factory=dict)
    latency_ms: float = 0.0
    error: str | None = None
    reasoning_params: dict = field(default_factory=dict)
    # The provider's own retry advice when it gives one (Anthropic's `x-should-retry`); None: no advice.
    should_retry: bool | None = None
    # Why a retry cannot help, when the harness itself knows: a tool conversation the declared time limits
    # cannot fit would be cut the same way again, its first rounds paid again (cells/conversation.py).
    final: str | None = None


def key_for(endpoint: Endpoint) -> str | None:
    """The API key from the environment variable the endpoint names; None when it names none.

    Only a variable on the operator's allow-list is read (key_policy.py): this is the one place a key
    is read, so no spec, stored sweep or hand-built Endpoint gets past the list."""
    if not endpoint.api_key_env:
        return None
    check_key_variable(endpoint.api_key_env)
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


def key_for_quiet(endpoint: Endpoint) -> str | None:
    try:
        return key_for(endpoint)
    except MissingKey:
        return None
