"""The adapter contract: everything that differs between provider API families lives in one adapter.

An adapter class is one family's wire protocol; each provider name gets an instance bound to its row of
the table (`Provider`, families.py), so the row's facts (default base URL, auth header, structured-output
default, whether its listing names models) reach the adapter without a lookup. An adapter knows:
- where its API lives and how a key travels: `api_root`, `auth_headers`;
- one call: `build` turns a neutral ChatRequest into one HTTP request, `parse` classifies one response
  into an OutcomeClass plus the fields a run record needs, `call` ties the two together over a pooled
  session. `build` and `parse` are pure so they can be tested from recorded samples; only `call` touches
  the network. One call is one attempt: adapters never retry;
- the preflight: `probe` (the model-listing request) and `read_probe` (what the family's answer means
  beyond the rules every family shares, which workers/providers/preflight.py applies);
- how its usage report counts tokens: `usage_counting` (read by the cost rule).

An optional capability (a provider's batch API, say) is a further abstract base class in its own module,
with its own methods built on `api_root`, `auth_headers`, `build` (one request's body) and `parse` (one
result's body); an adapter takes it on by inheriting it, and callers ask `isinstance(adapter, ...)`.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, ClassVar

from afpbench.workers.errors import MissingKey
from afpbench.workers.providers.types import (
    AdapterResult,
    ChatRequest,
    Endpoint,
    OutcomeClass,
    PreparedCall,
    ProbeAnswer,
    ProbeFinding,
    ProbeRequest,
    Provider,
    UsageCounting,
    failure_result,
    key_for_quiet,
)
from afpbench.workers.redact import mask_bytes, mask_known, mask_secrets, scrub_headers


class Adapter(ABC):
    """One provider API family, bound to one provider's row. `call` is shared; the rest is the family's."""

    usage_counting: ClassVar[UsageCounting]

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    def estimate_tokens(self, text: str) -> int:
        """How many tokens `text` is expected to count as in this family's usage report, before any call
        (the cost plan, workers/planning/cost.py). No tokenizer is shipped: the stated rule is one token
        per four characters, rounded up; a family that knows better overrides it."""
        return -(-len(text) // 4)

    def base_url(self, endpoint: Endpoint) -> str:
        """The endpoint's base URL; an endpoint built without one gets its provider's default."""
        return (endpoint.base_url or self.provider.default_base_url or "").rstrip("/")

    @abstractmethod
    def api_root(self, endpoint: Endpoint) -> str:
        """The versioned root every request of the family goes under; base_url may already name it."""

    @abstractmethod
    def auth_headers(self, key: str) -> dict[str, str]:
        """The header(s) that carry the key: never in the URL, so it cannot leak into a stored request."""

    @abstractmethod
    def build(self, endpoint: Endpoint, request: ChatRequest) -> PreparedCall:
        """URL, headers (with auth) and JSON body for one request. Raises MissingKey."""

    @abstractmethod
    def parse(
        self, status: int, headers: Mapping[str, Any], body_text: str, *, secrets: Iterable[str] = ()
    ) -> AdapterResult:
        """Classify one HTTP response. `secrets` are masked out of raw_body, error and text."""

    @abstractmethod
    def probe(self, endpoint: Endpoint) -> ProbeRequest:
        """The preflight's GET: a model listing under the same API root `build` posts to. Raises MissingKey."""

    @abstractmethod
    def read_probe(self, endpoint: Endpoint, answer: ProbeAnswer) -> ProbeFinding | None:
        """What this family's answer means where the shared rules do not decide it (a 404, a 2xx, a bad
        key told otherwise than by 401/403); None: the shared rules apply (preflight.py)."""

    def call(self, endpoint: Endpoint, request: ChatRequest) -> AdapterResult:
        """build -> POST on this thread's pooled session -> parse; network faults become infra_error."""
        # Imported here: reading the provider table (a spec's validation) never loads the HTTP stack.
        from afpbench.workers.providers.transport import post_json

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
            raw_bytes=None if outcome.fault is not None else mask_bytes(outcome.body, secrets, result.raw_body),
            request_sent=request_sent,
            latency_ms=latency_ms,
            reasoning_params=dict(prepared.reasoning_params),
        )


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
