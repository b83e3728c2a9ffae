"""The adapter contract.

An adapter turns a neutral ChatRequest into one HTTP call (`build`), classifies one HTTP response
into an OutcomeClass plus the fields a run record needs (`parse`), and ties the two together over a
pooled `requests` session (`call`). `build` and `parse` are pure so they can be tested from recorded
samples; only `call` touches the network. One call is one attempt: adapters never retry.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from afpbench.workers.errors import MissingKey
from afpbench.workers.providers.transport import post_json
from afpbench.workers.providers.types import (
    AdapterResult,
    ChatRequest,
    Endpoint,
    OutcomeClass,
    PreparedCall,
    failure_result,
    key_for_quiet,
)
from afpbench.workers.redact import mask_bytes, mask_known, mask_secrets, scrub_headers


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
