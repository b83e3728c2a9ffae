"""Gemini's batch mode for the Gemini family, with inlined requests: one POST to
/v1beta/models/{model}:batchGenerateContent carrying {batch: {display_name, input_config: {requests:
{requests: [{request, metadata: {key}}]}}}} (each request the GenerateContent body `build` makes), answered
by a long-running operation `batches/{id}`; GET /v1beta/batches/{id} reads its state (BATCH_STATE_PENDING,
RUNNING, SUCCEEDED, FAILED, CANCELLED, EXPIRED) and, once done, the inlined responses in request order,
each {response} or {error} (its metadata is not always echoed, so position decides where it is missing).
Shapes: https://ai.google.dev/gemini-api/docs/batch-mode and https://ai.google.dev/api/batch-mode; test
bodies: tests/data/batch/gemini_*.

Our label is the batch's `displayName` ("the user-defined name of this batch"), and `batches.list`
(GET /v1beta/batches with `pageSize` and `pageToken`, answered by a ListOperationsResponse {operations,
nextPageToken}: https://ai.google.dev/api/batch-mode#method:-batches.list) finds the copy of a
submission whose answer was lost. The list's operations carry no inlined responses; the adopted batch is
read with batches.get as any other.
"""

from __future__ import annotations

import json
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
    mapping,
    rfc3339,
)
from afpbench.workers.providers.batch_http import batch_call
from afpbench.workers.providers.types import Endpoint

ENDED = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED"})
# google.rpc.Code to the HTTP status a sync call would get (https://ai.google.dev/gemini-api/docs/troubleshooting).
CODE_STATUS = {3: 400, 7: 403, 5: 404, 8: 429, 13: 500, 14: 503, 4: 504}


def _state(batch: dict) -> str:
    """BATCH_STATE_X (REST) or JOB_STATE_X (SDKs) as X."""
    return str(batch.get("state") or "").removeprefix("BATCH_STATE_").removeprefix("JOB_STATE_")



def inlined(body: dict) -> list:
    """The inlined responses of a done operation (its `response`) or of a batch read directly (`output`)."""
    for holder in (body.get("response"), (body.get("metadata") or {}).get("output"), body.get("output")):
        if isinstance(holder, dict) and isinstance(holder.get("inlinedResponses"), dict):
            found = holder["inlinedResponses"].get("inlinedResponses")
            return found if isinstance(found, list) else []
    return []


class GeminiBatch(BatchAPI):
    # Inlined requests: "the total request size ... under 20MB"; a batch left pending or running for 48 hours expires.
    batch_limits = BatchLimits(max_entries=1_000, max_bytes=20 * 1024 * 1024, window_s=48 * 3600)

    def submit_batch(self, endpoint: Endpoint, lines: list[BatchLine], label: str) -> BatchView:
        url = lines[0].url.replace(":generateContent", ":batchGenerateContent")
        body = {"batch": {"display_name": label[:128], "input_config": {"requests": {"requests": [
            {"request": line.body, "metadata": {"key": line.custom_id}} for line in lines]}}}}
        return self.read_batch(json.loads(batch_call(endpoint, "POST", url, self.key_headers(endpoint), json=body)))

    def poll_batch(self, endpoint: Endpoint, provider_batch_id: str) -> BatchView:
        url = f"{self.api_root(endpoint)}/{provider_batch_id}"  # type: ignore[attr-defined]  # "batches/..."
        return self.read_batch(json.loads(batch_call(endpoint, "GET", url, self.key_headers(endpoint))))

    def read_batch(self, body: dict) -> BatchView:
        batch = body["metadata"] if isinstance(body.get("metadata"), dict) else body
        state = _state(batch)
        error = body.get("error") if isinstance(body.get("error"), dict) else None
        ended = state in ENDED or body.get("done") is True
        stats = mapping(batch.get("batchStats"))
        count = str(stats.get("requestCount") or "")  # an int64, which JSON carries as a string
        label = batch.get("displayName")
        return BatchView(str(body.get("name") or batch.get("name")), state, ended, rfc3339(batch.get("expireTime")),
                         ("inline",) if ended else (), error.get("message") if error else None, body,
                         rfc3339(batch.get("createTime")), label if isinstance(label, str) else None,
                         int(count) if count.isdigit() else None)

    def list_page(self, endpoint: Endpoint, cursor: str | None) -> BatchPage:
        query = {"pageSize": LIST_PAGE, **({"pageToken": cursor} if cursor else {})}
        url = f"{self.api_root(endpoint)}/batches"  # type: ignore[attr-defined]
        return self.read_batch_list(json.loads(batch_call(endpoint, "GET", url, self.key_headers(endpoint),
                                                          params=query)))

    def read_batch_list(self, body: dict) -> BatchPage:
        views = tuple(self.read_batch(op) for op in body.get("operations") or [] if isinstance(op, dict))
        token = body.get("nextPageToken")
        return BatchPage(views, token if isinstance(token, str) and token else None)

    def batch_results(self, endpoint: Endpoint, view: BatchView, secrets: Iterable[str] = (),
                      order: Sequence[str] = ()) -> list[EntryResult]:
        return self.read_results(view.raw or {}, order, secrets)

    def read_results(self, body: dict, order: Sequence[str], secrets: Iterable[str] = ()) -> list[EntryResult]:
        """Each inlined response under its metadata key, or else under the custom id at its position."""
        secrets = list(secrets)
        out: list[EntryResult] = []
        for i, item in enumerate(inlined(body)):
            if not isinstance(item, dict):
                continue
            key = (item.get("metadata") or {}).get("key") if isinstance(item.get("metadata"), dict) else None
            custom_id = key if isinstance(key, str) else order[i] if i < len(order) else None
            if custom_id is None:
                continue
            raw = json.dumps(item, ensure_ascii=False)
            if isinstance(item.get("response"), dict):
                parsed = self.parse(200, {}, json.dumps(item["response"], ensure_ascii=False), secrets=secrets)  # type: ignore[attr-defined]
                out.append(EntryResult(custom_id, answered(parsed, raw, secrets)))
            elif isinstance(item.get("error"), dict):
                error = item["error"]
                status = CODE_STATUS.get(error.get("code"), 500) if isinstance(error.get("code"), int) else 500
                parsed = self.parse(status, {}, json.dumps({"error": error}, ensure_ascii=False), secrets=secrets)  # type: ignore[attr-defined]
                out.append(EntryResult(custom_id, answered(parsed, raw, secrets)))
            else:
                out.append(EntryResult(custom_id, entry_failure("errored", "neither response nor error", raw)))
        return out
