"""The optional batch capability: a provider's batch API (OpenAI's Batch API, Anthropic's Message
Batches, Gemini's batch mode), taken on by an adapter that inherits `BatchAPI` (base.py's contract).

A batch carries many one-round requests, each under a `custom_id` of ours; the provider answers within
its completion window at its batch price. What differs between providers is the envelope: how lines are
sent (`submit_batch`), how the batch's state reads (`poll_batch`) and where its results are
(`batch_results`). Each request's body is what the family's `build` makes for a sync call, and each
result's body is classified by the family's `parse`, so an answer means the same on both lanes.

Pure parts (tested from documented bodies in tests/data/batch/): `read_batch` (a batch object to a
`BatchView`), `read_batch_list` (a page of the provider's batch list) and `read_results` (a results
document to `EntryResult`s). The network: batch_http.py.

A submission whose answer never came back (a poller killed, a timeout) may still have been accepted:
`find_batches` lists the provider's batches made since the submission was first tried and returns those
that may be it, so the poller adopts that copy instead of sending and paying for a second one
(workers/cells/batch_submit.py). OpenAI and Gemini carry our label on the batch (`labelled`); Anthropic's
Message Batches take no label, so its candidates are the batches created in the submission's time window
with its request count, confirmed by their results' custom ids.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, ClassVar

from afpbench.workers.providers.batch_http import BatchFault
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

# Our clock and the provider's may differ: a batch made by a submission counts as made within this of it.
CLOCK_SKEW = timedelta(minutes=5)
LIST_PAGE = 100  # batches asked for per page of a provider's list (each documents at least 100)
MAX_LIST_PAGES = 100  # more pages than this since the submission: the search fails (tried again later)


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
    created_at: datetime | None = None  # when the provider made it
    label: str | None = None  # our label on it (OpenAI metadata, Gemini displayName), where it carries one
    requests: int | None = None  # how many requests it holds


@dataclass(frozen=True)
class BatchPage:
    """One page of a provider's batch list (newest first) and the cursor of the next, None at the end."""

    views: tuple[BatchView, ...]
    next: str | None


@dataclass(frozen=True)
class Submission:
    """What a poller knows of a submission that may have been accepted: the label it was sent with, when
    it was first tried (our clock), and how many requests it carries."""

    label: str
    since: datetime
    entries: int

    def made_by(self, view: BatchView, now: datetime) -> bool:
        """Whether the view was made in the submission's time window with its request count (the
        identification a provider without labels allows)."""
        return (view.created_at is not None and self.since - CLOCK_SKEW <= view.created_at <= now + CLOCK_SKEW
                and view.requests == self.entries)


def listed_since(read_page: Callable[[str | None], BatchPage], since: datetime) -> list[BatchView]:
    """Every listed batch made at or after `since` (less the clock skew). Pages are read until the list
    ends, or until a page holds only older batches once the list has shown itself newest first (a later
    batch before an earlier one, never the reverse): Anthropic documents that order, OpenAI's and
    Gemini's pages do not say, so the order is checked, not trusted. Raises BatchFault past
    MAX_LIST_PAGES pages (the search is tried again at the next poll; nothing is sent meanwhile)."""
    edge = since - CLOCK_SKEW
    found: list[BatchView] = []
    times: list[datetime] = []  # every listed creation time, in list order
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = read_page(cursor)
        found += [v for v in page.views if v.created_at is None or v.created_at >= edge]
        times += [v.created_at for v in page.views if v.created_at is not None]
        pairs = list(zip(times, times[1:], strict=False))
        newest_first = any(a > b for a, b in pairs) and all(a >= b for a, b in pairs)  # seen, never contradicted
        older = bool(page.views) and all(v.created_at is not None and v.created_at < edge for v in page.views)
        if (older and newest_first) or page.next is None:
            return found
        cursor = page.next
    raise BatchFault(f"more than {MAX_LIST_PAGES * LIST_PAGE} batches listed since {since:%Y-%m-%d %H:%M} UTC")


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


def mapping(value: object) -> dict:
    """A JSON object, or {} for anything else (absent, null, another type)."""
    return value if isinstance(value, dict) else {}


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
    labelled: ClassVar[bool] = True  # the provider keeps our label on the batch (find_batches matches it)

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

    @abstractmethod
    def read_batch_list(self, body: dict) -> BatchPage:
        """One page of the provider's batch list read."""

    @abstractmethod
    def list_page(self, endpoint: Endpoint, cursor: str | None) -> BatchPage:
        """One page of the provider's batch list, newest first. Raises BatchFault."""

    def find_batches(self, endpoint: Endpoint, submission: Submission, now: datetime) -> list[BatchView]:
        """The provider's batches that may be the submission, oldest first: those carrying its label, or,
        where the provider keeps no label, those made in its time window with its request count. Raises
        BatchFault."""
        listed = listed_since(lambda cursor: self.list_page(endpoint, cursor), submission.since)
        if self.labelled:
            found = [v for v in listed if v.label == submission.label]
        else:
            found = [v for v in listed if submission.made_by(v, now)]
        return sorted(found, key=lambda v: v.created_at or now)
