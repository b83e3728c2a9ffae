"""Anthropic's Message Batches for the Anthropic family: the requests sent in one body
(POST /v1/messages/batches, each {custom_id, params} where params is the Messages body `build` makes),
polled (GET /v1/messages/batches/{id}: processing_status in_progress, canceling, ended) and, once ended,
its results read from `results_url` (JSONL: {custom_id, result: {type: succeeded | errored | canceled |
expired, ...}}). Shapes: https://docs.anthropic.com/en/api/creating-message-batches,
https://docs.anthropic.com/en/api/retrieving-message-batch-results and the guide
https://docs.anthropic.com/en/docs/build-with-claude/batch-processing; test bodies: tests/data/batch/anthropic_*.

A Message Batch takes no metadata or name of ours, so a submission whose answer was lost is found in the
batch list (GET /v1/messages/batches, newest first, `limit` 1-1000, cursor `after_id`, answered {data,
has_more, first_id, last_id}: https://docs.anthropic.com/en/api/listing-message-batches) by its time
window and request count (`request_counts` summed); the poller confirms a copy by its results' custom ids
(workers/cells/batch_submit.py).
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Iterable, Sequence

from afpbench.workers.providers.batch import (
    LIST_PAGE,
    BatchAPI,
    BatchLimits,
    BatchLine,
    BatchPage,
    BatchView,
    EntryResult,
    answered,
    entry_failure,
    json_lines,
    mapping,
    rfc3339,
)
from afpbench.workers.providers.batch_http import batch_call
from afpbench.workers.providers.types import Endpoint

# The HTTP status a sync call gets for each error type (https://docs.anthropic.com/en/api/errors): an
# errored entry is classified as that sync answer would be.
ERROR_STATUS = {"invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
                "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529}



class AnthropicBatch(BatchAPI):
    # "up to 100,000 Message requests or 256 MB in size, whichever is reached first"; ends within 24 hours.
    batch_limits = BatchLimits(max_entries=100_000, max_bytes=256 * 1024 * 1024, window_s=24 * 3600)
    labelled = False

    @abstractmethod
    def version_headers(self) -> dict[str, str]:
        """The API version header every request carries (the adapter's)."""

    def _headers(self, endpoint: Endpoint) -> dict[str, str]:
        return {**self.version_headers(), **self.key_headers(endpoint)}

    def _batches(self, endpoint: Endpoint) -> str:
        return self.api_root(endpoint) + "/messages/batches"  # type: ignore[attr-defined]

    def submit_batch(self, endpoint: Endpoint, lines: list[BatchLine], label: str) -> BatchView:
        body = {"requests": [{"custom_id": line.custom_id, "params": line.body} for line in lines]}
        return self.read_batch(json.loads(batch_call(endpoint, "POST", self._batches(endpoint),
                                                     self._headers(endpoint), json=body)))

    def poll_batch(self, endpoint: Endpoint, provider_batch_id: str) -> BatchView:
        text = batch_call(endpoint, "GET", f"{self._batches(endpoint)}/{provider_batch_id}", self._headers(endpoint))
        return self.read_batch(json.loads(text))

    def read_batch(self, body: dict) -> BatchView:
        status = str(body.get("processing_status") or "")
        url = body.get("results_url")
        counts = mapping(body.get("request_counts"))
        numbers = [n for n in counts.values() if isinstance(n, int) and not isinstance(n, bool)]
        return BatchView(str(body.get("id")), status, status == "ended", rfc3339(body.get("expires_at")),
                         (url,) if isinstance(url, str) else (), None, body, rfc3339(body.get("created_at")), None,
                         sum(numbers) if numbers else None)

    def list_page(self, endpoint: Endpoint, cursor: str | None) -> BatchPage:
        query = {"limit": LIST_PAGE, **({"after_id": cursor} if cursor else {})}
        return self.read_batch_list(json.loads(batch_call(endpoint, "GET", self._batches(endpoint),
                                                          self._headers(endpoint), params=query)))

    def read_batch_list(self, body: dict) -> BatchPage:
        views = tuple(self.read_batch(b) for b in body.get("data") or [] if isinstance(b, dict))
        more = body.get("has_more") is True and isinstance(body.get("last_id"), str)
        return BatchPage(views, body["last_id"] if more else None)

    def batch_results(self, endpoint: Endpoint, view: BatchView, secrets: Iterable[str] = (),
                      order: Sequence[str] = ()) -> list[EntryResult]:
        out: list[EntryResult] = []
        for url in view.results:
            out += self.read_results(batch_call(endpoint, "GET", url, self._headers(endpoint)), secrets)
        return out

    def read_results(self, text: str, secrets: Iterable[str] = ()) -> list[EntryResult]:
        secrets = list(secrets)
        out: list[EntryResult] = []
        for raw, line in json_lines(text):
            if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                continue
            result: dict = line["result"] if isinstance(line.get("result"), dict) else {}
            kind = result.get("type")
            if kind == "succeeded":
                parsed = self.parse(200, {}, json.dumps(result.get("message"), ensure_ascii=False),  # type: ignore[attr-defined]
                                    secrets=secrets)
                out.append(EntryResult(line["custom_id"], answered(parsed, raw, secrets)))
            elif kind == "errored" and isinstance(result.get("error"), dict):
                error: dict = result["error"]
                inner: dict = error["error"] if isinstance(error.get("error"), dict) else error
                status = ERROR_STATUS.get(str(inner.get("type")), 500)
                parsed = self.parse(status, {}, json.dumps(error, ensure_ascii=False), secrets=secrets)  # type: ignore[attr-defined]
                out.append(EntryResult(line["custom_id"], answered(parsed, raw, secrets)))
            else:
                cause = {"expired": "expired", "canceled": "cancelled"}.get(str(kind), "errored")
                out.append(EntryResult(line["custom_id"], entry_failure(cause, f"result type {kind}", raw)))
        return out
