"""Per-provider-pool rate limits shared by every worker: the pool key and the limiter interface.

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
from typing import TypeVar

from afpbench.workers.providers.endpoints import endpoint_for
from afpbench.workers.providers.types import Endpoint, key_for_quiet
from afpbench.workers.sweeps.spec import Limits, ModelSpec, SweepSpec

T = TypeVar("T", int, float)


def pool_key(provider: str, base_url: str, api_key: str | None) -> str:
    fingerprint = hashlib.sha256(api_key.encode()).hexdigest()[:8] if api_key else "nokey"
    return f"{provider}|{base_url}|{fingerprint}"


def pool_of(endpoint: Endpoint) -> str:
    """The pool an endpoint's calls count against: models and judges on one key and URL share it."""
    return pool_key(endpoint.provider, endpoint.base_url, key_for_quiet(endpoint))


def _tightest(values: list[T | None]) -> T | None:
    declared = [v for v in values if v is not None]
    return min(declared) if declared else None  # type: ignore[type-var]  # numbers: ordered


# (id(spec), id(member)) -> (spec, member, limits): the spec and member are kept so their ids stay theirs.
_pool_limits_cache: dict[tuple[int, int], tuple[SweepSpec, ModelSpec, Limits]] = {}


def pool_limits(spec: SweepSpec, member: ModelSpec) -> Limits:
    """The limits every call of `member`'s pool obeys in this sweep: the tightest each of the sweep's
    models and judges on that pool declares. A judge served by the tested model's server takes the
    same slots, so it must count against the same cap, whatever (or nothing) its own entry says; one
    cap per pool is also what keeps the in-flight count and the cap it is checked against the same.
    Cached per spec object (a sweep's spec is parsed once per process and is immutable): resolving
    every member's endpoint costs ~60 us, on the per-cell path."""
    hit = _pool_limits_cache.get((id(spec), id(member)))
    if hit is not None and hit[0] is spec and hit[1] is member:
        return hit[2]
    limits = _pool_limits(spec, member)
    if len(_pool_limits_cache) > 512:
        _pool_limits_cache.clear()
    _pool_limits_cache[(id(spec), id(member))] = (spec, member, limits)
    return limits


def _pool_limits(spec: SweepSpec, member: ModelSpec) -> Limits:
    pool = pool_of(endpoint_for(member))
    members = [*spec.models, *(spec.judges or [])]
    sharing = [m.limits for m in members if m is member or pool_of(endpoint_for(m)) == pool]
    rated = [lim for lim in sharing if lim.requests_per_min]
    return Limits(
        requests_per_min=_tightest([lim.requests_per_min for lim in sharing]),
        burst=min((lim.burst for lim in rated), default=member.limits.burst),
        tokens_per_min=_tightest([lim.tokens_per_min for lim in sharing]),
        max_in_flight=_tightest([lim.max_in_flight for lim in sharing]),
    )


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
        (one call of the caller's model, time_limits.py:slot_lease_s), for limiters whose leases expire."""
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
