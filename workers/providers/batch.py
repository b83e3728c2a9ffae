"""The optional batch capability: a provider's batch API (OpenAI's Batch API, Anthropic's Message
Batches, Gemini's batch mode), taken on by an adapter that inherits `BatchAPI` (base.py's contract).

A batch carries many one-round requests, each under a `custom_id` of ours; the provider answers within
its completion window at its batch price. What differs between providers is the envelope: how lines are
sent (`submit_batch`), how the batch's state reads (`poll_batch`) and where its results are
(`batch_results`). Each request's body is what the family's `build` makes for a sync call, and each
result's body is classified by the family's `parse`, so an answer means the same on both lanes.

Pure parts (tested from documented bodies in tests/data/batch/): `read_batch` (a batch object to a
`BatchView`) and `read_results` (a results document to `EntryResult`s). The network: batch_http.py.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar

from afpbench.workers.providers.types import (
    AdapterResult,
    ChatRequest,
    Endpoint,
    OutcomeClass,
    PreparedCall,
    failure_result,
    key_for,
)
from afpbench.workers.redact import mask_secrets


@dataclass(frozen=True)
class BatchLimits:
    """What one batch may hold, as the provider documents it."""

    max_entries: int
    max_bytes: int
    window_s: int  # the completion window: entries not run by then expire


@dataclass(frozen=True)
class BatchLine:
    """One request of a batch: our custom_id, the request `build` made for it (its URL and body; the
    headers, which hold the key, are never kept)."""

    custom_id: str
    url: str
    body: dict

    @classmethod
    def of(cls, custom_id: str, prepared: PreparedCall) -> BatchLine:
        return cls(custom_id, prepared.url, prepared.json)


@dataclass(frozen=True)
class BatchView:
    """What the provider says of a batch: its id, its own status word, whether processing ended (every
    entry answered, failed, expired or cancelled), when it expires, and where its results are."""

    provider_batch_id: str
    provider_status: str
    ended: bool
    expires_at: datetime | None
    results: tuple[str, ...] = ()  # the provider's handles of its results (file ids, a URL, or inline)
    error: str | None = None  # why the whole batch failed, when it did
    raw: dict | None = None


@dataclass(frozen=True)
class EntryResult:
    custom_id: str
    result: AdapterResult


def entry_failure(cause: str, detail: str, raw_line: str = "") -> AdapterResult:
    """The result of an entry the provider did not answer: an infra error naming the cause (expired,
    cancelled, errored, missing), so the retry policy sends the cell again within its attempt budget."""
    return failure_result(OutcomeClass.infra_error, f"batch entry {cause}: {detail}", raw_body=raw_line)


def rfc3339(value: object) -> datetime | None:
    """A provider's RFC 3339 time ("…Z" or an offset); None when absent or not one."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def json_lines(text: str) -> list[tuple[str, Any]]:
    """Each non-blank line with its JSON value (None when it is not JSON)."""
    out: list[tuple[str, Any]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            out.append((line, json.loads(line)))
        except json.JSONDecodeError:
            out.append((line, None))
    return out


def answered(result: AdapterResult, raw_line: str, secrets: Iterable[str]) -> AdapterResult:
    """A parsed entry result keeps its line (masked) as the round's raw body."""
    return replace(result, raw_body=mask_secrets(raw_line, list(secrets)), raw_bytes=None)


class BatchAPI(ABC):
    """The capability. Subclasses are adapters too (base.Adapter): `build`, `parse`, `api_root` and
    `auth_headers` come from there."""

    batch_limits: ClassVar[BatchLimits]

    def key_headers(self, endpoint: Endpoint) -> dict[str, str]:
        """The family's auth header(s) for the endpoint's key, none without a key. Raises MissingKey."""
        key = key_for(endpoint)
        return self.auth_headers(key) if key is not None else {}  # type: ignore[attr-defined]

    def batch_line(self, endpoint: Endpoint, custom_id: str, request: ChatRequest) -> BatchLine:
        """One entry: the sync request's body under our custom_id. Raises MissingKey."""
        return BatchLine.of(custom_id, self.build(endpoint, request))  # type: ignore[attr-defined]

    @abstractmethod
    def submit_batch(self, endpoint: Endpoint, lines: list[BatchLine], label: str) -> BatchView:
        """Send the lines as one batch. Raises BatchFault (batch_http.py)."""

    @abstractmethod
    def poll_batch(self, endpoint: Endpoint, provider_batch_id: str) -> BatchView:
        """The batch's state now. Raises BatchFault."""

    @abstractmethod
    def batch_results(self, endpoint: Endpoint, view: BatchView, secrets: Iterable[str] = (),
                      order: Sequence[str] = ()) -> list[EntryResult]:
        """Every result the provider has for an ended batch; `order`: the custom ids as submitted (where
        a provider answers by position). Raises BatchFault."""

    @abstractmethod
    def read_batch(self, body: dict) -> BatchView:
        """The provider's batch object read."""
