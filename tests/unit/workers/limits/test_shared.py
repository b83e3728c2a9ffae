"""The process's limiter and the rule that declared limits are counted in one place for every worker."""

from __future__ import annotations

import pytest

from afpbench.workers.errors import SettingsError
from afpbench.workers.limits.shared import require_shared_limiter
from afpbench.workers.settings import Settings


@pytest.mark.parametrize("broker, redis", [
    ("memory://localhost/", None),  # embedded: one process, one limiter
    ("redis://127.0.0.1:6379/0", None),  # the broker's Redis is the shared limiter
    ("amqp://guest:guest@127.0.0.1:5672//", "redis://127.0.0.1:6379/3"),
])
def test_a_shared_limiter_or_one_process_is_accepted(broker, redis):
    require_shared_limiter("a worker", Settings(broker_url=broker, redis_url=redis))


def test_rabbitmq_without_a_redis_limiter_is_refused_naming_the_setting():
    """Rule: on a broker other than Redis, AFP_REDIS_URL is required (else N workers send N x the rate)."""
    with pytest.raises(SettingsError) as refused:
        require_shared_limiter("a worker", Settings(broker_url="amqp://guest:guest@127.0.0.1:5672//", redis_url=None))
    message = str(refused.value)
    assert "AFP_REDIS_URL" in message and "amqp://" in message and "a worker" in message
    assert "guest:guest" not in message
