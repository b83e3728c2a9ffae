"""Prometheus text exposition (format 0.0.4), written by hand from SQL and Redis.

Per sweep (running sweeps and the most recent ones): cells by phase and state, attempts by outcome,
HTTP 429 answers, retries (attempts beyond the first per cell). From the broker, when it is Redis:
messages waiting per queue and messages delivered but not acknowledged. From the global limiter: leases
in flight per provider pool (a pool names provider, base URL and a key fingerprint, never a key).
A source that cannot be read shows as afpbench_source_up 0 instead of failing the scrape.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sqlalchemy import func
from sqlmodel import Session, col, select

from afpbench.workers.celery_app import QUEUES
from afpbench.workers.settings import Settings
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Attempt, Cell, Sweep, SweepStatus

log = logging.getLogger("afpbench.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
RECENT_SWEEPS = 20
# kombu's Redis transport keeps priority levels other than 0 in sibling lists "<queue>\x06\x16<n>".
KOMBU_PRIORITY_SEP = "\x06\x16"
KOMBU_PRIORITY_STEPS = (3, 6, 9)
LIMITER_INFLIGHT_PATTERN = "afpbench:limit:*:inflight"


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Exposition:
    """Families in order, each with HELP and TYPE once, then its samples."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[dict, float]]) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
            number = str(int(value)) if float(value).is_integer() else repr(float(value))
            self._lines.append(f"{name}{{{inner}}} {number}" if inner else f"{name} {number}")

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"


def _sweeps_of_interest(session: Session) -> list[Sweep]:
    running = session.exec(select(Sweep).where(Sweep.status == SweepStatus.running)).all()
    recent = session.exec(select(Sweep).order_by(col(Sweep.created_at).desc()).limit(RECENT_SWEEPS)).all()
    return list({s.id: s for s in [*running, *recent]}.values())


def _sql_families(out: Exposition) -> None:
    with session_scope() as session:
        sweeps = _sweeps_of_interest(session)
        ids = [s.id for s in sweeps]
        cells = session.execute(
            select(Cell.sweep_id, Cell.phase, Cell.state, func.count())
            .where(col(Cell.sweep_id).in_(ids))
            .group_by(Cell.sweep_id, Cell.phase, col(Cell.state))
        ).all()
        joined = select(Cell.sweep_id).join(Attempt, col(Attempt.cell_id) == Cell.id).where(col(Cell.sweep_id).in_(ids))
        outcomes = session.execute(
            joined.add_columns(col(Attempt.outcome), func.count()).group_by(Cell.sweep_id, Attempt.outcome)
        ).all()
        per_cell = session.execute(
            joined.add_columns(func.count(col(Attempt.id)), func.count(func.distinct(Attempt.cell_id)))
            .group_by(Cell.sweep_id)
        ).all()
        limited = session.execute(
            joined.add_columns(func.count()).where(col(Attempt.http_status) == 429).group_by(Cell.sweep_id)
        ).all()
    info = [{"sweep": s.id, "name": s.name, "status": s.status, "simulated": str(s.simulated).lower()}
            for s in sweeps]
    out.family("afpbench_sweep_info", "gauge", "Sweeps shown here (running and most recent).",
               ((labels, 1) for labels in info))
    out.family("afpbench_cells", "gauge", "Cells by sweep, pipeline phase and result state.",
               (({"sweep": sw, "phase": ph, "state": st or "none"}, n) for sw, ph, st, n in cells))
    out.family("afpbench_attempts_total", "counter", "Attempts by sweep and outcome class.",
               (({"sweep": sw, "outcome": oc}, n) for sw, oc, n in outcomes))
    out.family("afpbench_http_429_total", "counter", "Attempts answered HTTP 429 (rate limited) by sweep.",
               (({"sweep": sw}, n) for sw, n in limited))
    out.family("afpbench_retries_total", "counter", "Attempts beyond the first per cell, by sweep.",
               (({"sweep": sw}, total - cells_tried) for sw, total, cells_tried in per_cell))


def _redis(url: str):
    import redis

    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def _broker_families(out: Exposition, url: str) -> None:
    client = _redis(url)
    try:
        pipe = client.pipeline(transaction=False)
        for queue in QUEUES:
            for key in [queue, *(f"{queue}{KOMBU_PRIORITY_SEP}{p}" for p in KOMBU_PRIORITY_STEPS)]:
                pipe.llen(key)
        pipe.hlen("unacked")
        counts = pipe.execute()
    finally:
        client.close()
    per_queue = len(KOMBU_PRIORITY_STEPS) + 1
    depths = {q: sum(counts[i * per_queue:(i + 1) * per_queue]) for i, q in enumerate(QUEUES)}
    out.family("afpbench_queue_depth", "gauge", "Messages waiting in each broker queue.",
               (({"queue": q}, n) for q, n in depths.items()))
    out.family("afpbench_broker_unacked", "gauge", "Messages delivered to workers and not yet acknowledged.",
               [({}, counts[-1])])


def _limiter_families(out: Exposition, url: str) -> None:
    client = _redis(url)
    try:
        seconds, micros = client.time()
        now = seconds + micros / 1_000_000
        samples = []
        for raw in client.scan_iter(match=LIMITER_INFLIGHT_PATTERN, count=500):
            key = raw.decode()
            pool = key[key.find("{") + 1:key.rfind("}")]
            samples.append(({"pool": pool}, client.zcount(key, f"({now}", "+inf")))  # unexpired leases only
    finally:
        client.close()
    out.family("afpbench_pool_in_flight", "gauge", "Requests in flight per provider pool (global limiter).",
               sorted(samples, key=lambda s: s[0]["pool"]))


def render_metrics(settings: Settings) -> str:
    out = Exposition()
    up: dict[str, int] = {}
    sources = [("database", lambda: _sql_families(out))]
    if settings.broker_url.startswith(("redis://", "rediss://")):
        sources.append(("broker", lambda: _broker_families(out, settings.broker_url)))
    if limiter_url := settings.limiter_redis_url:
        sources.append(("limiter", lambda: _limiter_families(out, limiter_url)))
    for name, collect in sources:
        try:
            collect()
            up[name] = 1
        except Exception as exc:  # noqa: BLE001 - a dead source is a metric, not a failed scrape
            log.warning("metrics: %s unavailable: %s", name, type(exc).__name__)
            up[name] = 0
    out.family("afpbench_source_up", "gauge", "1 when the source could be read for this scrape.",
               (({"source": k}, v) for k, v in up.items()))
    return out.text()
