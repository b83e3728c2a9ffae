"""The in-memory limiter of the embedded mode (one process): token buckets, in-flight leases, cool-down."""

from __future__ import annotations

import threading
import time
import uuid

from afpbench.workers.limits.base import Grant, Limiter, Limits


class _Bucket:
    """Token bucket: capacity `burst`, refilled at rate/60 per second."""

    def __init__(self, rate_per_min: float, burst: float, now: float):
        self.rate = rate_per_min / 60.0
        self.capacity = float(burst)
        self.level = float(burst)
        self.at = now

    def _refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait_for(self, amount: float, now: float) -> float:
        # The level may be negative: slots already reserved for later moments.
        self._refill(now)
        if self.level >= amount:
            return 0.0
        return (amount - self.level) / self.rate

    def take(self, amount: float) -> None:
        self.level -= amount

    def give_back(self, amount: float) -> None:
        self.level = min(self.capacity, self.level + amount)


class InMemoryLimiter(Limiter):
    """The embedded-mode limiter: one process, the same rules as the Redis one."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._requests: dict[str, _Bucket] = {}
        self._tokens: dict[str, _Bucket] = {}
        self._in_flight: dict[str, set[str]] = {}
        self._cool_until: dict[str, float] = {}

    def acquire(
        self, pool: str, limits: Limits, tokens: int = 0, *, reserve_s: float = 0.0, prepaid: bool = False,
        holding: str | None = None, lease_s: float | None = None,
    ) -> Grant:
        with self._lock:
            now = self._clock()
            cool = self._cool_until.get(pool, 0.0) - now
            if cool > 0:
                return Grant(False, cool, reason="cool-down after a 429", prepaid=prepaid)
            flights = self._in_flight.setdefault(pool, set())
            held = holding is not None and holding in flights
            if not held and limits.max_in_flight is not None and len(flights) >= limits.max_in_flight:
                return Grant(False, 0.25, reason="max in flight", prepaid=prepaid)
            if not prepaid:
                waits = []
                req = tok = None
                if limits.requests_per_min:
                    req = self._requests.setdefault(pool, _Bucket(limits.requests_per_min, limits.burst, now))
                    waits.append(req.wait_for(1, now))
                if limits.tokens_per_min and tokens:
                    tok = self._tokens.setdefault(pool, _Bucket(limits.tokens_per_min, limits.tokens_per_min, now))
                    waits.append(tok.wait_for(min(tokens, tok.capacity), now))
                wait = max(waits, default=0.0)
                if wait > reserve_s:
                    return Grant(False, wait - reserve_s, reason="rate")
                if req:
                    req.take(1)
                if tok:
                    tok.take(min(tokens, tok.capacity))
                if wait > 0:
                    return Grant(False, wait, reason="reserved", prepaid=True)
            if holding is not None:
                flights.add(holding)  # a no-op unless it had been released meanwhile
                return Grant(True, 0.0, None)
            lease = uuid.uuid4().hex
            flights.add(lease)
            return Grant(True, 0.0, lease)

    def release(
        self, pool: str, lease: str | None, tokens_estimated: int = 0, tokens_used: int | None = None
    ) -> None:
        with self._lock:
            if lease:
                self._in_flight.get(pool, set()).discard(lease)
            tok = self._tokens.get(pool)
            if tok and tokens_used is not None and tokens_estimated:
                # Correct the estimate with the usage the provider reported.
                diff = tokens_estimated - tokens_used
                if diff > 0:
                    tok.give_back(diff)
                else:
                    tok.take(-diff)

    def refund(self, pool: str, limits: Limits, tokens: int = 0) -> None:
        with self._lock:
            req = self._requests.get(pool)
            if req and limits.requests_per_min:
                req.give_back(1)
            tok = self._tokens.get(pool)
            if tok and limits.tokens_per_min and tokens:
                tok.give_back(min(tokens, tok.capacity))

    def cool_down(self, pool: str, seconds: float) -> None:
        with self._lock:
            until = self._clock() + seconds
            self._cool_until[pool] = max(self._cool_until.get(pool, 0.0), until)
