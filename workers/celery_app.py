"""The Celery app: explicit queues, explicit task names, reliability settings.

Messages carry ids only; SQL holds the state. acks_late + reject_on_worker_lost + prefetch 1 mean a
task whose worker dies is redelivered, and every task is idempotent, so redelivery is normal.
"""

from __future__ import annotations

from celery import Celery
from celery.signals import worker_process_init
from kombu import Exchange, Queue

from workers.settings import get_settings

PROVIDER_QUEUES = ("exec.openai", "exec.anthropic", "exec.gemini", "exec.sim")
QUEUES = (*PROVIDER_QUEUES, "score", "aggregate", "control")


def make_app() -> Celery:
    settings = get_settings()
    app = Celery("afpbench", broker=settings.broker_url, include=["workers.tasks"])
    exchange = Exchange("afpbench", type="direct")
    transport_options = {
        "visibility_timeout": settings.visibility_timeout_s,
        # Reliability fix: kombu scans for unacked messages of dead workers only every interval x throttle
        # (10 x 10 = 100 s by default), whatever the visibility timeout. Scan every tenth of the timeout
        # (1-10 s) so a killed worker's messages come back soon after the timeout, not minutes later.
        "unacked_restore_interval": max(1, min(10, settings.visibility_timeout_s // 10)),
        "unacked_restore_throttle": 1,
    }
    if settings.embedded:
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
        task_time_limit=settings.task_hard_time_limit_s,
        task_soft_time_limit=max(1, settings.task_hard_time_limit_s - 30),
        broker_transport_options=transport_options,
        broker_connection_retry_on_startup=True,
        worker_send_task_events=True,
        task_send_sent_event=True,
        worker_hijack_root_logger=False,
        task_serializer="json",
        accept_content=["json"],
        beat_schedule={
            "reconcile": {"task": "afpbench.reconcile", "schedule": settings.reconcile_interval_s,
                          "options": {"queue": "control"}},
        },
    )
    return app


app = make_app()


@worker_process_init.connect
def _fresh_connections(**_kwargs) -> None:
    # A forked pool child must not share the parent's database connections.
    from workers.db import dispose_engines

    dispose_engines()
