"""Which limiter pool each of a sweep's calls counts against, and the limits that pool obeys in the sweep.

A pool is provider + base URL + a fingerprint of the key (limits/base.py:pool_key): models and judges on
one key and URL share it, whatever the spec calls them.
"""

from __future__ import annotations

from typing import TypeVar

from afpbench.workers.limits.base import Limits, pool_key
from afpbench.workers.providers.types import Endpoint, key_for_quiet
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.spec import ModelSpec, SweepSpec

T = TypeVar("T", int, float)


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
        batch_queue_tokens=_tightest([lim.batch_queue_tokens for lim in sharing]),
    )
