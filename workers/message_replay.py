"""Many messages of one task to one queue: Celery builds the first, the others repeat its publish.

`app.send_task` routes, builds headers and properties and wraps the publish in a retry for every
message: 0.23 ms of CPU each, 23 s for a 100,000-cell release. The messages of a release differ only in
task id, args and label, so the first of each (task, queue) goes through `send_task` with a producer
that records the publish call, and the others are that call with a new id, args and label: the same
routing, options and properties as `send_task` gives them. Celery's before/after_task_publish signals
fire for the first message of a group only (afpbench connects none).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from celery.utils.saferepr import saferepr
from kombu.utils.uuid import uuid


@dataclass(frozen=True)
class _Publish:
    """One recorded `producer.publish(body, **kwargs)` of a protocol-2 task message."""

    body: tuple  # (args, kwargs, embed)
    kwargs: dict[str, Any]

    def again(self, producer: Any, args: list, label: str) -> None:
        first_id = self.kwargs["headers"]["id"]
        task_id = uuid()
        headers = {**self.kwargs["headers"], "id": task_id, "argsrepr": label}
        if headers.get("root_id") == first_id:  # no parent task: the message is its own root
            headers["root_id"] = task_id
        kwargs = {**self.kwargs, "headers": headers, "declare": []}  # the first one declared the queue
        if kwargs.get("correlation_id") == first_id:
            kwargs["correlation_id"] = task_id
        if "argsrepr" in kwargs:
            kwargs["argsrepr"] = label
        producer.publish((args, *self.body[1:]), **kwargs)


class _RecordingProducer:
    """The producer `send_task` is handed: forwards everything, remembers the publish call."""

    def __init__(self, producer: Any) -> None:
        self._producer = producer
        self.recorded: _Publish | None = None

    def publish(self, body: Any, **kwargs: Any) -> Any:
        if isinstance(body, tuple) and len(body) == 3 and "id" in kwargs.get("headers", {}):
            self.recorded = _Publish(body, kwargs)
        return self._producer.publish(body, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._producer, name)


def publish_replayed(producer: Any, messages: list[tuple[str, list, str, str | None, dict[str, int] | None]],
                     send_task: Callable[..., Any], argsrepr_maxsize: int) -> None:
    """Publish (task name, args, queue, label, send options) on `producer`; `send_task` is the app's, for
    firsts. Messages with other options (e.g. the time limits derived per model) are another group."""
    firsts: dict[tuple, _Publish | None] = {}
    for task_name, args, queue, label, options in messages:
        text = label if label else saferepr(args, argsrepr_maxsize)
        group = (task_name, queue, tuple(sorted((options or {}).items())))
        recorded = firsts.get(group)
        if recorded is not None:
            recorded.again(producer, args, text)
            continue
        recorder = _RecordingProducer(producer)
        # No recording (a future Celery with another message protocol): every message takes send_task.
        send_task(task_name, args=args, queue=queue, producer=recorder,
                  **({"argsrepr": label} if label else {}), **(options or {}))
        firsts[group] = recorder.recorded
