"""Gemini's batch mode (inlined requests) read from bodies written to its documented shapes
(tests/data/batch/README.md): responses by their metadata key or, where the key is not echoed, by
position; an error entry classified as the same sync error."""

from __future__ import annotations

import json
from pathlib import Path

from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import OutcomeClass

DATA = Path(__file__).parents[3] / "data" / "batch"
ADAPTER = adapter_for("gemini")


def test_a_running_batch_has_not_ended():
    view = ADAPTER.read_batch(json.loads((DATA / "gemini_batch_running.json").read_text()))
    assert view.provider_batch_id == "batches/123456" and view.provider_status == "RUNNING" and not view.ended


def test_a_done_batch_gives_its_inlined_responses_by_key_or_position():
    body = json.loads((DATA / "gemini_batch_succeeded.json").read_text())
    view = ADAPTER.read_batch(body)
    assert view.ended and view.provider_status == "SUCCEEDED"
    results = {r.custom_id: r.result for r in ADAPTER.read_results(body, ["c17-a1", "c18-a1", "c19-a1"])}
    assert results["c17-a1"].outcome == OutcomeClass.answer and results["c17-a1"].text == "The total is 42 units."
    assert results["c17-a1"].usage.input_tokens == 22
    assert results["c18-a1"].text == "I cannot confirm that figure.", "no metadata: matched by position"
    assert results["c19-a1"].http_status == 500 and results["c19-a1"].outcome != OutcomeClass.answer


def test_the_batch_request_goes_to_batch_generate_content_with_each_key():
    from afpbench.workers.providers.types import ChatRequest, Endpoint

    endpoint = Endpoint("gemini", "gemini-2.5-flash", "https://generativelanguage.googleapis.com", None)
    line = ADAPTER.batch_line(endpoint, "c1-a1", ChatRequest([{"role": "user", "content": "hi"}]))
    assert line.url.endswith("/models/gemini-2.5-flash:generateContent") and line.body["contents"]


def test_the_batch_list_gives_each_operation_with_its_display_name_count_and_time_and_the_next_token():
    """https://ai.google.dev/api/batch-mode: `batches.list` answers a ListOperationsResponse {operations,
    nextPageToken}; each GenerateContentBatch names itself by `displayName` (our label) and counts its
    requests in `batchStats.requestCount` (an int64, a JSON string)."""
    page = ADAPTER.read_batch_list(json.loads((DATA / "gemini_batch_list.json").read_text()))
    ours, other = page.views
    assert page.next == "CgwI6J3mwgYQgPqNuAM"
    assert ours.provider_batch_id == "batches/654321" and ours.label == "afpbench 3f2a9c batch 9 a1b2c3d4e5f6"
    assert ours.requests == 24 and ours.provider_status == "PENDING" and not ours.ended
    assert ours.created_at is not None and ours.created_at.isoformat().startswith("2025-07-11T09:30:00")
    assert other.label == "nightly-eval" and other.ended and other.requests == 3
    assert ADAPTER.read_batch_list({"operations": []}).next is None
