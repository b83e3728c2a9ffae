"""Sweep reports for the API and the viewer, rendered once per version of a sweep's stored summary.

A finished sweep's report is its stored summary (the Aggregate row) rendered: it changes only when the
summary is stored again, which a human decision does (workers/grading/adjudication.record_human_decision), or when new
results arrive, which a rescore does (it adds a scoring run without storing the summary). So a cached
report is keyed by (sweep, seal hash, when the summary was stored — store_summary stamps
Aggregate.finished_at each time —, the newest result of the sweep, format): a decision changes the stamp
and the newest result, a rescore the newest result. When the newest result is younger than the stored
summary, the summary is stale (a rescore): it is stored again here before it is rendered. A sweep without
a stored summary (still running, or never finished) is computed on each request, labelled interim, and
never cached. The cache is bounded (AFP_REPORT_CACHE_ENTRIES, least recently used out first) and each
entry's key gives the ETag, so a client that has the report gets 304.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func
from sqlmodel import Session, col, select

from afpbench.api.report import render_report
from afpbench.workers import runs
from afpbench.workers.cells.finish import aggregate_now
from afpbench.workers.errors import SweepNotFound
from afpbench.workers.results import aggregation
from afpbench.workers.results.summary import SweepSummary
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Aggregate, Result, Sweep


@dataclass(frozen=True)
class ReportVersion:
    """What a finished sweep's report is a function of; None fields: no stored summary yet."""

    sweep_id: str
    seal: str
    stored_at: datetime | None
    newest_result: int | None
    newest_result_at: datetime | None

    @property
    def cacheable(self) -> bool:
        if self.stored_at is None:
            return False
        return self.newest_result_at is None or self.newest_result_at <= self.stored_at

    def etag(self, fmt: str) -> str:
        text = f"{self.sweep_id}|{self.seal}|{self.stored_at}|{self.newest_result}|{fmt}"
        return '"r-' + hashlib.sha256(text.encode()).hexdigest()[:32] + '"'


def report_version(session: Session, sweep_id: str) -> ReportVersion:
    seal = session.exec(select(Sweep.seal_hash).where(Sweep.id == sweep_id)).first()
    if seal is None:
        raise SweepNotFound(f"no sweep with id {sweep_id!r}")
    stored_at = session.exec(select(Aggregate.finished_at).where(Aggregate.sweep_id == sweep_id,
                                                                col(Aggregate.summary).is_not(None))).first()
    newest, newest_at = session.execute(
        select(func.max(Result.id), func.max(Result.created_at)).where(Result.sweep_id == sweep_id)).one()
    return ReportVersion(sweep_id, seal, stored_at, newest, newest_at)


@dataclass(frozen=True)
class Rendered:
    body: str
    etag: str | None  # None: an interim report, not cached


class ReportCache:
    """Least recently used first out; shared by the request threads (a lock around the dictionary only)."""

    def __init__(self, entries: int):
        self.entries = entries
        self._items: OrderedDict[tuple[ReportVersion, str], object] = OrderedDict()
        self._lock = threading.Lock()
        self._restoring = threading.Lock()

    def _get(self, key: tuple[ReportVersion, str]) -> object | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def _put(self, key: tuple[ReportVersion, str], value: object) -> None:
        if self.entries <= 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.entries:
                self._items.popitem(last=False)

    def version(self, sweep_id: str) -> ReportVersion:
        """The report's version; a stale stored summary (results newer than it) is stored again first."""
        with session_scope() as session:
            version = report_version(session, sweep_id)
        if version.stored_at is None or version.cacheable:
            return version
        with self._restoring:  # one re-store at a time: the requests queued behind it find it done
            with session_scope() as session:
                version = report_version(session, sweep_id)
            if not version.cacheable:
                aggregate_now(sweep_id, "http-report")
                with session_scope() as session:
                    version = report_version(session, sweep_id)
        return version

    def summary(self, sweep_id: str, version: ReportVersion | None = None) -> SweepSummary:
        """The stored summary (cached by version), or an interim one computed now."""
        version = version or self.version(sweep_id)
        if not version.cacheable:
            if runs.progress(sweep_id).finished:  # finished, nobody stored it yet: claim and store it now
                return aggregate_now(sweep_id, "http-report")
            return aggregation.snapshot(sweep_id, interim=True)
        cached = self._get((version, "summary"))
        if isinstance(cached, SweepSummary):
            return cached
        summary = aggregation.stored_summary(sweep_id) or aggregate_now(sweep_id, "http-report")  # an older format
        self._put((version, "summary"), summary)
        return summary

    def rendered(self, sweep_id: str, fmt: str) -> Rendered:
        """The report in `fmt` (json, md, html) with its ETag, from the cache when its version is there."""
        version = self.version(sweep_id)
        if not version.cacheable:
            return Rendered(render_report(self.summary(sweep_id, version), fmt), None)
        cached = self._get((version, fmt))
        if isinstance(cached, str):
            return Rendered(cached, version.etag(fmt))
        body = render_report(self.summary(sweep_id, version), fmt)
        self._put((version, fmt), body)
        return Rendered(body, version.etag(fmt))


def etag_matches(if_none_match: str | None, etag: str | None) -> bool:
    """Whether a request's If-None-Match names `etag` (a list, weak tags and * included)."""
    if not if_none_match or etag is None:
        return False
    tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in tags or etag in tags
