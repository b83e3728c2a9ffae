"""The global limiter in Redis: one atomic Lua script per check, clocked by Redis `TIME`.

Per pool: a request token bucket (rate per minute, burst), a token-per-minute bucket (estimate taken
before the call, corrected with reported usage afterwards), and in-flight leases in a sorted set scored
by expiry, so a dead worker's slot frees itself. A 429 sets a pool-wide cool-down. A later round of
a conversation passes its lease as `holding`: the cap is not counted again and the lease's expiry moves on.
"""

from __future__ import annotations

import uuid

import redis

from afpbench.workers.limits.base import Grant, Limiter, Limits

_ACQUIRE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local cool = tonumber(redis.call('GET', KEYS[4]) or '0')
if cool > now then return {0, tostring(cool - now), 'cool-down after a 429'} end
local maxf = tonumber(ARGV[6])
local holding = ARGV[11]
local member = ARGV[7]
if holding ~= '' then member = holding end
if maxf > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  local held = holding ~= '' and redis.call('ZSCORE', KEYS[3], holding)
  if not held and redis.call('ZCARD', KEYS[3]) >= maxf then return {0, '0.25', 'max in flight'} end
  if held then redis.call('ZADD', KEYS[3], now + tonumber(ARGV[8]), holding) end
end
local prepaid = tonumber(ARGV[10]) == 1
if prepaid then
  if maxf > 0 then
    redis.call('ZADD', KEYS[3], now + tonumber(ARGV[8]), member)
    redis.call('EXPIRE', KEYS[3], 86400)
  end
  return {1, '0', 'ok'}
end
local function level(key, rate, cap)
  local v = redis.call('HMGET', key, 'level', 'at')
  local lvl = tonumber(v[1]) or cap
  local at = tonumber(v[2]) or now
  return math.min(cap, lvl + math.max(0, now - at) * rate)
end
local wait = 0
local rrate = tonumber(ARGV[1])
local rcap = tonumber(ARGV[2])
local rl = nil
if rrate > 0 then
  rl = level(KEYS[1], rrate, rcap)
  if rl < 1 then wait = math.max(wait, (1 - rl) / rrate) end
end
local trate = tonumber(ARGV[3])
local tcap = tonumber(ARGV[4])
local need = math.min(tonumber(ARGV[5]), tcap)
local tl = nil
if trate > 0 and need > 0 then
  tl = level(KEYS[2], trate, tcap)
  if tl < need then wait = math.max(wait, (need - tl) / trate) end
end
local reserve = tonumber(ARGV[9])
if wait > reserve then return {0, tostring(wait - reserve), 'rate'} end
if rl then
  redis.call('HSET', KEYS[1], 'level', tostring(rl - 1), 'at', tostring(now))
  redis.call('EXPIRE', KEYS[1], 86400)
end
if tl then
  redis.call('HSET', KEYS[2], 'level', tostring(tl - need), 'at', tostring(now))
  redis.call('EXPIRE', KEYS[2], 86400)
end
if wait > 0 then return {2, tostring(wait), 'reserved'} end
if maxf > 0 then
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[8]), member)
  redis.call('EXPIRE', KEYS[3], 86400)
end
return {1, '0', 'ok'}
"""

_COOL = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local untl = now + tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if untl > cur then redis.call('SET', KEYS[1], tostring(untl), 'EX', math.ceil(tonumber(ARGV[1])) + 1) end
return 1
"""

_CORRECT = """
local v = redis.call('HGET', KEYS[1], 'level')
if v then redis.call('HSET', KEYS[1], 'level', tostring(tonumber(v) + tonumber(ARGV[1]))) end
return 1
"""


_REFUND = """
local function back(key, amount, cap)
  local v = redis.call('HGET', key, 'level')
  if v then redis.call('HSET', key, 'level', tostring(math.min(cap, tonumber(v) + amount))) end
end
if tonumber(ARGV[1]) > 0 then back(KEYS[1], 1, tonumber(ARGV[1])) end
if tonumber(ARGV[2]) > 0 then back(KEYS[2], tonumber(ARGV[3]), tonumber(ARGV[2])) end
return 1
"""


class RedisLimiter(Limiter):
    def __init__(self, url: str, lease_ttl_s: float = 900.0, prefix: str = "afpbench:limit"):
        self._redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._cool = self._redis.register_script(_COOL)
        self._correct = self._redis.register_script(_CORRECT)
        self._refund = self._redis.register_script(_REFUND)
        self._ttl = lease_ttl_s
        self._prefix = prefix

    def _keys(self, pool: str) -> list[str]:
        base = f"{self._prefix}:{{{pool}}}"  # one hash slot per pool
        return [f"{base}:req", f"{base}:tok", f"{base}:inflight", f"{base}:cool"]

    def acquire(
        self, pool: str, limits: Limits, tokens: int = 0, *, reserve_s: float = 0.0, prepaid: bool = False,
        holding: str | None = None, lease_s: float | None = None,
    ) -> Grant:
        lease = uuid.uuid4().hex
        tpm = limits.tokens_per_min or 0
        granted, wait, reason = self._acquire(
            keys=self._keys(pool),
            args=[
                (limits.requests_per_min or 0) / 60.0,
                limits.burst,
                tpm / 60.0,
                tpm,
                tokens,
                limits.max_in_flight or 0,
                lease,
                max(self._ttl, lease_s or 0.0),  # a slow model's call must not outlive its slot
                reserve_s,
                1 if prepaid else 0,
                holding or "",
            ],
        )
        reason = reason.decode() if isinstance(reason, bytes) else str(reason)
        if int(granted) == 1:
            # Holding: the held lease's expiry was pushed out; no new lease to release.
            return Grant(True, 0.0, lease if limits.max_in_flight and not holding else None)
        if int(granted) == 2:
            return Grant(False, float(wait), reason=reason, prepaid=True)
        return Grant(False, float(wait), reason=reason, prepaid=prepaid)

    def release(
        self, pool: str, lease: str | None, tokens_estimated: int = 0, tokens_used: int | None = None
    ) -> None:
        keys = self._keys(pool)
        if lease:
            self._redis.zrem(keys[2], lease)
        if tokens_used is not None and tokens_estimated:
            self._correct(keys=[keys[1]], args=[tokens_estimated - tokens_used])

    def refund(self, pool: str, limits: Limits, tokens: int = 0) -> None:
        keys = self._keys(pool)
        rcap = limits.burst if limits.requests_per_min else 0
        tcap = limits.tokens_per_min or 0
        if rcap or (tcap and tokens):
            self._refund(keys=keys[:2], args=[rcap, tcap, min(tokens, tcap) if tcap else 0])

    def cool_down(self, pool: str, seconds: float) -> None:
        self._cool(keys=[self._keys(pool)[3]], args=[max(0.0, seconds)])

    def in_flight(self, pool: str) -> int:
        return int(self._redis.zcard(self._keys(pool)[2]))
