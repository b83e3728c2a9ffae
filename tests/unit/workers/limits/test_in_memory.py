"""The in-memory limiter's rules (injected clock, no sleeping), and the pool key."""

from __future__ import annotations

import pytest

from afpbench.workers.limits.base import Limits, pool_key
from afpbench.workers.limits.in_memory import InMemoryLimiter


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_request_bucket_allows_burst_then_waits_for_refill():
    clock = Clock()
    limiter = InMemoryLimiter(clock)
    limits = Limits(requests_per_min=60, burst=3)
    grants = [limiter.acquire("p", limits) for _ in range(4)]
    assert [g.granted for g in grants] == [True, True, True, False]
    assert grants[3].wait_s == pytest.approx(1.0)
    clock.now += 1.0
    assert limiter.acquire("p", limits).granted


def test_in_flight_cap_and_lease_release():
    limiter = InMemoryLimiter(Clock())
    limits = Limits(max_in_flight=2)
    a, b, c = (limiter.acquire("p", limits) for _ in range(3))
    assert a.granted and b.granted and not c.granted
    limiter.release("p", a.lease)
    assert limiter.acquire("p", limits).granted


def test_cool_down_after_429_blocks_the_whole_pool():
    clock = Clock()
    limiter = InMemoryLimiter(clock)
    limiter.cool_down("p", 5.0)
    g = limiter.acquire("p", Limits())
    assert not g.granted and g.wait_s == pytest.approx(5.0)
    assert limiter.acquire("other", Limits()).granted
    clock.now += 5.01
    assert limiter.acquire("p", Limits()).granted


def test_token_budget_is_estimated_then_corrected_with_reported_usage():
    clock = Clock()
    limiter = InMemoryLimiter(clock)
    limits = Limits(tokens_per_min=1000)
    g = limiter.acquire("p", limits, tokens=900)
    assert g.granted
    assert not limiter.acquire("p", limits, tokens=500).granted
    limiter.release("p", g.lease, tokens_estimated=900, tokens_used=100)  # 800 given back
    assert limiter.acquire("p", limits, tokens=500).granted


def test_pool_key_fingerprints_the_key_never_contains_it():
    key = pool_key("openai", "https://api.openai.com/v1", "sk-secret-value-123")
    assert "sk-secret-value-123" not in key
    assert key != pool_key("openai", "https://api.openai.com/v1", "sk-other")


def test_reservation_paces_waiting_callers_one_slot_each():
    """Many waiting tasks each get their own future slot: no stampede when a token refills."""
    clock = Clock()
    limiter = InMemoryLimiter(clock)
    limits = Limits(requests_per_min=60, burst=1)
    assert limiter.acquire("p", limits, reserve_s=30).granted
    waits = [limiter.acquire("p", limits, reserve_s=30) for _ in range(3)]
    assert all(w.prepaid and not w.granted for w in waits)
    assert [round(w.wait_s, 6) for w in waits] == [1.0, 2.0, 3.0]
    clock.now += 3.0
    assert limiter.acquire("p", limits, prepaid=True).granted  # a prepaid caller is not charged again
    beyond = limiter.acquire("p", limits, reserve_s=0.5)
    assert not beyond.granted and not beyond.prepaid  # too far ahead: nothing reserved


def test_refund_gives_a_never_sent_request_back_to_the_bucket():
    """A duplicate message that lost the claim after its grant must not spend the pool's rate budget."""
    clock = Clock()
    limiter = InMemoryLimiter(clock)
    limits = Limits(requests_per_min=60, burst=2)
    assert limiter.acquire("p", limits).granted and limiter.acquire("p", limits).granted
    assert not limiter.acquire("p", limits).granted  # bucket empty
    limiter.refund("p", limits)
    assert limiter.acquire("p", limits).granted  # the refunded slot, with no time passing
    limiter.refund("p", limits)
    limiter.refund("p", limits)
    limiter.refund("p", limits)  # never above the burst
    assert limiter.acquire("p", limits).granted and limiter.acquire("p", limits).granted
    assert not limiter.acquire("p", limits).granted
