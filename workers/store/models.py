"""The SQL schema. SQL is the source of truth; the broker only carries ids.

- sweep: one run of the matrix, with its resolved spec (secrets removed) and its seal.
- sweep_fixture: the exact text of each fixture file sealed with a sweep, one row per file, in file order.
- cell: one matrix cell under a UNIQUE deterministic key; `phase` tracks the pipeline, `state` the result.
- attempt: every try at executing a cell, never overwritten (all rounds of a tool-using exchange inside).
- judgement: every judge call, raw text kept, parse outcome recorded.
- result: every scoring outcome of a cell (execution, scorer or human); the latest is the one reported.
- adjudication: a human decision, added as a row; earlier rows stay as history.
- aggregate: one row per sweep, claimed by the task that finishes the last cell.
- rerun: one `afpbench rerun` of a finished sweep's chosen cells, with its note (workers/cells/rerun.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, Column, ColumnElement, Index, Table, Text, UniqueConstraint, inspect, literal_column
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """Databases may hand timestamps back without a zone (SQLite always does); they were written in UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def saved_id(row_id: int | None) -> int:
    """The primary key of a row read from the database (or flushed to it). The models type `id` as
    optional only because a new instance has none until it is inserted."""
    assert row_id is not None, "a row from the database has a primary key"
    return row_id


class Phase(StrEnum):
    pending = "pending"  # row exists, not yet released to the queue
    queued = "queued"  # message sent
    executing = "executing"  # a worker holds the lease
    batched = "batched"  # its attempt rides in a provider batch (workers/store/batch_models.py)
    awaiting_score = "awaiting_score"  # raw output stored, scoring to do
    scoring = "scoring"
    done = "done"  # a final result state is recorded


def phase_in(column: Any, phases: Iterable[str]) -> ColumnElement[bool]:
    """`column IN ('pending', 'queued', ...)` with the phases written into the SQL. The hot path's
    statements are built once; an IN list of bound values is expanded again at every execution (about
    40 µs of each per-cell statement). The phases are this enum's own constants, never input."""
    return column.in_([literal_column(f"'{Phase(p).value}'") for p in phases])


class SweepStatus(StrEnum):
    running = "running"
    complete = "complete"
    cancelled = "cancelled"
    stopped = "stopped"  # a model was stopped for an auth/config error


class Sweep(SQLModel, table=True):
    id: str = Field(primary_key=True, max_length=32)
    name: str = Field(max_length=200)
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    status: str = Field(default=SweepStatus.running, max_length=16, index=True)
    simulated: bool = False
    spec: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    seal_hash: str = Field(max_length=64)
    seal_components: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    afpbench_version: str = Field(max_length=32)
    notices: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # The exact texts sealed besides the fixtures (instruction texts, judge prompt), so every worker on
    # every machine scores against the same inputs without reading paths, and exports can include them.
    # The fixture texts are rows of SweepFixture.
    inputs: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    validity: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class SweepFixture(SQLModel, table=True):
    """One fixture file sealed with a sweep: its exact text, under its file name, in file order, and its
    parsed form. One row per file rather than one JSON value for all, so that creating a sweep of 10,000
    fixtures never holds a 75 MB value (three times over while it was written) and a worker reads the one
    fixture a cell needs."""

    __tablename__ = "sweep_fixture"
    __table_args__ = (UniqueConstraint("sweep_id", "fixture_id", name="uq_sweep_fixture_id"),)

    sweep_id: str = Field(foreign_key="sweep.id", primary_key=True, max_length=32)
    position: int = Field(primary_key=True)  # the file's place in the set (0-based): the seal's order
    name: str = Field(sa_column=Column(Text, nullable=False))
    fixture_id: str = Field(max_length=32)
    text: str = Field(sa_column=Column(Text, nullable=False))
    # The fixture parsed from `text` at creation, as JSON (Fixture.model_dump_json): workers validate it
    # instead of parsing the YAML again. Derived, never sealed; `afpbench verify` checks it against the text.
    # NULL for sweeps created before migration 0004 (their workers parse the text).
    parsed: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class Cell(SQLModel, table=True):
    __table_args__ = (
        UniqueConstraint(
            "sweep_id",
            "model_hash",
            "condition",
            "fixture_id",
            "fixture_version",
            "repeat",
            name="uq_cell_key",
        ),
        Index("ix_cell_sweep_phase", "sweep_id", "phase"),  # progress counts, completion checks
        Index("ix_cell_sweep_model_phase", "sweep_id", "model_hash", "phase"),  # a release's pending cells of a model
    )

    id: int | None = Field(default=None, primary_key=True)
    sweep_id: str = Field(foreign_key="sweep.id", index=True, max_length=32)
    model_label: str = Field(max_length=200)
    model_hash: str = Field(max_length=16)
    provider: str = Field(max_length=32)
    condition: str = Field(max_length=1)
    fixture_id: str = Field(max_length=32)
    fixture_version: str = Field(max_length=32)
    repeat: int
    high_risk: bool = False
    phase: str = Field(default=Phase.pending, max_length=16, index=True)
    state: str | None = Field(default=None, max_length=16, index=True)
    state_reason: str | None = Field(default=None, sa_column=Column(Text))
    attempts: int = 0
    lease_owner: str | None = Field(default=None, max_length=200)
    lease_until: datetime | None = None
    not_before: datetime | None = None  # earliest time the next try may start (backoff / cool-down)
    updated_at: datetime = Field(default_factory=utcnow)
    # Set by a rerun (migration 0007): the attempts before it (superseded; the attempt budget counts
    # from here), the scoring run its new results start at (earlier results superseded), and the rerun.
    attempt_base: int = 0
    result_base: int = 0
    rerun_id: int | None = Field(default=None, foreign_key="rerun.id")

    @property
    def key(self) -> str:
        return cell_key(self)


def cell_key(cell: Any) -> str:
    """The cell's deterministic key (what the UNIQUE constraint holds), from a row or a Cell."""
    fixture = f"{cell.fixture_id}@{cell.fixture_version}"
    return f"{cell.sweep_id}|{cell.model_hash}|{cell.condition}|{fixture}|r{cell.repeat}"


def cell_place(key: str) -> str:
    """A cell key without its sweep id: the same for the same model, condition, fixture and repeat in any
    sweep (what the simulator draws from, so two runs of one spec get the same answers)."""
    return key.split("|", 1)[1] if "|" in key else key


class Attempt(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    cell_id: int = Field(foreign_key="cell.id", index=True)
    number: int
    worker: str | None = Field(default=None, max_length=200)
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    outcome: str = Field(max_length=24)  # the OutcomeClass of the last round
    http_status: int | None = None
    error: str | None = Field(default=None, sa_column=Column(Text))
    output_text: str | None = Field(default=None, sa_column=Column(Text))
    finish_reason: str | None = Field(default=None, max_length=48)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    latency_ms: float | None = None
    served_model: str | None = Field(default=None, max_length=200)
    provider_request_id: str | None = Field(default=None, max_length=200)
    reasoning_params: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # Every HTTP round as it happened: request as sent (no secrets), status, relevant headers, raw body.
    rounds: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    simulated: bool = False


# How the state_reason of a cell never sent because of the sweep's budget begins (workers/cells/budget.py):
# such a cell is done with no result state (scoring/rates.py counts it NOT_RUN, outside every denominator).
NOT_RUN_REASON = "not run: budget reached"


# How a JudgementRow's parse_error begins when its call got no answer (written by grading/judging.py,
# counted by results/exclusions.py): a stored string, so its one home is beside the row.
CALL_FAILED = "judge call failed"
# How an open cell's state_reason begins while its scoring waits for its pool's slot (written by
# grading/scorer.py, counted by sweeps/progress.py); a finished cell's state_reason replaces it.
SLOT_WAIT = "waiting for its pool's slot"


class JudgementRow(SQLModel, table=True):
    """One try of one judge on one cell, as stored (table `judgement`); the parsed judgement itself is
    scoring/judge.py:Judgement."""

    __tablename__ = "judgement"

    id: int | None = Field(default=None, primary_key=True)
    cell_id: int = Field(foreign_key="cell.id", index=True)
    scoring_run: int
    judge_label: str = Field(max_length=200)
    judge_round: int = 1  # 2 = blind re-judge with the presentation order swapped
    prompt_sha256: str = Field(max_length=64)
    raw_text: str | None = Field(default=None, sa_column=Column(Text))
    parsed: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    parse_error: str | None = Field(default=None, sa_column=Column(Text))
    simulated: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    # The call behind the text (migration 0002): why it ended, its size and time, the request as sent
    # (without secrets), and what this try changed from the one before (a retry must differ).
    finish_reason: str | None = Field(default=None, max_length=48)
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_ms: float | None = None
    request_sent: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    retry_change: str | None = Field(default=None, sa_column=Column(Text))


class Result(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("cell_id", "scoring_run", name="uq_result_run"),)

    id: int | None = Field(default=None, primary_key=True)
    cell_id: int = Field(foreign_key="cell.id", index=True)
    sweep_id: str = Field(foreign_key="sweep.id", index=True, max_length=32)
    scoring_run: (
        int  # 0 = decided at execution (block / infra); 1.. = scorer runs; human rows are adjudications
    )
    state: str = Field(max_length=16, index=True)
    task_correctness: int | None = None
    evidence_discipline: int | None = None
    uncertainty_handling: int | None = None
    failure_control: int | None = None
    total: int | None = None
    fatal_criterion: str | None = Field(default=None, max_length=48)
    rationale: str | None = Field(default=None, sa_column=Column(Text))
    details: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    scorer_version: str = Field(max_length=32)
    created_at: datetime = Field(default_factory=utcnow)


class Adjudication(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    cell_id: int = Field(foreign_key="cell.id", index=True)
    reviewer: str = Field(max_length=200)
    state: str = Field(max_length=16)
    scores: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    note: str | None = Field(default=None, sa_column=Column(Text))
    created_at: datetime = Field(default_factory=utcnow)


class Rerun(SQLModel, table=True):
    """One rerun of a sweep's finished cells (the protocol's "fix or document the environment and
    rerun"): what was chosen, how many cells, and the note saying what was fixed. The cells' earlier
    attempts and results stay; Cell.attempt_base / result_base mark where they end."""

    id: int | None = Field(default=None, primary_key=True)
    sweep_id: str = Field(foreign_key="sweep.id", index=True, max_length=32)
    number: int  # 1, 2, ... within the sweep
    created_at: datetime = Field(default_factory=utcnow)
    states: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    model: str | None = Field(default=None, max_length=200)
    fixture: str | None = Field(default=None, max_length=32)
    cells: int
    note: str | None = Field(default=None, sa_column=Column(Text))


class Aggregate(SQLModel, table=True):
    sweep_id: str = Field(primary_key=True, foreign_key="sweep.id", max_length=32)
    claimed_by: str | None = Field(default=None, max_length=200)
    claimed_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    summary: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # The summary's by_fixture_condition, apart (it grows with the sweep; most readers want the rest):
    # aggregation.stored_summary joins them back. NULL for summaries stored before migration 0005,
    # which hold their rows inside.
    fixture_rows: list[Any] | None = Field(default=None, sa_column=Column(JSON))


def table_of(model: type[SQLModel]) -> Table:
    """A table model's Core Table: the `__table__` SQLModel sets at class creation, which mypy cannot see."""
    table = inspect(model).local_table
    assert isinstance(table, Table), f"{model.__name__} maps no single table"
    return table
