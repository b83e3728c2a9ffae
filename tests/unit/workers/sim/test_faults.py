"""The simulator's fault primitives (workers/sim/faults.py): the strict token bucket and its Retry-After,
deterministic fault draws, the injector's per-key attempts and the fault configuration's checks."""

from __future__ import annotations

from collections import Counter

import pytest

from afpbench.workers.sim.faults import Fault, FaultConfig, FaultInjector, TokenBucket, draw_fault, retry_after_value


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_bucket_allows_burst_then_refuses_without_consuming():
    clock = FakeClock()
    bucket = TokenBucket(capacity=5, refill_per_s=10, clock=clock)
    admitted = [bucket.try_acquire() for _ in range(5)]
    assert all(a.allowed for a in admitted)
    assert [a.remaining for a in admitted] == [4, 3, 2, 1, 0]
    refused = [bucket.try_acquire() for _ in range(10)]
    assert not any(a.allowed for a in refused)
    assert refused[-1].retry_after_s == pytest.approx(0.1)  # refusals took nothing: still one token's wait


def test_token_bucket_refills_at_the_rate_and_caps_at_burst():
    clock = FakeClock()
    bucket = TokenBucket(capacity=3, refill_per_s=2, clock=clock)
    for _ in range(3):
        assert bucket.try_acquire().allowed
    clock.now += 0.25
    refused = bucket.try_acquire()
    assert not refused.allowed and refused.retry_after_s == pytest.approx(0.25)
    clock.now += 0.25
    assert bucket.try_acquire().allowed
    assert not bucket.try_acquire().allowed
    clock.now += 3600  # a long idle refills to the burst, not beyond
    assert sum(bucket.try_acquire().allowed for _ in range(10)) == 3


def test_retry_after_rounds_up_to_a_tenth_and_is_at_least_a_tenth():
    assert retry_after_value(0.0) == "0.1"
    assert retry_after_value(0.01) == "0.1"
    assert retry_after_value(0.1) == "0.1"
    assert retry_after_value(0.30000000000000004) == "0.3"
    assert retry_after_value(0.31) == "0.4"
    assert retry_after_value(7) == "7.0"


def test_fault_draws_are_deterministic_and_a_retry_can_succeed():
    config = FaultConfig(error_5xx_rate=0.5, seed=7)
    draws = [draw_fault(config, "cell-a", attempt) for attempt in range(30)]
    assert draws == [draw_fault(config, "cell-a", attempt) for attempt in range(30)]
    assert Fault.none in draws and Fault.error_5xx in draws
    assert draws != [draw_fault(FaultConfig(error_5xx_rate=0.5, seed=8), "cell-a", a) for a in range(30)]
    always = FaultConfig(content_filter_rate=1.0)
    assert {draw_fault(always, f"k{i}", 0) for i in range(50)} == {Fault.content_filter}
    assert {draw_fault(FaultConfig(), f"k{i}", 0) for i in range(50)} == {Fault.none}


def test_fault_rates_are_roughly_respected():
    config = FaultConfig(error_5xx_rate=0.1, timeout_rate=0.05, content_filter_rate=0.2, malformed_rate=0.05)
    counts = Counter(draw_fault(config, f"k{i}", 0) for i in range(4000))
    for fault, p in [
        (Fault.error_5xx, 0.1),
        (Fault.timeout, 0.05),
        (Fault.content_filter, 0.2),
        (Fault.malformed, 0.05),
        (Fault.none, 0.6),
    ]:
        assert abs(counts[fault] / 4000 - p) < 0.03, counts


def test_injector_counts_attempts_per_key_and_rotates_server_errors():
    injector = FaultInjector(FaultConfig())
    assert [injector.next_attempt("a"), injector.next_attempt("a"), injector.next_attempt("b")] == [0, 1, 0]
    assert [injector.next_server_error() for _ in range(4)] == [500, 502, 503, 500]
    injector.reset()
    assert injector.next_attempt("a") == 0


@pytest.mark.parametrize(
    "kwargs",
    [{"rate_per_min": 0}, {"burst": 0}, {"error_5xx_rate": 1.5}, {"latency_ms": -1}, {"timeout_rate": -0.1}],
)
def test_fault_config_rejects_impossible_values(kwargs):
    with pytest.raises(ValueError):
        FaultConfig(**kwargs)
