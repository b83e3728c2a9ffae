"""How a simulated batch reads in each provider's shape (batches.py holds the batches): OpenAI's batch
object and its output/error files, Anthropic's Message Batch and its results JSONL, Gemini's operation
with inlined responses, and each shape's batch list (`batch_list`). Every body says simulated (ids
"…sim…", served model "sim-…")."""

from __future__ import annotations

import json
import uuid

from afpbench.workers.sim.batches import WINDOW_S, BatchBook, Outcome, Shape, SimBatch
from afpbench.workers.sim.shapes import anthropic_reply, gemini_reply
from afpbench.workers.sim.wire import FINGERPRINT, completion_body, error_body, served_model

EXPIRED_TEXT = "afpbench-sim (simulated): not executed before the completion window expired"


def _iso(epoch: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def openai_view(book: BatchBook, batch: SimBatch) -> dict:
    if batch.outcomes is not None and "output_file_id" not in batch.extra:
        out: list[dict] = []
        errors: list[dict] = []
        for custom_id, kind, reply in batch.outcomes:
            record: dict = {"id": f"batch_req_sim_{uuid.uuid4().hex[:16]}", "custom_id": custom_id}
            request_id = f"req_sim_{uuid.uuid4().hex[:12]}"
            if kind == "expired":
                errors.append({**record, "response": None, "error": {"code": "batch_expired", "message": EXPIRED_TEXT}})
            elif kind == "error" or reply is None:
                errors.append({**record, "error": None, "response": {
                    "status_code": 500, "request_id": request_id,
                    "body": error_body("injected batch entry error", "server_error")}})
            else:
                model = served_model(batch.entries[0].model if batch.entries else None)
                out.append({**record, "error": None, "response": {
                    "status_code": 200, "request_id": request_id, "body": completion_body(reply, model)}})
        for name, rows in (("output_file_id", out), ("error_file_id", errors)):
            file_id = None
            if rows:
                file_id = f"file-sim-{uuid.uuid4().hex[:20]}"
                with book.lock:
                    book.files[file_id] = _jsonl(rows)
            batch.extra[name] = file_id
    ended = batch.outcomes is not None
    status = ("expired" if batch.expired else "completed") if ended else "in_progress"
    failed = sum(1 for _, kind, _ in batch.outcomes or [] if kind != "answer")
    return {
        "id": batch.id, "object": "batch", "endpoint": batch.extra.get("endpoint"), "errors": None,
        "input_file_id": batch.extra.get("input_file_id"), "completion_window": "24h", "status": status,
        "output_file_id": batch.extra.get("output_file_id"), "error_file_id": batch.extra.get("error_file_id"),
        "created_at": batch.created_at, "in_progress_at": batch.created_at, "expires_at": batch.created_at + WINDOW_S,
        "completed_at": batch.ended_at if status == "completed" else None,
        "expired_at": batch.ended_at if status == "expired" else None,
        "request_counts": {"total": len(batch.entries), "completed": len(batch.entries) - failed if ended else 0,
                           "failed": failed},
        "metadata": batch.extra.get("metadata"), "system_fingerprint": FINGERPRINT,
    }


def anthropic_view(batch: SimBatch, root: str) -> dict:
    ended = batch.outcomes is not None
    kinds = [kind for _, kind, _ in batch.outcomes or []]
    return {
        "id": batch.id, "type": "message_batch", "processing_status": "ended" if ended else "in_progress",
        "request_counts": {"processing": 0 if ended else len(batch.entries), "succeeded": kinds.count("answer"),
                           "errored": kinds.count("error"), "canceled": 0, "expired": kinds.count("expired")},
        "created_at": _iso(batch.created_at), "expires_at": _iso(batch.created_at + WINDOW_S),
        "ended_at": _iso(batch.ended_at) if batch.ended_at else None, "cancel_initiated_at": None,
        "archived_at": None, "results_url": f"{root}/messages/batches/{batch.id}/results" if ended else None,
    }


def anthropic_results(batch: SimBatch) -> bytes:
    rows = []
    model = served_model(batch.entries[0].model if batch.entries else None)
    for custom_id, kind, reply in batch.outcomes or []:
        if kind == "answer" and reply is not None:
            result: dict = {"type": "succeeded", "message": anthropic_reply(reply, model)}
        elif kind == "expired":
            result = {"type": "expired"}
        else:
            result = {"type": "errored", "error": {"type": "error", "error": {
                "type": "api_error", "message": "afpbench-sim (simulated): injected batch entry error"}}}
        rows.append({"custom_id": custom_id, "result": result})
    return _jsonl(rows)


def _gemini_item(outcome: Outcome, model: str) -> dict:
    custom_id, kind, reply = outcome
    if kind == "answer" and reply is not None:
        return {"response": gemini_reply(reply, model), "metadata": {"key": custom_id}}
    return {"error": {"code": 13, "message": "afpbench-sim (simulated): injected batch entry error",
                      "status": "INTERNAL"}, "metadata": {"key": custom_id}}


def gemini_view(batch: SimBatch) -> dict:
    ended = batch.outcomes is not None
    model = served_model(batch.entries[0].model if batch.entries else None)
    kinds = [kind for _, kind, _ in batch.outcomes or []]
    state = ("BATCH_STATE_EXPIRED" if batch.expired else "BATCH_STATE_SUCCEEDED") if ended else "BATCH_STATE_RUNNING"
    metadata = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
        "model": f"models/{model}", "displayName": batch.extra.get("display_name"), "name": batch.id,
        "createTime": _iso(batch.created_at), "state": state,
        "batchStats": {"requestCount": str(len(batch.entries)), "successfulRequestCount": str(kinds.count("answer")),
                       "failedRequestCount": str(len(kinds) - kinds.count("answer"))},
    }
    operation: dict = {"name": batch.id, "metadata": metadata}
    if ended:
        operation["done"] = True
        operation["response"] = {
            "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
            # An expired batch's unrun requests have no response (their keys are missing from the list).
            "inlinedResponses": {"inlinedResponses": [_gemini_item(o, model) for o in batch.outcomes or []
                                                      if o[1] != "expired"]}}
    return operation


def _page(batches: list[SimBatch], after: str | None, limit: int) -> tuple[list[SimBatch], bool]:
    """The batches after the cursor (a batch id) and whether more follow."""
    ids = [b.id for b in batches]
    start = ids.index(after) + 1 if after in ids else 0
    return batches[start:start + limit], start + limit < len(batches)


def _limit(query: dict[str, str], name: str, default: int, most: int) -> int:
    value = query.get(name, "")
    return min(max(int(value), 1), most) if value.isdigit() else default


def batch_list(book: BatchBook, shape: Shape, query: dict[str, str], root: str) -> dict:
    """A page of the shape's list, as documented: OpenAI {object: list, data, first_id, last_id, has_more}
    (`after`, `limit` 1-100, default 20); Anthropic {data, has_more, first_id, last_id} (`after_id`, `limit`
    1-1000, default 20); Gemini's ListOperationsResponse {operations, nextPageToken} (`pageToken`,
    `pageSize`), whose operations carry no inlined responses."""
    listed = book.listed(shape)
    if shape == "gemini":
        page, more = _page(listed, query.get("pageToken"), _limit(query, "pageSize", 20, 1000))
        operations = [{k: v for k, v in gemini_view(b).items() if k != "response"} for b in page]
        return {"operations": operations, **({"nextPageToken": page[-1].id} if more and page else {})}
    if shape == "anthropic":
        page, more = _page(listed, query.get("after_id"), _limit(query, "limit", 20, 1000))
        data = [anthropic_view(b, root) for b in page]
    else:
        page, more = _page(listed, query.get("after"), _limit(query, "limit", 20, 100))
        data = [openai_view(book, b) for b in page]
    ends = {"first_id": page[0].id if page else None, "last_id": page[-1].id if page else None}
    return {**({"object": "list"} if shape == "openai" else {}), "data": data, **ends, "has_more": more}
