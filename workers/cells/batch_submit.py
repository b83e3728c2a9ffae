"""Sending a batch to its provider so that it is accepted, and paid for, once.

The intent is written before the create request: the row says `submitting` with `details["submission"]`
(a label unique to the row, when it was first tried, the tries) and is committed first. Only an answer
settles a try: accepted (the row says `submitted`, with the provider's id) or refused (a 4xx: the batch
fails). A try with no answer (the poller killed, a timeout, a 5xx) leaves the row `submitting`, and the
next poller asks the provider before it sends anything (`_ask`):
- OpenAI and Gemini keep our label on the batch (OpenAI `metadata`, Gemini `displayName`): the batch in
  the provider's list carrying it is the copy, adopted as the row's batch;
- Anthropic keeps no label: the candidates are the batches listed as made in the submission's time
  window with its request count, not already another row's. One that has ended is ours when its
  results' custom ids are ours (each is our cell and attempt); a single one still running is adopted and
  confirmed by its custom ids when its results are read (`not_ours`: entries of a foreign batch are
  recorded as missing and re-sent, never given its answers); several running leave the row waiting,
  saying so on the row and in `afpbench status`, until they end and their custom ids tell;
- none found: sent again, but only once the last try can no longer be answered (it was, with an error
  status, or its requests' timeouts passed), so a slow answer and a second copy never cross.
A search that fails (network, no key, a list too long) sends nothing and is tried at the next poll.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import select, update

from afpbench.workers.cells.batch_held import Held, lines_of, set_batch
from afpbench.workers.cells.batch_release import BATCH, ENTRY
from afpbench.workers.errors import MissingKey
from afpbench.workers.providers.batch import BatchView, Submission, entry_failure
from afpbench.workers.providers.batch_http import BatchFault
from afpbench.workers.providers.types import AdapterResult, Endpoint, OutcomeClass, failure_result, key_for_quiet
from afpbench.workers.store.batch_models import BatchStatus
from afpbench.workers.store.db import session_scope, transaction
from afpbench.workers.store.models import utcnow
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.progress import is_cancelled

log = logging.getLogger(__name__)
UNCONFIRMED = "time window and request count"  # how an Anthropic copy still running is adopted


class Step(StrEnum):
    sent = "sent"  # accepted now: the row says submitted
    adopted = "adopted"  # an earlier try's copy found at the provider: the row says submitted
    waiting = "waiting"  # whether a copy exists cannot be told yet: nothing sent, asked at the next poll
    refused = "refused"  # the provider refused it, or there is no key: its entries fail with `failure`
    unsent = "unsent"  # a cancelled sweep's batch that no provider holds


@dataclass(frozen=True)
class Submitted:
    step: Step
    failure: AdapterResult | None = None


@dataclass(frozen=True)
class Intent:
    """`details["submission"]`: the label every try of the row carries, its first and latest try, and
    whether the latest was answered (an error status: no later answer can come)."""

    label: str
    since: datetime
    last_try_at: datetime
    tries: int
    answered: bool = False

    @classmethod
    def read(cls, details: dict) -> Intent | None:
        raw = details.get("submission")
        if not isinstance(raw, dict):
            return None
        return cls(raw["label"], datetime.fromisoformat(raw["since"]), datetime.fromisoformat(raw["last_try_at"]),
                   raw["tries"], raw.get("answered", False))

    def to_json(self) -> dict:
        return {"label": self.label, "since": self.since.isoformat(), "last_try_at": self.last_try_at.isoformat(),
                "tries": self.tries, "answered": self.answered}


@dataclass(frozen=True)
class Choice:
    """What the provider's list says of a submission: its copy (and how it was told), or why nothing can
    be decided yet; neither: the provider holds none."""

    view: BatchView | None = None
    how: str = ""
    others: tuple[str, ...] = ()  # more copies carrying the label (an earlier try's), not read
    waiting: str | None = None
    rejected: tuple[str, ...] = ()  # candidates whose custom ids showed them not to be ours


def submit(held: Held) -> Submitted:
    endpoint = endpoint_for(held.model)
    details = dict(held.row.details or {})
    intent = Intent.read(details)
    if held.row.status == BatchStatus.submitting.value and intent is not None:
        asked = _ask(held, endpoint, intent, details)
        if asked is not None:
            return asked
    if is_cancelled(held.row.sweep_id):
        return Submitted(Step.unsent)  # nothing is sent after a cancel
    try:
        lines = [line for _, line in lines_of(held)]
    except MissingKey as exc:
        return Submitted(Step.refused, failure_result(OutcomeClass.auth_error, f"missing API key: {exc}"))
    now = utcnow()
    intent = (Intent(f"afpbench {held.row.sweep_id} batch {held.row.id} {secrets.token_hex(6)}", now, now, 1)
              if intent is None else replace(intent, last_try_at=now, tries=intent.tries + 1, answered=False))
    details["submission"] = intent.to_json()
    set_batch(held.row.id, status=BatchStatus.submitting.value, details=details, error=None)  # before sending
    try:
        view = held.adapter.submit_batch(endpoint, lines, intent.label)
    except MissingKey as exc:
        return Submitted(Step.refused, failure_result(OutcomeClass.auth_error, f"missing API key: {exc}"))
    except BatchFault as exc:
        if exc.refused:  # the create itself was refused, and an earlier try left no copy (asked above)
            return Submitted(Step.refused, entry_failure("failed", f"the provider refused the batch: {exc}"))
        details["submission"] = replace(intent, answered=exc.status is not None).to_json()
        set_batch(held.row.id, details=details, error=f"{exc} (the provider may hold it: asked before any new try)")
        return Submitted(Step.waiting)
    _accept(held, view, "its create answered", details)
    return Submitted(Step.sent)


def in_flight_until(intent: Intent, endpoint: Endpoint) -> datetime:
    """When the last try can no longer be answered: its requests' timeouts (OpenAI's upload and create)."""
    return intent.last_try_at + timedelta(seconds=2 * (endpoint.connect_timeout_s + endpoint.timeout_s))


def _ask(held: Held, endpoint: Endpoint, intent: Intent, details: dict) -> Submitted | None:
    """Adopt the provider's copy of an earlier try, or wait; None: the provider holds none, send."""
    now = utcnow()
    try:
        found = held.adapter.find_batches(endpoint, Submission(intent.label, intent.since, held.row.entries), now)
        choice = _by_label(found) if held.adapter.labelled else _by_custom_ids(held, endpoint, found, details)
    except (BatchFault, MissingKey) as exc:
        set_batch(held.row.id, error=f"not sent again: could not ask the provider whether it holds this batch: "
                                     f"{str(exc)[:300]}")
        return Submitted(Step.waiting)
    if choice.rejected:
        details["rejected"] = [*details.get("rejected", []), *choice.rejected][-50:]
    if choice.view is not None:
        _accept(held, choice.view, choice.how, details, choice.others)
        return Submitted(Step.adopted)
    if choice.waiting is not None:
        set_batch(held.row.id, error=choice.waiting, details=details)
        return Submitted(Step.waiting)
    if not intent.answered and now < (until := in_flight_until(intent, endpoint)):
        set_batch(held.row.id, details=details, error=f"not at the provider yet; its last try may still be answered "
                                                      f"until {until:%H:%M:%S} UTC: sent again after that")
        return Submitted(Step.waiting)
    set_batch(held.row.id, details=details)
    return None


def _by_label(found: list[BatchView]) -> Choice:
    if not found:
        return Choice()
    return Choice(found[0], "its label", tuple(v.provider_batch_id for v in found[1:]))


def _by_custom_ids(held: Held, endpoint: Endpoint, found: list[BatchView], details: dict) -> Choice:
    """Anthropic: the candidates not yet told apart (not another row's, not rejected before); an ended one
    is ours when its results' custom ids are; one still running is adopted, to be confirmed."""
    ids = [v.provider_batch_id for v in found]
    with session_scope() as session:
        taken = set(session.execute(select(BATCH.c.provider_batch_id).where(BATCH.c.provider_batch_id.in_(ids)))
                    .scalars()) if ids else set()
    candidates = [v for v in found if v.provider_batch_id not in taken | set(details.get("rejected", []))]
    ours = _custom_ids(held.row.id)
    secrets_ = [k for k in (key_for_quiet(endpoint),) if k]
    rejected: list[str] = []
    for view in (v for v in candidates if v.ended):
        got = {r.custom_id for r in held.adapter.batch_results(endpoint, view, secrets_)}
        if got and got <= ours:
            return Choice(view, "its results' custom ids", rejected=tuple(rejected))
        rejected.append(view.provider_batch_id)
    running = [v for v in candidates if not v.ended]
    if len(running) == 1:
        return Choice(running[0], UNCONFIRMED, rejected=tuple(rejected))
    if running:
        return Choice(waiting=f"not sent again: {len(running)} batches at the provider were made in this "
                              f"submission's time window with its {held.row.entries} requests "
                              f"({', '.join(v.provider_batch_id for v in running)}); one may be ours, so none "
                              f"is sent until they end and their custom ids tell", rejected=tuple(rejected))
    return Choice(rejected=tuple(rejected))


def _custom_ids(batch_id: int) -> set[str]:
    with session_scope() as session:
        return set(session.execute(select(ENTRY.c.custom_id).where(ENTRY.c.batch_id == batch_id)).scalars())


def _accept(held: Held, view: BatchView, how: str, details: dict, others: tuple[str, ...] = ()) -> None:
    """The row takes the provider's batch, only if it is still submitting (a poller whose lease ran out
    finds the row taken and leaves it)."""
    now = utcnow()
    details["identified"] = {"how": how, "provider_batch_id": view.provider_batch_id, "at": now.isoformat()}
    note = (f"{len(others)} more copies at the provider carry this batch's label ({', '.join(others)}): sent by "
            f"earlier tries, not read" if others else None)
    if note:
        details["note"] = note  # kept on the row's error while it is polled (batch_poll.py)
    with transaction() as conn:
        taken = conn.execute(update(BATCH).where(BATCH.c.id == held.row.id,
                                                 BATCH.c.status == BatchStatus.submitting.value).values(
            status=BatchStatus.submitted.value, provider_batch_id=view.provider_batch_id[:200],
            provider_status=view.provider_status[:32], submitted_at=view.created_at or now,
            expires_at=view.expires_at, error=note, details=details)).rowcount
    log.info(json.dumps({"event": "batch_submitted" if taken else "batch_copy_not_taken", "batch": held.row.id,
                         "provider_batch": view.provider_batch_id, "identified_by": how, "entries": held.row.entries}))


def not_ours(details: dict, got: set[str], ours: set[str]) -> str | None:
    """Why a batch adopted by its time window and request count is not this row's (its results carry
    other custom ids), or None: confirmed, or identified for certain."""
    identified = details.get("identified") or {}
    if identified.get("how") != UNCONFIRMED or (got and got <= ours):
        return None
    return (f"batch {identified.get('provider_batch_id')}, adopted by its time window and request count, holds "
            f"other requests than this batch's: its results are not read")
