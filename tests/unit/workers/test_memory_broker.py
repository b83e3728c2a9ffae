"""The embedded broker (workers/memory_broker.py) wakes a waiting drain on a put and on an ack.

Each test gives the transport a 60 s polling interval: kombu's own in-memory transport would then see a
new message only after a minute, so a drain that delivers within its 5 s timeout was woken by the hook.
The queues are kombu's real in-memory ones (shared by every connection of the process), named per test.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue

from afpbench.workers.celery_app import app
from afpbench.workers.memory_broker import Transport

DRAIN_TIMEOUT_S = 5.0  # far below the 60 s poll, far above a wake's delay on a loaded machine


def _connection() -> Connection:
    return Connection("memory://", transport=Transport, transport_options={"polling_interval": 60.0})


def _queue() -> Queue:
    name = f"wake-{uuid.uuid4().hex[:8]}"
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


def _later(action, delay_s: float = 0.1) -> threading.Timer:
    timer = threading.Timer(delay_s, action)
    timer.start()
    return timer


def test_a_put_from_another_thread_wakes_a_waiting_drain():
    queue = _queue()
    received: list = []
    with _connection() as consumer_conn, _connection() as producer_conn:
        consumer = Consumer(consumer_conn.channel(), [queue], callbacks=[lambda body, m: received.append(body)],
                            accept=["json"])
        consumer.consume()
        producer = Producer(producer_conn.channel())
        timer = _later(lambda: producer.publish({"cell": 1}, exchange=queue.exchange,
                                                routing_key=queue.routing_key, serializer="json"))
        consumer_conn.drain_events(timeout=DRAIN_TIMEOUT_S)
        timer.join()
    assert received == [{"cell": 1}]


@pytest.mark.parametrize("second_sent", ["before the first is taken", "while the only slot is taken"])
def test_an_ack_that_frees_the_prefetch_slot_wakes_a_waiting_drain(second_sent):
    """Prefetch 1, as every worker thread has: the second message waits for the first one's ack, sent before
    the first is taken or while the slot is taken (a task sending its follow-up): the ack must wake the drain."""
    queue = _queue()
    received: list = []
    with _connection() as conn:
        channel = conn.channel()
        consumer = Consumer(channel, [queue], callbacks=[lambda body, m: received.append((body, m))],
                            accept=["json"])
        consumer.qos(prefetch_count=1)
        consumer.consume()
        producer = Producer(conn.channel())

        def send(cell: int) -> None:
            producer.publish({"cell": cell}, exchange=queue.exchange, routing_key=queue.routing_key,
                             serializer="json", declare=[queue])

        send(1)
        if second_sent == "before the first is taken":
            send(2)
        conn.drain_events(timeout=DRAIN_TIMEOUT_S)
        assert [body for body, _ in received] == [{"cell": 1}]
        timers = [_later(received[0][1].ack, delay_s=0.2)]
        if second_sent == "while the only slot is taken":
            timers.append(_later(lambda: send(2), delay_s=0.05))  # while the drain below waits, before the ack
        conn.drain_events(timeout=DRAIN_TIMEOUT_S)
        for timer in timers:
            timer.join()
    assert [body for body, _ in received] == [{"cell": 1}, {"cell": 2}]


def test_a_drain_with_nothing_to_deliver_times_out():
    queue = _queue()
    with _connection() as conn:
        Consumer(conn.channel(), [queue], callbacks=[lambda body, m: None], accept=["json"]).consume()
        with pytest.raises(TimeoutError):
            conn.drain_events(timeout=0.2)


def test_the_embedded_app_uses_it_and_shares_kombus_queues():
    """Celery's connections in embedded mode are this transport; a plain `memory://` connection (kombu's
    own transport) sees the same queues, so only the waiting differs."""
    queue = _queue()
    with app.connection_for_write() as conn:
        assert isinstance(conn.transport, Transport)
        Producer(conn.channel()).publish({"cell": 3}, exchange=queue.exchange, routing_key=queue.routing_key,
                                         serializer="json", declare=[queue])
    with Connection("memory://") as plain:
        assert not isinstance(plain.transport, Transport)
        message = plain.default_channel.basic_get(queue.name, no_ack=True)
    assert message is not None and message.decode() == {"cell": 3}
