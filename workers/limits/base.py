"""Per-provider-pool rate limits shared by every worker: the declared limits, the pool key and the
limiter interface.

A pool is provider + base URL + a fingerprint of the key (never the key). A check either grants a
request (with a lease on an in-flight slot) or says how long to wait; a waiting task gives its worker
slot back and retries after that delay instead of sleeping. Two implementations keep the same rules:
in_memory.py (embedded mode) and in_redis.py (atomic across machines).

A conversation holds one in-flight slot for its whole life: its later rounds (calculator tool rounds)
pass the lease they already hold as `holding` and take only rate and token budget. Asking for a second
slot instead would deadlock a pool whose cap is the one slot the conversation itself holds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from pydantic import Field

from afpbench.reference.values import Count, Number
from afpbench.workers.spec_values import StrictModel


# The limits a pool's calls obey, as a spec declares them for a model (sweeps/spec.py) and as a sweep
# combines them for a pool (sweeps/pools.py:pool_limits); None: no limit of that kind. (A comment, not a
# docstring: pydantic would put a docstring into the spec's JSON schema.)
class Limits(StrictModel):
    requests_per_min: Number | None = Field(default=None, gt=0)
    burst: Count = Field(default=1, ge=1)
    tokens_per_min: Number | None = Field(default=None, gt=0)
    max_in_flight: Count | None = Field(default=None, ge=1)
    # The provider's batch quota: most input tokens the pool's pending batches may hold at once (OpenAI's
    # enqueued-token limit); counted in SQL over the pool's open batches (workers/limits/batch_quota.py).
    batch_queue_tokens: Count | None = Field(default=None, ge=1)

    @property
    def declared(self) -> bool:
        """Whether any limit is declared (a burst alone limits nothing)."""
        return bool(self.requests_per_min or self.tokens_per_min or self.max_in_flight)


def pool_key(provider: str, base_url: str, api_key: str | None) -> str:
    fingerprint = hashlib.sha256(api_key.encode()).hexdigest()[:8] if api_key else "nokey"
    return f"{provider}|{base_url}|{fingerprint}"


@dataclass(frozen=True)
class Grant:
    """granted: go now. Otherwise wait `wait_s`; when `prepaid`, the rate budget for that moment is
    already reserved (the caller comes back with prepaid=True and only cool-down and the in-flight cap
    are checked again). Reserving slots in time is what keeps many waiting tasks from stampeding the
    bucket each time a token refills."""

    granted: bool
    wait_s: float = 0.0
    lease: str | None = None
    reason: str = ""
    prepaid: bool = False


class Limiter:
    def acquire(
        self, pool: str, limits: Limits, tokens: int = 0, *, reserve_s: float = 0.0, prepaid: bool = False,
        holding: str | None = None, lease_s: float | None = None,
    ) -> Grant:  # pragma: no cover - interface
        """`holding`: an in-flight lease the caller already holds for this conversation. The in-flight
        cap is then not checked again and no new lease is taken (the grant's lease is None); the held
        lease is kept alive (re-taken when it has expired, if the cap allows). Rate, token budget and
        cool-down apply as for any request. `lease_s`: how long the in-flight lease must live at least
        (one call of the caller's model, sweeps/time_limits.py:slot_lease_s), for limiters whose leases expire."""
        raise NotImplementedError

    def release(
        self, pool: str, lease: str | None, tokens_estimated: int = 0, tokens_used: int | None = None
    ) -> None:
        raise NotImplementedError  # pragma: no cover - interface

    def cool_down(self, pool: str, seconds: float) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def refund(self, pool: str, limits: Limits, tokens: int = 0) -> None:  # pragma: no cover - interface
        """Give back a granted request that was never sent (a duplicate message lost the claim), so
        copies of one cell do not spend the pool's rate budget several times."""
        raise NotImplementedError
