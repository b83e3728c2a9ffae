"""Provider faults the simulator injects: latency, a strict request rate limit, 5xx errors, timeouts,
content filtering and malformed bodies.

Fault draws are a hash of (seed, request key, attempt number), where the attempt number counts the
admitted requests per key: a sweep replays the same faults, and a retried request draws afresh, so it
can succeed. The rate limit is a token bucket on a monotonic clock; its clock is injectable so tests
need no sleeping.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

SERVER_ERROR_STATUSES = (500, 502, 503)


@dataclass
class FaultConfig:
    latency_ms: float = 0
    latency_jitter_ms: float = 0
    rate_per_min: float | None = None  # None: no rate limit
    burst: int = 1  # bucket capacity: how many requests may arrive at once
    error_5xx_rate: float = 0
    timeout_rate: float = 0
    timeout_s: float = 30  # how long a "timed out" request stalls before answering
    content_filter_rate: float = 0
    malformed_rate: float = 0
    seed: int = 0
    # The batch API (batches.py): how long a batch stays in progress, the share of its entries that fail,
    # the share of batches that expire with half their entries unrun, and how long the answer to a create
    # request is held after the batch is registered (a client that dies or gives up meanwhile leaves a
    # batch at the provider it does not know of: the case a second submission must not pay for twice).
    batch_delay_s: float = 0
    batch_error_rate: float = 0
    batch_expire_rate: float = 0
    batch_create_hold_s: float = 0

    def __post_init__(self) -> None:
        waits = {"latency_ms": self.latency_ms, "latency_jitter_ms": self.latency_jitter_ms,
                 "timeout_s": self.timeout_s, "batch_delay_s": self.batch_delay_s,
                 "batch_create_hold_s": self.batch_create_hold_s}
        if any(v < 0 for v in waits.values()):
            raise ValueError(f"waits must be >= 0: {({k: v for k, v in waits.items() if v < 0})}")
        if self.rate_per_min is not None and self.rate_per_min <= 0:
            raise ValueError("rate_per_min must be > 0 (or None for no rate limit)")
        if self.burst < 1:
            raise ValueError("burst must be >= 1")
        rates = {
            "error_5xx_rate": self.error_5xx_rate,
            "timeout_rate": self.timeout_rate,
            "content_filter_rate": self.content_filter_rate,
            "malformed_rate": self.malformed_rate,
            "batch_error_rate": self.batch_error_rate,
            "batch_expire_rate": self.batch_expire_rate,
        }
        bad = {k: v for k, v in rates.items() if not 0 <= v <= 1}
        if bad:
            raise ValueError(f"fault rates must be within [0, 1]: {bad}")


class Fault(StrEnum):
    none = "none"
    error_5xx = "error_5xx"
    timeout = "timeout"
    content_filter = "content_filter"
    malformed = "malformed"


def _uniform(*parts: object) -> float:
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def draw_fault(config: FaultConfig, key: str, attempt: int) -> Fault:
    """One draw per admitted request; the rates are bands of one uniform number, in this order, so
    each applies exactly when the rates sum to at most 1 (at 1.0 every request gets that fault)."""
    u = _uniform(config.seed, key, attempt, "fault")
    edge = 0.0
    for fault, rate in (
        (Fault.error_5xx, config.error_5xx_rate),
        (Fault.timeout, config.timeout_rate),
        (Fault.content_filter, config.content_filter_rate),
        (Fault.malformed, config.malformed_rate),
    ):
        edge += rate
        if u < edge:
            return fault
    return Fault.none


def latency_s(config: FaultConfig, key: str, attempt: int) -> float:
    jitter = config.latency_jitter_ms * _uniform(config.seed, key, attempt, "jitter")
    return (config.latency_ms + jitter) / 1000


def retry_after_value(wait_s: float) -> str:
    """Seconds until a token is available, rounded up to 0.1 s, never below 0.1 s."""
    tenths = math.ceil(round(wait_s * 10, 6))
    return f"{max(tenths, 1) / 10:.1f}"


@dataclass(frozen=True)
class Admission:
    allowed: bool
    retry_after_s: float  # 0 when allowed
    remaining: int  # whole tokens left after this request


class TokenBucket:
    """Strict bucket: starts full at `capacity`, refills continuously at `refill_per_s`. A refused
    request takes nothing, so clients that back off as told are served at exactly the rate."""

    def __init__(
        self, capacity: int, refill_per_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if capacity < 1 or refill_per_s <= 0:
            raise ValueError("a token bucket needs capacity >= 1 and refill_per_s > 0")
        self.capacity = capacity
        self.refill_per_s = refill_per_s
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(capacity)
        self._updated = clock()

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(float(self.capacity), self._tokens + elapsed * self.refill_per_s)
        self._updated = now

    def try_acquire(self) -> Admission:
        with self._lock:
            self._refill(self._clock())
            if self._tokens >= 1 - 1e-9:
                self._tokens = max(0.0, self._tokens - 1)
                return Admission(True, 0.0, int(self._tokens + 1e-9))
            return Admission(False, (1 - self._tokens) / self.refill_per_s, 0)

    def reset(self) -> None:
        with self._lock:
            self._tokens = float(self.capacity)
            self._updated = self._clock()


class FaultInjector:
    """The stateful side of fault injection: the bucket, attempt counters and the 5xx rotation."""

    def __init__(self, config: FaultConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.bucket = (
            TokenBucket(config.burst, config.rate_per_min / 60, clock)
            if config.rate_per_min is not None
            else None
        )
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self._errors_issued = 0

    def admit(self) -> Admission:
        if self.bucket is None:
            return Admission(True, 0.0, 0)
        return self.bucket.try_acquire()

    def next_attempt(self, key: str) -> int:
        """0 for the first admitted request with this key, then 1, 2, ...; rate-limited requests do not
        count, so the fault sequence does not depend on timing."""
        with self._lock:
            attempt = self._attempts.get(key, 0)
            self._attempts[key] = attempt + 1
            return attempt

    def next_server_error(self) -> int:
        with self._lock:
            status = SERVER_ERROR_STATUSES[self._errors_issued % len(SERVER_ERROR_STATUSES)]
            self._errors_issued += 1
            return status

    def reset(self) -> None:
        with self._lock:
            self._attempts.clear()
            self._errors_issued = 0
        if self.bucket is not None:
            self.bucket.reset()
