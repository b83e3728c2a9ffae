"""Request and response bodies of the HTTP API (the sweep spec itself is workers.sweeps.spec.SweepSpec, one
cell's run record is workers.results.record_model.RunRecord, and the sweep report's JSON is
workers.results.summary.SweepSummary, documented here as SweepReport)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from afpbench.fixtures.schema import FatalCriterionId
from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.scoring.states import ResultState
from afpbench.workers.results.record_model import RunRecord as RunRecord  # the body of GET /cells/{cell_id}
from afpbench.workers.results.summary import SweepSummary as SweepAggregate
from afpbench.workers.results.table_spec import TableRows
from afpbench.workers.sweeps.progress import Stages

MAX_PAGE = 500
Score = Annotated[int, Field(ge=0, le=2)]


class ErrorMessage(BaseModel):
    """The body of a 401, 404, 409, 413 or 424 answer."""

    detail: str


class Page(BaseModel):
    total: int
    limit: int
    offset: int


class SweepCreated(BaseModel):
    id: str
    seal: str = Field(description="the seal hash: every sealed input, hashed before any cell ran")
    name: str
    simulated: bool
    cells: int
    notices: list[str]


class SweepSummary(BaseModel):
    id: str
    name: str
    status: str
    simulated: bool
    seal: str
    created_at: datetime
    finished_at: datetime | None


class SweepPage(Page):
    items: list[SweepSummary]


class SweepDetail(SweepSummary):
    total: int = Field(description="cells in the sweep")
    done: int = Field(description="cells with a final result state")
    finished: bool
    phases: dict[str, int] = Field(description="cells by pipeline phase")
    stages: Stages = Field(description="cells by stage, the phases named for a reader: waiting (pending, "
                                       "queued), answering (executing), answered (awaiting_score: answer "
                                       "stored, no judge yet), judging (scoring), decided (done)")
    states: dict[str, int] = Field(description="finished cells by result state (all six counted apart)")
    attempts: int
    notices: list[str]


class SweepCancelled(BaseModel):
    id: str
    status: str
    unfinished: int


class SweepResumed(BaseModel):
    id: str
    resent: int = Field(description="messages sent again (duplicates are harmless: tasks are idempotent)")


RerunState = Literal["INFRA_ERROR", "PROVIDER_BLOCK"]


class RerunRequest(BaseModel):
    """Which finished cells get new attempts (the protocol's "fix or document the environment and rerun")."""

    model_config = ConfigDict(extra="forbid")
    states: list[RerunState] = Field(default=["INFRA_ERROR", "PROVIDER_BLOCK"], min_length=1)
    model: str | None = Field(default=None, description="one model's label; default every model")
    fixture: str | None = Field(default=None, description="one fixture id; default every fixture")
    note: str | None = Field(default=None, max_length=2000, description="what was fixed or documented")


class SweepRerun(BaseModel):
    id: str
    rerun: int | None = Field(description="the sweep's rerun number; null when there was nothing to rerun")
    cells: int = Field(description="cells reopened for new attempts (0: nothing to rerun)")
    message: str


class CellSummary(BaseModel):
    id: int
    sweep_id: str
    model: str
    model_hash: str
    provider: str
    condition: str
    fixture_id: str
    fixture_version: str
    repeat: int
    high_risk: bool
    phase: str
    state: str | None
    state_reason: str | None
    attempts: int
    updated_at: datetime


class CellPage(Page):
    items: list[CellSummary]


class Dispute(BaseModel):
    cell_id: int
    sweep_id: str
    model: str
    condition: str
    fixture: str
    repeat: int
    reason: str | None


class DisputePage(Page):
    items: list[Dispute]


class DecisionRequest(BaseModel):
    """A human decision on a GRADER_DISPUTE cell; on any other finished cell only as an explicit
    override with a reason. It adds rows and overwrites nothing; reports and exports list it."""

    model_config = ConfigDict(extra="forbid")

    reviewer: str = Field(min_length=1, max_length=200)
    state: ResultState = Field(description="the resolved state; GRADER_DISPUTE is refused")
    scores: dict[str, Score] | None = Field(
        default=None, description=f"0..2 for each of {', '.join(DIMENSIONS)}"
    )
    fatal_criterion: FatalCriterionId | None = None
    note: str = Field(min_length=1, max_length=20_000)
    override: bool = Field(default=False, description="required to decide a cell that is not GRADER_DISPUTE")
    reason: str | None = Field(default=None, max_length=20_000, description="why the verdict is overridden")


class DecisionRecorded(BaseModel):
    cell_id: int
    from_state: str | None
    state: str
    override: bool
    adjudication_id: int | None
    scoring_run: int


class SweepReport(SweepAggregate):
    """GET /sweeps/{sweep_id}/report?format=json: the sweep's summary (workers.results.summary.SweepSummary;
    its own name is taken here by the sweep list's item), with every report table's rows as the md and html
    reports show them (workers/results/tables.py)."""

    tables: list[TableRows]


class Liveness(BaseModel):
    """/healthz: the server answers (nothing else is checked)."""

    status: str
    mode: str


class Health(BaseModel):
    """/readyz: whether the database answers through the server's pool."""

    status: str
    database: str
    mode: str
    detail: dict[str, Any] = Field(default_factory=dict)
