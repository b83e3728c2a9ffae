"""A batch publish sends, for every message after the first of its task and queue, what `send_task` would
have sent: the same headers and properties but for the task id, args and label. Real Celery app,
kombu's in-memory broker (the embedded mode's)."""

from __future__ import annotations

import json

import pytest

from afpbench.workers.celery_app import EXECUTE, SCORE, app, publish
from tests.unit.broker import drain

QUEUE = "exec.sim"
PER_MESSAGE_HEADERS = {"id", "root_id", "argsrepr", "origin"}


@pytest.fixture(autouse=True)
def empty_queues():
    drain([QUEUE, "score"])
    yield
    drain([QUEUE, "score"])


def test_replayed_messages_match_send_task():
    app.send_task(EXECUTE, args=[100], queue=QUEUE, argsrepr="(100,) one by one")
    (reference,) = drain([QUEUE])
    publish([(EXECUTE, [1], QUEUE, "(1,) s/m/A/F1#r1"), (EXECUTE, [2], QUEUE, "(2,) s/m/A/F2#r1"),
             (EXECUTE, [3], QUEUE), (SCORE, [4], "score", "(4,) s/m/A/F4#r1")])
    sent = drain([QUEUE])
    assert [json.loads(m.body)[0] for m in sent] == [[1], [2], [3]]
    ids = [m.headers["id"] for m in sent]
    assert len(set(ids)) == 3
    assert [m.headers["argsrepr"] for m in sent] == ["(1,) s/m/A/F1#r1", "(2,) s/m/A/F2#r1", "[3]"]
    for message in sent:
        assert message.headers["root_id"] == message.headers["id"]
        assert message.properties["correlation_id"] == message.headers["id"]
        assert message.delivery_info["routing_key"] == QUEUE
        assert set(message.headers) == set(reference.headers)
        assert {k: v for k, v in message.headers.items() if k not in PER_MESSAGE_HEADERS} == {
            k: v for k, v in reference.headers.items() if k not in PER_MESSAGE_HEADERS}
        assert json.loads(message.body)[1:] == json.loads(reference.body)[1:]
    (scored,) = drain(["score"])
    assert scored.headers["task"] == SCORE and json.loads(scored.body)[0] == [4]
