"""The process's limiter: Redis when configured (shared by all workers), else in-memory.

On a Redis broker the limiter uses that Redis unless AFP_REDIS_URL names another. On any other broker
(RabbitMQ) only AFP_REDIS_URL can give the workers one limiter: without it each worker would count the
declared limits on its own and N workers would send N times the declared rate, so a worker refuses to
start and a sweep that declares limits is refused (`require_shared_limiter`)."""

from __future__ import annotations

import threading

from afpbench.workers.errors import SettingsError
from afpbench.workers.limits.base import Limiter
from afpbench.workers.limits.in_memory import InMemoryLimiter
from afpbench.workers.settings import Settings, get_settings

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


def require_shared_limiter(what: str, settings: Settings | None = None) -> None:
    """Raise SettingsError (one line, exit 2) when `what` (a worker, a sweep declaring limits) would run on
    a distributed broker with no Redis limiter shared by every worker."""
    settings = settings or get_settings()
    if settings.embedded or settings.limiter_redis_url:
        return
    scheme = settings.broker_url.split("://", 1)[0]
    raise SettingsError(
        f"AFP_BROKER_URL is {scheme}:// and AFP_REDIS_URL is not set: {what} needs the Redis limiter every "
        "worker shares; set AFP_REDIS_URL (e.g. redis://127.0.0.1:6379/0), or each worker counts the declared "
        "limits alone and N workers send N times the declared rate (docs/OPERATIONS.md, \"Brokers\")"
    )
