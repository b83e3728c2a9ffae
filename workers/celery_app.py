"""The Celery app: explicit queues, explicit task names, reliability settings.

Messages carry ids only; SQL holds the state. acks_late + reject_on_worker_lost + prefetch 1 mean a
task whose worker dies is redelivered, and every task is idempotent, so redelivery is normal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypedDict

from celery import Celery
from celery.signals import worker_process_init
from kombu import Exchange, Queue
from kombu.exceptions import OperationalError as BrokerError
from sqlalchemy.orm import configure_mappers

from afpbench.workers.errors import ServiceUnavailable, SettingsError
from afpbench.workers.memory_broker import Transport as MemoryBroker
from afpbench.workers.message_replay import publish_replayed
from afpbench.workers.providers.families import EXEC_QUEUES
from afpbench.workers.settings import get_settings, soft_before
from afpbench.workers.store.db import dispose_engines

QUEUES = (*EXEC_QUEUES, "score", "aggregate", "control")

# Registered task names. Services send tasks by these names (`send`, `publish`), so nothing below the
# task module imports it: workers/tasks.py calls the services, never the other way round.
EXECUTE = "afpbench.execute"
SCORE = "afpbench.score"
AGGREGATE = "afpbench.aggregate"
RECONCILE = "afpbench.reconcile"
BATCHES = "afpbench.batches"  # submit and poll the batch lane's provider batches (workers/cells/batch_poll.py)


def make_app() -> Celery:
    settings = get_settings()
    app = Celery("afpbench", broker=settings.broker_url, include=["afpbench.workers.tasks"])
    exchange = Exchange("afpbench", type="direct")
    transport_options: dict[str, float] = {
        "visibility_timeout": settings.visibility_timeout_s,
        # Kombu scans for unacked messages of dead workers only every interval x throttle
        # (10 x 10 = 100 s by default), whatever the visibility timeout. Scan every tenth of the timeout
        # (1-10 s) so a killed worker's messages come back soon after the timeout, not minutes later.
        "unacked_restore_interval": max(1, min(10, settings.visibility_timeout_s // 10)),
        "unacked_restore_throttle": 1,
    }
    if settings.embedded:
        # The longest a drain waits between looks; the embedded broker is woken sooner by every put and
        # ack (workers/memory_broker.py), so this only bounds what could bypass those hooks.
        transport_options["polling_interval"] = 0.01
    app.conf.update(
        task_queues=[Queue(q, exchange, routing_key=q) for q in QUEUES],
        task_default_queue="control",
        task_default_exchange="afpbench",
        task_default_routing_key="control",
        task_create_missing_queues=False,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        result_backend=None,
        # The default for tasks that call no model; execute and score messages carry their own limits,
        # derived from the sweep's timeouts (workers/sweeps/time_limits.py).
        task_time_limit=settings.task_hard_time_limit_s,
        task_soft_time_limit=soft_before(settings.task_hard_time_limit_s),
        broker_transport_options=transport_options,
        broker_transport=MemoryBroker if settings.embedded else None,
        broker_connection_retry_on_startup=True,
        # Task events feed Flower and cost a publish per task state (received, started, succeeded:
        # three per cell), so a worker sends them only when asked: `afpbench worker --events`, or
        # Flower's own enable_events broadcast when it starts. No "task-sent" events: one extra publish
        # per message at release (Flower lists a task from "received" on; queue depths come from the broker).
        worker_send_task_events=False,
        task_send_sent_event=False,
        worker_hijack_root_logger=False,
        task_serializer="json",
        accept_content=["json"],
        beat_schedule={
            "reconcile": {"task": RECONCILE, "schedule": settings.reconcile_interval_s,
                          "options": {"queue": "control"}},
            "batches": {"task": BATCHES, "schedule": settings.batch_poll_s, "options": {"queue": "control"}},
        },
    )
    return app


def survive_broker_loss() -> None:
    """When the Redis broker goes away, the worker closes its
    channel and tries to push its unacknowledged messages back; with the connection already released
    that raises AttributeError, which Celery takes for an unrecoverable error, and the worker exits.
    Treat it as what it is, an unreachable broker: skip the push-back and keep the worker reconnecting.
    The messages come back after the visibility timeout, or were lost with the broker, in which case
    `afpbench resume` and the reconciler send them again from SQL."""
    try:
        from kombu.transport import redis as kombu_redis
    except ImportError:  # pragma: no cover - redis extra not installed
        return
    original = kombu_redis.QoS.restore_unacked
    if getattr(original, "afpbench_guarded", False):
        return

    def restore_unacked(self, client=None):
        try:
            return original(self, client)
        except AttributeError:
            logging.getLogger(__name__).warning("broker connection gone; unacked messages left to redelivery")
            return None

    # A marker on the patch, so that a second call does not wrap the wrapper.
    restore_unacked.afpbench_guarded = True  # type: ignore[attr-defined]
    kombu_redis.QoS.restore_unacked = restore_unacked  # type: ignore[method-assign]  # deliberate monkeypatch

    # The same for an ack or a reject sent while the broker is away (an ack seen once in four
    # broker-loss runs, a reject once in three: a pool thread's call raised ConnectionError and the
    # worker exited). Skipping it is safe: either the broker lost the message with everything else, or
    # it stays in the unacked index, comes back after the visibility timeout, and the idempotent task
    # finds its cell already done.
    import redis.exceptions as redis_errors

    lost = (redis_errors.ConnectionError, redis_errors.TimeoutError, AttributeError)

    def tolerant(method, what: str):
        def call(self, delivery_tag, *args, **kwargs):
            try:
                return method(self, delivery_tag, *args, **kwargs)
            except lost as exc:
                logging.getLogger(__name__).warning("%s not delivered (%s); the message may come back",
                                                    what, type(exc).__name__)
                return None
        return call

    kombu_redis.QoS.ack = tolerant(kombu_redis.QoS.ack, "ack")  # type: ignore[method-assign]
    kombu_redis.QoS.reject = tolerant(kombu_redis.QoS.reject, "reject")  # type: ignore[method-assign]
    _reuse_redis_client(kombu_redis)


def _reuse_redis_client(kombu_redis) -> None:
    """kombu builds a new redis-py client object for each ack, each unacked-index update and each
    publish outside a producer (Channel.conn_or_acquire): about 0.1 ms of Python per object (its
    response-callback table), several per task, 4 % of a busy worker's CPU. A client is thread-safe for
    commands and pipelines (each takes a connection from the channel's pool), so each channel keeps
    one, built again if the channel's pool was replaced (after a reconnect)."""
    from contextlib import contextmanager

    @contextmanager
    def conn_or_acquire(self, client=None):
        if client:
            yield client
            return
        cached = self.__dict__.get("_afpbench_client")
        if cached is None or cached.connection_pool is not self.pool:
            cached = self.__dict__["_afpbench_client"] = self._create_client()
        yield cached

    kombu_redis.Channel.conn_or_acquire = conn_or_acquire  # type: ignore[method-assign]  # deliberate monkeypatch


if not get_settings().embedded:
    # The embedded broker is kombu's in-memory transport: the Redis transport and redis-py (~130 ms of
    # imports) are loaded only for a broker that can go away.
    survive_broker_loss()
app = make_app()
# Thread-pool workers resolve retries through the default app; without this a retry published to
# Celery's built-in default broker (amqp://localhost) instead of ours.
app.set_default()


# The brokers afpbench supports (docs/OPERATIONS.md, "Brokers"): the embedded in-memory one, Redis and
# RabbitMQ (AMQP 0-9-1). kombu knows more transports, but none of them is tested here, and some (kafka://)
# fail with a NameError when their client library is missing.
SUPPORTED_BROKERS = {"memory": "embedded", "redis": "Redis", "rediss": "Redis over TLS",
                     "amqp": "RabbitMQ", "amqps": "RabbitMQ over TLS"}


def check_broker_url(url: str) -> None:
    """Raise SettingsError (one line, exit 2) naming the supported schemes unless `url` has one."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in SUPPORTED_BROKERS:
        supported = ", ".join(f"{s}:// ({what})" for s, what in SUPPORTED_BROKERS.items())
        raise SettingsError(f"AFP_BROKER_URL {mask_url_password(url)!r}: unsupported broker "
                            f"{scheme + '://' if scheme else 'URL'}; supported: {supported}")


def mask_url_password(url: str) -> str:
    """`url` with the password of its user part (scheme://user:password@host) replaced by ***."""
    head, sep, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not sep or not at or ":" not in userinfo:
        return url
    return f"{head}://{userinfo.split(':', 1)[0]}:***@{host}"


def check_broker(timeout_s: float = 5.0) -> None:
    """Raise ServiceUnavailable unless the broker answers within `timeout_s` and accepts our login: run
    before a sweep is written (its cells would otherwise wait in SQL for a broker nobody knew was down)
    and before a worker starts (Celery would retry the connection for ever). An unsupported scheme is a
    SettingsError naming the supported ones."""
    check_broker_url(get_settings().broker_url)
    with app.connection_for_write(connect_timeout=timeout_s) as conn:
        try:
            # kombu's stub says int; at runtime the timeout is seconds compared as a number, a float works.
            conn.ensure_connection(max_retries=0, timeout=timeout_s)  # type: ignore[arg-type]  # see above
        except (BrokerError, OSError) + conn.connection_errors + conn.channel_errors as exc:
            reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            # RabbitMQ refuses a wrong user or password, or a vhost it does not know, as ACCESS_REFUSED /
            # NOT_ALLOWED: the broker answered, and said no.
            refused = any(word in reason for word in ("ACCESS_REFUSED", "NOT_ALLOWED", "AUTH", "WRONGPASS"))
            what = "refused the login" if refused else "does not answer"
            raise ServiceUnavailable(
                f"broker {conn.as_uri()} {what} ({reason}); {'fix' if refused else 'start it or fix'} AFP_BROKER_URL"
            ) from None


class _Labelled(TypedDict, total=False):
    argsrepr: str  # the message's Flower label (see publish)
    time_limit: int  # per-message time limits (workers/sweeps/time_limits.py)
    soft_time_limit: int


# A message: (task name, args, queue[, label[, time limits]]); time limits as TaskLimits.options().
Message = tuple[str, list, str] | tuple[str, list, str, str] | tuple[str, list, str, str, dict[str, int] | None]


def send(task_name: str, args: list, queue: str, label: str | None = None,
         limits: dict[str, int] | None = None, countdown: float | None = None) -> None:
    """Send one task message by its registered name (`label`: its Flower argsrepr, see publish;
    `limits`: its time limits, else the app's defaults; `countdown`: seconds before it may run)."""
    options: _Labelled = {"argsrepr": label} if label else {}
    if limits:
        options.update(limits)  # type: ignore[typeddict-item]  # keys are time_limit, soft_time_limit
    app.send_task(task_name, args=args, queue=queue, countdown=countdown, **options)


# The embedded mode's second process (workers/embedded_pair.py) takes its share of the messages here:
# given the messages, the hook returns those this process sends itself. None: every message is sent here.
Divert = Callable[[Sequence["Message"]], Sequence["Message"]]
_divert: Divert | None = None


def divert_publishing(hook: Divert | None) -> None:
    global _divert
    _divert = hook


def publish(messages: Sequence[Message]) -> None:
    """Send (task name, args, queue[, label[, time-limit options]]) messages on one producer, pipelined:
    on Redis, kombu's publish batch sends up to a thousand LPUSHes per round trip (one connection, no
    per-message client), and only the first message of each task, queue and options is built by Celery
    (workers/message_replay.py). A 100,000-cell release took about 3 ms a message one by one.

    A label becomes the message's `argsrepr`, which Flower shows as the task's arguments: the ids alone
    cannot tell which cell is stuck. It changes nothing the task receives; it must never hold secrets or
    model text (callers build it from sweep id, model label, condition, fixture and repeat)."""
    if _divert is not None:
        messages = _divert(messages)
    publish_here(messages)


def publish_here(messages: Sequence[Message]) -> None:
    """`publish` on this process's broker connection, whatever a divert hook would do."""
    if not messages:
        return
    with app.producer_or_acquire() as producer, producer.batch(max_size=1000):
        publish_replayed(producer, [_full(message) for message in messages], app.send_task,
                         app.amqp.argsrepr_maxsize)


def _full(message: Message) -> tuple[str, list, str, str | None, dict[str, int] | None]:
    """A message with its optional label and time-limit options spelt out (None where not given)."""
    label = message[3] if len(message) > 3 else None
    limits = message[4] if len(message) > 4 else None  # type: ignore[misc]  # a 5-tuple here
    return message[0], message[1], message[2], label, limits


@worker_process_init.connect
def _fresh_connections(**_kwargs) -> None:
    # A forked pool child must not share the parent's database connections.
    dispose_engines()
    # Configure the ORM mappers now, not inside the child's first task, where a time
    # limit interrupting the configuration leaves every mapper of that child failing for good.
    configure_mappers()
