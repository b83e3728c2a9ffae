"""The process's limiter: Redis when configured (shared by all workers), else in-memory."""

from __future__ import annotations

import threading

from afpbench.workers.limits.base import Limiter
from afpbench.workers.limits.in_memory import InMemoryLimiter
from afpbench.workers.settings import get_settings

_limiter: Limiter | None = None
_limiter_lock = threading.Lock()


def get_limiter() -> Limiter:
    """The process-wide limiter: Redis when configured (shared by all workers), else in-memory."""
    global _limiter
    with _limiter_lock:
        if _limiter is None:
            url = get_settings().limiter_redis_url
            if url:
                # Imported on first use: the embedded mode never loads the Redis client.
                from afpbench.workers.limits.in_redis import RedisLimiter

                _limiter = RedisLimiter(url)
            else:
                _limiter = InMemoryLimiter()
        return _limiter


def reset_limiter() -> None:
    global _limiter
    with _limiter_lock:
        _limiter = None
