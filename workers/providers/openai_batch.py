"""OpenAI's Batch API for the OpenAI family (and the simulator, which speaks it): the lines uploaded as
one JSONL file (POST /files, purpose "batch"), a batch created over it (POST /batches, endpoint
/v1/chat/completions, window 24h), polled (GET /batches/{id}), and its output and error files read
(GET /files/{id}/content). Shapes: https://platform.openai.com/docs/guides/batch and the API reference
(https://platform.openai.com/docs/api-reference/batch); the bodies the tests read: tests/data/batch/openai_*.

Our label rides in the batch's `metadata` (16 pairs, values up to 512 characters:
https://platform.openai.com/docs/api-reference/batch/create), and the batch list (GET /batches with
`limit` 1-100 and the cursor `after`, answered {object: list, data, first_id, last_id, has_more}:
https://platform.openai.com/docs/api-reference/batch/list) finds the copy of a submission whose answer
was lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

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
)
from afpbench.workers.providers.batch_http import BatchFault, batch_call
from afpbench.workers.providers.types import Endpoint

CHAT_PATH = "/v1/chat/completions"
LABEL_KEY = "afpbench"  # the metadata key our label is sent under
ENDED = frozenset({"completed", "expired", "cancelled", "failed"})


def _moment(value: object) -> datetime | None:
    return datetime.fromtimestamp(value, UTC) if isinstance(value, int | float) else None


class OpenAIBatch(BatchAPI):
    # "up to 50,000 requests, and can be up to 200 MB in size"; completion_window "24h".
    batch_limits = BatchLimits(max_entries=50_000, max_bytes=200 * 1024 * 1024, window_s=24 * 3600)

    def _root(self, endpoint: Endpoint) -> str:
        return self.api_root(endpoint)  # type: ignore[attr-defined]

    @staticmethod
    def jsonl(lines: list[BatchLine]) -> bytes:
        """The input file: one request object a line (custom_id, method, url, body)."""
        return "".join(json.dumps({"custom_id": line.custom_id, "method": "POST", "url": CHAT_PATH,
                                   "body": line.body}, ensure_ascii=False) + "\n" for line in lines).encode()

    def submit_batch(self, endpoint: Endpoint, lines: list[BatchLine], label: str) -> BatchView:
        headers = self.key_headers(endpoint)
        uploaded = json.loads(batch_call(
            endpoint, "POST", self._root(endpoint) + "/files", headers, data={"purpose": "batch"},
            files={"file": ("afpbench-batch.jsonl", self.jsonl(lines), "application/jsonl")}))
        file_id = uploaded.get("id") if isinstance(uploaded, dict) else None
        if not isinstance(file_id, str):
            raise BatchFault(f"file upload answered without an id: {str(uploaded)[:200]}")
        created = batch_call(endpoint, "POST", self._root(endpoint) + "/batches", headers, json={
            "input_file_id": file_id, "endpoint": CHAT_PATH, "completion_window": "24h",
            "metadata": {LABEL_KEY: label[:512]}})
        return self.read_batch(json.loads(created))

    def poll_batch(self, endpoint: Endpoint, provider_batch_id: str) -> BatchView:
        text = batch_call(endpoint, "GET", f"{self._root(endpoint)}/batches/{provider_batch_id}",
                          self.key_headers(endpoint))
        return self.read_batch(json.loads(text))

    def read_batch(self, body: dict) -> BatchView:
        status = str(body.get("status") or "")
        errors = (body.get("errors") or {}).get("data") or []
        error = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors if isinstance(e, dict)) or None
        files = tuple(f for f in (body.get("output_file_id"), body.get("error_file_id")) if isinstance(f, str))
        metadata = mapping(body.get("metadata"))
        counts = mapping(body.get("request_counts"))
        total = counts.get("total")
        return BatchView(str(body.get("id")), status, status in ENDED, _moment(body.get("expires_at")), files,
                         error, body, _moment(body.get("created_at")), metadata.get(LABEL_KEY),
                         total if isinstance(total, int) else None)

    def list_page(self, endpoint: Endpoint, cursor: str | None) -> BatchPage:
        query = {"limit": LIST_PAGE, **({"after": cursor} if cursor else {})}
        return self.read_batch_list(json.loads(batch_call(endpoint, "GET", f"{self._root(endpoint)}/batches",
                                                          self.key_headers(endpoint), params=query)))

    def read_batch_list(self, body: dict) -> BatchPage:
        views = tuple(self.read_batch(b) for b in body.get("data") or [] if isinstance(b, dict))
        more = body.get("has_more") is True and isinstance(body.get("last_id"), str)
        return BatchPage(views, body["last_id"] if more else None)

    def batch_results(self, endpoint: Endpoint, view: BatchView, secrets: Iterable[str] = (),
                      order: Sequence[str] = ()) -> list[EntryResult]:
        out: list[EntryResult] = []
        for file_id in view.results:
            text = batch_call(endpoint, "GET", f"{self._root(endpoint)}/files/{file_id}/content",
                              self.key_headers(endpoint))
            out += self.read_results(text, secrets)
        return out

    def read_results(self, text: str, secrets: Iterable[str] = ()) -> list[EntryResult]:
        """Output and error file lines alike: {custom_id, response: {status_code, request_id, body}, error}."""
        secrets = list(secrets)
        out: list[EntryResult] = []
        for raw, line in json_lines(text):
            if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                continue  # a line without our id cannot be matched to a cell: its entry counts as missing
            response, error = line.get("response"), line.get("error")
            if isinstance(response, dict) and isinstance(response.get("status_code"), int):
                body = json.dumps(response.get("body"), ensure_ascii=False)
                result = self.parse(response["status_code"], {}, body, secrets=secrets)  # type: ignore[attr-defined]
                if result.request_id is None and isinstance(response.get("request_id"), str):
                    result.request_id = response["request_id"]
                out.append(EntryResult(line["custom_id"], answered(result, raw, secrets)))
            else:
                code = (error or {}).get("code") if isinstance(error, dict) else None
                message = (error or {}).get("message") if isinstance(error, dict) else None
                cause = {"batch_expired": "expired", "batch_cancelled": "cancelled"}.get(str(code), "errored")
                out.append(EntryResult(line["custom_id"], entry_failure(cause, f"{code}: {message}", raw)))
        return out
