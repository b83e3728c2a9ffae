"""The run record's typed contract: what workers/results/records.py builds from the stored rows, the
CLI prints, the HTTP API returns for one cell and the bundle writes one JSON line of per cell
(`record.model_dump(mode="json")`).

Keys follow reference/protocol.yaml `run_record` (model ... human_review_outcome); history (every
attempt, result, judgement) and provenance ride beside them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


Json = dict[str, JsonValue]  # a JSON object as stored (request rounds, parsed judge output, result details)


class TokenUsage(_Record):
    input: int | None
    output: int | None
    cached: int | None
    reasoning: int | None


class AttemptEntry(_Record):
    """Every field of one attempt; the scored attempt's raw bodies sit in RunRecord.raw_output."""

    id: int | None
    number: int
    worker: str | None
    started_at: str | None
    finished_at: str | None
    outcome: str
    http_status: int | None
    error: str | None
    output_text: str | None
    finish_reason: str | None
    tool_calls: list[Json]
    tokens: TokenUsage
    latency_ms: float | None
    served_model: str | None
    provider_request_id: str | None
    reasoning_params: Json
    rounds: list[Json] = Field(description="every HTTP round as it happened (no secrets)")
    simulated: bool
    superseded: str | None = Field(default=None, description=(
        "set when a rerun gave the cell new attempts after this one: which rerun, and its note "
        "(workers/cells/rerun.py); the record stays, the latest result is the one reported"))


class ResultEntry(_Record):
    scoring_run: int
    state: str
    scores: dict[str, int | None]
    total: int | None
    fatal_criterion: str | None
    rationale: str | None
    details: Json
    scorer_version: str
    created_at: str | None
    superseded: str | None = Field(default=None, description=(
        "set when a rerun gave the cell new attempts after this one: which rerun, and its note "
        "(workers/cells/rerun.py); the record stays, the latest result is the one reported"))


class JudgementEntry(_Record):
    scoring_run: int
    judge: str
    round: int
    order: Literal["original", "swapped (blind re-judge)"]
    prompt_sha256: str
    raw_text: str | None
    parsed: Json | None
    parse_error: str | None
    simulated: bool
    created_at: str | None
    finish_reason: str | None
    tokens: TokenUsage
    latency_ms: float | None
    request_sent: Json | None = Field(description="the judge request as sent (no secrets)")
    retry_change: str | None = Field(description="what this try changed from the one before")


class Decision(_Record):
    """One human decision (adjudication) on the cell."""

    reviewer: str
    from_state: str | None = Field(description="the cell's state before the decision")
    state: str = Field(description="the state decided (to)")
    override: bool = Field(description="the cell was not GRADER_DISPUTE: a judged verdict was overridden")
    reason: str | None = Field(description="why: the override reason, else the reviewer's note")
    scores: Json | None
    note: str | None
    created_at: str | None


class InstructionVersion(_Record):
    version: str | None
    condition: str
    sha256: str | None


class RawOutput(_Record):
    attempt_id: int | None = Field(description="the scored attempt")
    text: str | None
    raw_bodies: list[str | None]


class JudgeRationale(_Record):
    judge: str
    round: int
    rationales: JsonValue
    scores: JsonValue


class ComponentScores(_Record):
    scores: dict[str, int | None] | None
    total: int | None
    rationale: str | None
    judge_rationales: list[JudgeRationale]


class Latency(_Record):
    ms: float | None


class GraderPromptText(_Record):
    sha256: list[str]
    text: str | None


class GraderPromptFile(_Record):
    sha256: list[str]
    text_file: str = Field(description="the bundle file holding the prompt text (written once)")


class SimulatedFlags(_Record):
    model_output: bool
    grading: bool
    sweep: bool


class RunRecord(_Record):
    """The run record of one cell: the protocol's run_record fields (model ... human_review_outcome),
    then history and provenance beside them."""

    cell_id: int
    cell_key: str
    sweep_id: str
    seal_hash: str | None
    model: str = Field(description="the display label")
    model_hash: str
    model_name: str | None = Field(description="the model name the spec declared")
    provider: str
    served_model_version: str | None
    reasoning_mode: Json | None
    condition: str
    instruction_version: InstructionVersion
    fixture_id: str
    fixture_version: str
    high_risk: bool
    repeat: int
    executed_at: str | None
    raw_output: RawOutput
    component_scores_and_rationale: ComponentScores
    fatal_criterion: str | None
    result_state: str | None
    state_reason: str | None
    tokens: TokenUsage
    tool_calls: list[Json]
    written_tool_call: Json | None = Field(
        description="tool calls the answer wrote as text instead of making them (never executed)")
    latency: Latency
    grader_model: list[str]
    grader_prompt: GraderPromptText | GraderPromptFile
    human_review_outcome: list[Decision] | None
    attempts: list[AttemptEntry]
    results: list[ResultEntry]
    judgements: list[JudgementEntry]
    simulated: SimulatedFlags
