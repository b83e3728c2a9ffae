"""A worker survives acks and rejects sent while the Redis broker is gone (docs/RELIABILITY.md: broker
loss). Kombu's own QoS raises ConnectionError there, which Celery takes for a fatal error and the worker
exits; workers/celery_app.py:survive_broker_loss makes both calls log and return, since the message either
went with the broker or comes back after the visibility timeout to an idempotent task."""

from __future__ import annotations

import logging
import socket

import pytest
import redis
from kombu import Connection

from afpbench.workers.celery_app import survive_broker_loss

# Importing the app applies the guards for a Redis broker; the tests run with the embedded settings.
survive_broker_loss()

pytestmark = pytest.mark.integration


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("call", ["ack", "reject", "reject-requeue"])
def test_ack_and_reject_to_a_lost_broker_log_instead_of_raising(fresh_redis, caplog, call):
    with Connection(fresh_redis) as conn:
        channel = conn.channel()
        qos = channel.qos
        # The broker goes away under a live channel: its pool now points where nothing listens.
        channel._pool = redis.ConnectionPool(host="127.0.0.1", port=_dead_port(), socket_connect_timeout=0.5)
        channel._client = None
        with caplog.at_level(logging.WARNING, logger="afpbench.workers.celery_app"):
            if call == "ack":
                assert qos.ack("tag") is None
            else:
                assert qos.reject("tag", requeue=call == "reject-requeue") is None
    assert f"{call.split('-')[0]} not delivered (ConnectionError)" in caplog.text
