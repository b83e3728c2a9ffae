"""Finding a submission's copy in a provider's batch list (workers/providers/batch.py), over pages read from
the documented list bodies (tests/data/batch/README.md): the search reads pages newest first until one
holds only batches older than the submission (less the clock skew) or the list ends, reads on to the end
of a list that does not run newest first, and never reads without end; a provider without labels
(Anthropic) matches by time window and request count."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from afpbench.workers.providers.batch import CLOCK_SKEW, MAX_LIST_PAGES, BatchPage, Submission, listed_since
from afpbench.workers.providers.batch_http import BatchFault
from afpbench.workers.providers.families import adapter_for

DATA = Path(__file__).parents[3] / "data" / "batch"
OPENAI_PAGE = adapter_for("openai").read_batch_list(json.loads((DATA / "openai_batch_list.json").read_text()))
ANTHROPIC = adapter_for("anthropic").read_batch_list(json.loads((DATA / "anthropic_batch_list.json").read_text()))


def test_the_search_stops_at_the_first_page_older_than_the_submission():
    newest, older = OPENAI_PAGE.views
    pages = {None: BatchPage((newest,), "p2"), "p2": BatchPage((older,), "p3")}
    read: list = []
    found = listed_since(lambda cursor: read.append(cursor) or pages[cursor], newest.created_at)
    assert found == [newest] and read == [None, "p2"], "page p3 is never asked for"


def test_a_list_not_newest_first_is_read_to_its_end():
    newest, older = OPENAI_PAGE.views
    pages = {None: BatchPage((older,), "p2"), "p2": BatchPage((older,), "p3"), "p3": BatchPage((newest,), None)}
    assert listed_since(lambda cursor: pages[cursor], newest.created_at) == [newest], "an old page is no end here"


def test_a_batch_made_within_the_clock_skew_before_the_submission_is_still_found():
    newest, _ = OPENAI_PAGE.views
    since = newest.created_at + CLOCK_SKEW - timedelta(seconds=1)
    assert listed_since(lambda cursor: BatchPage((newest,), None), since) == [newest]


def test_a_list_without_end_fails_the_search_instead_of_reading_forever():
    newest, _ = OPENAI_PAGE.views
    with pytest.raises(BatchFault, match="batches listed since"):
        listed_since(lambda cursor: BatchPage((newest,), "again"), newest.created_at)
    assert MAX_LIST_PAGES >= 10


def test_without_a_label_a_copy_is_one_made_in_the_window_with_the_request_count():
    running, ended = ANTHROPIC.views
    submission = Submission("unused", running.created_at - timedelta(minutes=1), 24)
    now = running.created_at + timedelta(minutes=10)
    assert submission.made_by(running, now)
    assert not submission.made_by(ended, now), "made a month earlier, 4 requests"
    assert not Submission("unused", submission.since, 23).made_by(running, now), "another request count"
    assert not Submission("unused", running.created_at + CLOCK_SKEW + timedelta(seconds=1), 24).made_by(running, now)
