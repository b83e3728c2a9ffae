"""The global limiter in Redis: atomic across concurrent clients, leases expire, cool-down is shared."""

from __future__ import annotations

import threading
import time

import pytest

from afpbench.workers.limits.base import Limits
from afpbench.workers.limits.in_redis import RedisLimiter

pytestmark = pytest.mark.integration


def test_burst_is_never_exceeded_by_concurrent_clients(fresh_redis):
    limits = Limits(requests_per_min=6, burst=10)  # refill is negligible during the test
    granted = []
    lock = threading.Lock()

    def hammer():
        limiter = RedisLimiter(fresh_redis)  # one connection per "worker"
        for _ in range(10):
            if limiter.acquire("pool-a", limits).granted:
                with lock:
                    granted.append(1)

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(granted) == 10


def test_in_flight_leases_expire_so_a_dead_worker_cannot_hold_a_slot(fresh_redis):
    limiter = RedisLimiter(fresh_redis, lease_ttl_s=0.5)
    limits = Limits(max_in_flight=1)
    first = limiter.acquire("pool-b", limits)
    assert first.granted and first.lease
    assert not limiter.acquire("pool-b", limits).granted  # the "dead" worker never releases
    time.sleep(0.6)
    assert limiter.acquire("pool-b", limits).granted


def test_a_slow_models_call_keeps_its_slot_past_the_default_lease(fresh_redis):
    """A call that may take longer than the limiter's lease TTL (a CPU model, timeout_s 600) asks for a
    longer lease: the slot is not handed to a third request while the call is still running."""
    limiter = RedisLimiter(fresh_redis, lease_ttl_s=0.5)
    limits = Limits(max_in_flight=1)
    slow = limiter.acquire("pool-slow", limits, lease_s=1.5)
    assert slow.granted and slow.lease
    time.sleep(0.7)  # past the default TTL, within the call's
    assert limiter.acquire("pool-slow", limits).reason == "max in flight"
    time.sleep(1.0)  # the lease_s is a bound too: a dead worker's slot still comes back
    assert limiter.acquire("pool-slow", limits).granted


def test_cool_down_is_seen_by_every_client(fresh_redis):
    a, b = RedisLimiter(fresh_redis), RedisLimiter(fresh_redis)
    a.cool_down("pool-c", 2.0)
    g = b.acquire("pool-c", Limits())
    assert not g.granted and 1.0 < g.wait_s <= 2.0


def test_refill_rate_is_respected(fresh_redis):
    limiter = RedisLimiter(fresh_redis)
    limits = Limits(requests_per_min=600, burst=1)  # one every 0.1 s
    assert limiter.acquire("pool-d", limits).granted
    denied = limiter.acquire("pool-d", limits)
    assert not denied.granted and 0 < denied.wait_s <= 0.1
    time.sleep(denied.wait_s + 0.02)
    assert limiter.acquire("pool-d", limits).granted


def test_reservations_space_callers_at_the_rate(fresh_redis):
    limiter = RedisLimiter(fresh_redis)
    limits = Limits(requests_per_min=600, burst=2)
    grants = [limiter.acquire("pool-e", limits, reserve_s=5) for _ in range(5)]
    assert [g.granted for g in grants[:2]] == [True, True]
    waits = [g.wait_s for g in grants[2:]]
    assert all(g.prepaid for g in grants[2:])
    assert waits == sorted(waits) and 0.05 < waits[0] <= 0.1 and 0.25 < waits[2] <= 0.3
    assert limiter.acquire("pool-e", limits, prepaid=True).granted


def test_refund_returns_one_request_to_the_shared_bucket_capped_at_the_burst(fresh_redis):
    a, b = RedisLimiter(fresh_redis), RedisLimiter(fresh_redis)
    limits = Limits(requests_per_min=6, burst=2)  # refill 0.1/s: negligible within the test
    assert a.acquire("pool-r", limits).granted and b.acquire("pool-r", limits).granted
    assert not a.acquire("pool-r", limits).granted
    b.refund("pool-r", limits)  # another worker's duplicate gave its slot back
    assert a.acquire("pool-r", limits).granted
    for _ in range(5):
        b.refund("pool-r", limits)
    granted = sum(a.acquire("pool-r", limits).granted for _ in range(4))
    assert granted == 2, "refunds never lift the bucket above its burst"


def test_a_held_lease_admits_later_rounds_without_a_second_slot(fresh_redis):
    """A conversation holds one in-flight slot for its whole life: later rounds pass it as `holding`,
    pay rate budget only, and keep the lease alive (the Lua script, as every worker sees it)."""
    limiter, other = RedisLimiter(fresh_redis, lease_ttl_s=0.6), RedisLimiter(fresh_redis)
    limits = Limits(max_in_flight=1, requests_per_min=60, burst=2)
    first = limiter.acquire("pool-h", limits)
    assert first.granted and first.lease and limiter.in_flight("pool-h") == 1
    later = limiter.acquire("pool-h", limits, holding=first.lease)
    assert later.granted and later.lease is None and limiter.in_flight("pool-h") == 1
    assert other.acquire("pool-h", limits).reason == "max in flight"
    rate = limiter.acquire("pool-h", limits, holding=first.lease)  # burst of 2 spent: rate still applies
    assert not rate.granted and rate.reason == "rate"
    time.sleep(0.4)
    limiter.acquire("pool-h", limits, reserve_s=5, holding=first.lease)  # pushes the lease's expiry out
    time.sleep(0.4)  # past the first expiry, within the renewed one
    assert other.acquire("pool-h", limits).reason == "max in flight"
    limiter.release("pool-h", first.lease)
    assert limiter.in_flight("pool-h") == 0
