"""OpenAI's Batch API read from bodies written to its documented shapes (tests/data/batch/README.md):
the lane's rule that an entry's answer means what the same sync answer means (the family's `parse`), and
that every entry without an answer becomes a failure naming its cause (expired, errored)."""

from __future__ import annotations

import json
from pathlib import Path

from afpbench.workers.providers.batch import BatchAPI, BatchLine
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.openai_batch import CHAT_PATH, OpenAIBatch
from afpbench.workers.providers.types import ChatRequest, Endpoint, OutcomeClass

DATA = Path(__file__).parents[3] / "data" / "batch"
ADAPTER = adapter_for("openai")


def test_the_openai_family_takes_on_the_batch_capability():
    assert isinstance(ADAPTER, BatchAPI) and isinstance(adapter_for("sim"), BatchAPI)


def test_a_completed_batch_reads_as_ended_with_its_output_and_error_files():
    view = ADAPTER.read_batch(json.loads((DATA / "openai_batch_completed.json").read_text()))
    assert view.provider_batch_id == "batch_abc123" and view.provider_status == "completed" and view.ended
    assert view.results == ("file-cvaTdG", "file-HOWS94")
    assert view.expires_at is not None and view.expires_at.timestamp() == 1711557933


def test_an_expired_batch_has_ended_too():
    view = ADAPTER.read_batch(json.loads((DATA / "openai_batch_expired.json").read_text()))
    assert view.ended and view.provider_status == "expired"


def test_output_lines_are_classified_by_the_family_parse():
    results = {r.custom_id: r.result for r in ADAPTER.read_results((DATA / "openai_batch_output.jsonl").read_text())}
    assert set(results) == {"c17-a1", "c18-a1"}
    first = results["c17-a1"]
    assert first.outcome == OutcomeClass.answer and first.text == "The total is 42 units."
    assert first.usage.input_tokens == 22 and first.usage.output_tokens == 7
    assert first.http_status == 200 and first.finish_reason == "stop"
    assert '"custom_id": "c17-a1"' in first.raw_body  # the round keeps its line


def test_error_lines_name_their_cause():
    results = {r.custom_id: r.result for r in ADAPTER.read_results((DATA / "openai_batch_errors.jsonl").read_text())}
    refused, expired = results["c19-a1"], results["c20-a1"]
    assert refused.http_status == 400 and refused.outcome != OutcomeClass.answer
    assert expired.outcome == OutcomeClass.infra_error
    assert expired.error is not None and expired.error.startswith("batch entry expired: batch_expired")


def test_a_line_that_is_not_json_is_skipped_not_fatal():
    assert ADAPTER.read_results('not json\n{"custom_id": 3}\n') == []


def test_the_input_file_carries_each_sync_body_under_its_custom_id():
    endpoint = Endpoint("openai", "gpt-4o-mini", "https://api.openai.com/v1", None)
    line = ADAPTER.batch_line(endpoint, "c5-a2", ChatRequest([{"role": "user", "content": "hi"}]))
    assert isinstance(line, BatchLine) and line.custom_id == "c5-a2"
    written = json.loads(OpenAIBatch.jsonl([line]).decode())
    assert written == {"custom_id": "c5-a2", "method": "POST", "url": CHAT_PATH, "body": line.body}
    assert line.body["model"] == "gpt-4o-mini" and line.body["messages"][-1]["content"] == "hi"


def test_a_page_of_the_batch_list_gives_each_batch_with_its_label_count_and_time_and_the_next_cursor():
    """https://platform.openai.com/docs/api-reference/batch/list: `data` newest first, `after` = `last_id`
    while `has_more`; our label is `metadata.afpbench` (https://platform.openai.com/docs/api-reference/batch/create)."""
    page = ADAPTER.read_batch_list(json.loads((DATA / "openai_batch_list.json").read_text()))
    ours, other = page.views
    assert page.next == "batch_abc123"
    assert ours.provider_batch_id == "batch_ghi789" and ours.label == "afpbench 3f2a9c batch 7 5e1d0c2b9a84"
    assert ours.requests == 24 and ours.created_at is not None and ours.created_at.timestamp() == 1711475133
    assert not ours.ended and other.ended and other.label is None, "another's metadata is no label of ours"


def test_the_last_page_has_no_next_cursor():
    body = json.loads((DATA / "openai_batch_list.json").read_text())
    assert ADAPTER.read_batch_list({**body, "has_more": False}).next is None
