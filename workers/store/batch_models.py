"""The batch lane's rows: a provider batch (one model's cells sent through the provider's batch API) and
its entries (one cell's attempt each). SQL holds everything a poller needs, so a batch survives worker
kills and broker restarts: the beat finds it here, never in a message.

- batch: id, sweep, model, provider, status (ours: BatchStatus) and the provider's own, the provider's
  batch id, when it was submitted and when the provider lets it expire, counts, the poll lease.
- batch_entry: (batch, custom_id) -> cell and the attempt the batch carries; `outcome` once recorded.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, Index, Text
from sqlmodel import Field, SQLModel

from afpbench.workers.store.models import utcnow


class BatchStatus(StrEnum):
    created = "created"  # rows and claimed cells written; never sent to the provider
    # A create request was (or is being) sent and its answer is not in: the provider may hold a copy, so
    # the next poller asks it (its batch list) before sending again. `details["submission"]` holds the
    # label the copy carries, when it was first tried and the tries (workers/cells/batch_submit.py).
    submitting = "submitting"
    submitted = "submitted"  # the provider holds it (provider_batch_id); polled by the beat
    ended = "ended"  # every entry recorded (answers, and the causes of the entries without one)
    failed = "failed"  # the provider refused the submission; every entry recorded with that cause


OPEN_BATCH = (BatchStatus.created.value, BatchStatus.submitting.value, BatchStatus.submitted.value)


class Batch(SQLModel, table=True):
    __table_args__ = (Index("ix_batch_status_poll", "status", "next_poll_at"),
                      Index("ix_batch_pool_status", "pool", "status"))

    id: int | None = Field(default=None, primary_key=True)
    sweep_id: str = Field(foreign_key="sweep.id", index=True, max_length=32)
    model_hash: str = Field(max_length=16)
    model_label: str = Field(max_length=200)
    provider: str = Field(max_length=32)
    pool: str = Field(default="", max_length=300)  # the limiter pool (sweeps/pools.py): whose batch quota
    tokens: int = 0  # its entries' estimated input tokens, counted against the pool's batch quota
    status: str = Field(default=BatchStatus.created, max_length=16)
    provider_status: str | None = Field(default=None, max_length=32)  # the provider's word for it
    provider_batch_id: str | None = Field(default=None, max_length=200)
    entries: int = 0
    recorded: int = 0  # entries whose attempt is recorded
    answered: int = 0  # of those, entries the provider answered
    created_at: datetime = Field(default_factory=utcnow)
    submitted_at: datetime | None = None
    expires_at: datetime | None = None  # the provider's completion window
    ended_at: datetime | None = None
    next_poll_at: datetime = Field(default_factory=utcnow)
    lease_until: datetime | None = None  # a poller holds the batch until then
    error: str | None = Field(default=None, sa_column=Column(Text))
    simulated: bool = False
    # The submission's record (label, first try, tries) and how the provider's copy was identified.
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class BatchEntry(SQLModel, table=True):
    __tablename__ = "batch_entry"

    batch_id: int = Field(foreign_key="batch.id", primary_key=True)
    custom_id: str = Field(primary_key=True, max_length=64)
    cell_id: int = Field(foreign_key="cell.id", index=True)
    attempt_id: int = Field(foreign_key="attempt.id")
    number: int  # the attempt's number: the fence its record is written under
    outcome: str | None = Field(default=None, max_length=24)  # set once recorded
