"""Anthropic's Message Batches read from bodies written to its documented shapes (tests/data/batch/README.md):
a succeeded entry means what the same sync answer means (the family's `parse`), an errored one what the
same sync error means, and a canceled or expired one is a failure naming its cause."""

from __future__ import annotations

import json
from pathlib import Path

from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import OutcomeClass

DATA = Path(__file__).parents[3] / "data" / "batch"
ADAPTER = adapter_for("anthropic")


def test_an_in_progress_batch_has_not_ended_and_names_no_results():
    view = ADAPTER.read_batch(json.loads((DATA / "anthropic_batch_in_progress.json").read_text()))
    assert not view.ended and view.results == () and view.provider_status == "in_progress"
    assert view.expires_at is not None and view.expires_at.isoformat().startswith("2024-09-25T18:37:24")


def test_an_ended_batch_names_its_results_url():
    view = ADAPTER.read_batch(json.loads((DATA / "anthropic_batch_ended.json").read_text()))
    assert view.ended and view.results[0].endswith("/msgbatch_013Zva2CMHLNnXjNJJKqJ2EF/results")


def test_results_are_classified_like_sync_answers_and_errors():
    text = (DATA / "anthropic_batch_results.jsonl").read_text()
    results = {r.custom_id: r.result for r in ADAPTER.read_results(text)}
    ok = results["c17-a1"]
    assert ok.outcome == OutcomeClass.answer and ok.text == "The total is 42 units."
    assert ok.usage.input_tokens == 11 and ok.usage.output_tokens == 36
    errored = results["c18-a1"]
    assert errored.http_status == 400 and errored.outcome != OutcomeClass.answer
    assert results["c19-a1"].error.startswith("batch entry cancelled")
    assert results["c20-a1"].error.startswith("batch entry expired")
    assert results["c20-a1"].outcome == OutcomeClass.infra_error


def test_the_batch_list_gives_each_batch_with_its_time_and_request_count_and_no_label():
    """https://docs.anthropic.com/en/api/listing-message-batches: `data` newest first, `after_id` = `last_id`
    while `has_more`; a Message Batch carries no metadata, so no label: its request count is the sum of
    `request_counts`."""
    page = ADAPTER.read_batch_list(json.loads((DATA / "anthropic_batch_list.json").read_text()))
    running, ended = page.views
    assert page.next is None, "has_more false: the last page"
    assert running.provider_batch_id == "msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d" and running.requests == 24
    assert running.created_at is not None and running.created_at.isoformat().startswith("2024-09-24T18:37:24")
    assert running.label is None and not running.ended
    assert ended.requests == 4 and ended.ended and ended.results[0].endswith("/results")
    assert not ADAPTER.labelled, "Anthropic's copies are found by time window and request count"
