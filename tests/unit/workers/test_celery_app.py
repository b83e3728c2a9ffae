"""The Celery app's broker rules: the supported schemes, a URL's password never shown."""

from __future__ import annotations

import pytest

from afpbench.workers.celery_app import check_broker_url, mask_url_password
from afpbench.workers.errors import SettingsError


@pytest.mark.parametrize("url", ["memory://localhost/", "redis://h:6379/0", "rediss://h:6380/0", "amqp://u:p@h//",
                                 "amqps://u:p@h:5671/v", "AMQP://h//"])
def test_supported_brokers_pass(url):
    check_broker_url(url)


@pytest.mark.parametrize("url", ["kafka://h:9092", "foo://x", "sqs://", "h:6379", "", "pyamqp://h//"])
def test_an_unsupported_broker_names_the_supported_schemes(url):
    """Rule: only Redis and RabbitMQ (and the embedded broker) are supported; anything else is one line."""
    with pytest.raises(SettingsError) as refused:
        check_broker_url(url)
    assert "unsupported broker" in str(refused.value) and "amqp://" in str(refused.value)


def test_a_refused_url_shows_no_password():
    with pytest.raises(SettingsError) as refused:
        check_broker_url("kafka://user:s3cret-pw@h:9092")
    assert "s3cret-pw" not in str(refused.value) and "user:***@h:9092" in str(refused.value)
    assert mask_url_password("amqp://h//") == "amqp://h//"
