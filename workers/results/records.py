"""The run record of one cell: every field the protocol requires, with all attempts and results as history.

The record is a typed RunRecord (workers/results/record_model.py); its keys follow
reference/protocol.yaml `run_record` (model ... human_review_outcome), with history and provenance
beside them. Stored rows are already free of secrets; as a second layer, the values of
the key environment variables a sweep names are masked in every exported line (exact values only, so
model text is never altered by pattern guesses).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import datetime

from sqlmodel import Session, col, select

from afpbench.reference.protocol_facts import DIMENSIONS
from afpbench.workers.errors import RecordNotFound, SpecError
from afpbench.workers.redact import mask_known
from afpbench.workers.results.record_model import (
    AttemptEntry,
    ComponentScores,
    Decision,
    GraderPromptFile,
    GraderPromptText,
    InstructionVersion,
    JudgementEntry,
    JudgeRationale,
    Latency,
    RawOutput,
    ResultEntry,
    RunRecord,
    SimulatedFlags,
    TokenUsage,
)
from afpbench.workers.settings import get_settings
from afpbench.workers.store.models import (
    Adjudication,
    Attempt,
    Cell,
    JudgementRow,
    Rerun,
    Result,
    Sweep,
    as_utc,
    saved_id,
)
from afpbench.workers.sweeps.spec_loading import parse_spec

__all__ = ["RunRecord", "known_secret_values", "records_jsonl", "run_record"]

History = tuple[list[Attempt], list[Result], list[JudgementRow], list[Adjudication]]


def _iso(value: datetime | None) -> str | None:
    """UTC timestamps, ISO 8601 to the millisecond."""
    return None if value is None else as_utc(value).isoformat(timespec="milliseconds")


def _attempt(a: Attempt, bodies_elsewhere: bool = False, superseded: str | None = None) -> AttemptEntry:
    rounds = a.rounds
    if bodies_elsewhere:
        rounds = [{**r, "raw_body": f"(raw_output.raw_bodies[{i}])"} if "raw_body" in r else r
                  for i, r in enumerate(a.rounds)]
    return AttemptEntry(
        id=a.id, number=a.number, worker=a.worker, started_at=_iso(a.started_at),
        finished_at=_iso(a.finished_at), outcome=a.outcome, http_status=a.http_status, error=a.error,
        output_text=a.output_text, finish_reason=a.finish_reason, tool_calls=a.tool_calls,
        tokens=_tokens(a), latency_ms=a.latency_ms, served_model=a.served_model,
        provider_request_id=a.provider_request_id, reasoning_params=a.reasoning_params,
        rounds=rounds, simulated=a.simulated, superseded=superseded,
    )


def _tokens(a: Attempt | None) -> TokenUsage:
    if a is None:
        return TokenUsage(input=None, output=None, cached=None, reasoning=None)
    return TokenUsage(input=a.input_tokens, output=a.output_tokens, cached=a.cached_tokens,
                      reasoning=a.reasoning_tokens)


def _scores(r: Result) -> dict[str, int | None]:
    return {d: getattr(r, d) for d in DIMENSIONS}


def _result(r: Result, superseded: str | None = None) -> ResultEntry:
    return ResultEntry(
        scoring_run=r.scoring_run, state=r.state, scores=_scores(r), total=r.total,
        fatal_criterion=r.fatal_criterion, rationale=r.rationale, details=r.details,
        scorer_version=r.scorer_version, created_at=_iso(r.created_at), superseded=superseded,
    )


def _judgement(j: JudgementRow) -> JudgementEntry:
    return JudgementEntry(
        scoring_run=j.scoring_run, judge=j.judge_label, round=j.judge_round,
        order="swapped (blind re-judge)" if j.judge_round == 2 else "original",
        prompt_sha256=j.prompt_sha256, raw_text=j.raw_text, parsed=j.parsed,
        parse_error=j.parse_error, simulated=j.simulated, created_at=_iso(j.created_at),
        finish_reason=j.finish_reason,
        tokens=TokenUsage(input=j.input_tokens, output=j.output_tokens, cached=None, reasoning=None),
        latency_ms=j.latency_ms, request_sent=j.request_sent, retry_change=j.retry_change,
    )


def _decision(a: Adjudication, results: list[Result]) -> Decision:
    """The decision with the trail its Result row holds (from which state, override, why)."""
    d = next((r.details for r in results if (r.details or {}).get("adjudication_id") == a.id), None) or {}
    return Decision(reviewer=a.reviewer, from_state=d.get("from_state"), state=a.state,
                    override=bool(d.get("override")), reason=d.get("reason") or a.note, scores=a.scores,
                    note=a.note, created_at=_iso(a.created_at))


def _scored_attempt(attempts: list[Attempt], latest: Result | None) -> Attempt | None:
    """The attempt whose answer the latest result judged; otherwise the latest attempt."""
    wanted = (latest.details or {}).get("attempt_id") if latest else None
    for a in attempts:
        if a.id == wanted:
            return a
    return attempts[-1] if attempts else None


def run_record(session: Session, cell_id: int) -> RunRecord:
    cell = session.get(Cell, cell_id)
    if cell is None:
        raise RecordNotFound(f"no cell with id {cell_id}")
    sweep = session.get(Sweep, cell.sweep_id)
    if sweep is None:  # the foreign key forbids it; named for the type checker
        raise RecordNotFound(f"cell {cell_id}: no sweep with id {cell.sweep_id!r}")
    return _record(sweep, _model_names(sweep), cell, *_history(session, [cell_id])[cell_id],
                   reruns=_reruns(session, sweep.id))


def _reruns(session: Session, sweep_id: str) -> dict[int, str]:
    """rerun id -> how a record names what it superseded: "rerun N (when): note"."""
    return {saved_id(r.id): f"rerun {r.number} ({_iso(r.created_at)})" + (f": {r.note}" if r.note else ": no note")
            for r in session.exec(select(Rerun).where(Rerun.sweep_id == sweep_id))}


def _model_names(sweep: Sweep) -> dict[str, str]:
    """model_hash -> the model name the spec declared (cells carry the hash and the display label)."""
    try:
        return {m.model_hash: m.model for m in parse_spec(sweep.spec).models}
    except SpecError:  # a spec stored by an older version: the record still has label and hash
        return {}


def _history(session: Session, cell_ids: list[int]) -> dict[int, History]:
    """Attempts, results, judgements and adjudications of the given cells, oldest first."""
    out: dict[int, History] = {cid: ([], [], [], []) for cid in cell_ids}
    for a in session.exec(select(Attempt).where(col(Attempt.cell_id).in_(cell_ids))
                          .order_by(col(Attempt.number), col(Attempt.id))):
        out[a.cell_id][0].append(a)
    for r in session.exec(select(Result).where(col(Result.cell_id).in_(cell_ids))
                          .order_by(col(Result.scoring_run), col(Result.id))):
        out[r.cell_id][1].append(r)
    rows = select(JudgementRow).where(col(JudgementRow.cell_id).in_(cell_ids)).order_by(col(JudgementRow.id))
    for j in session.exec(rows):
        out[j.cell_id][2].append(j)
    for d in session.exec(select(Adjudication).where(col(Adjudication.cell_id).in_(cell_ids))
                          .order_by(col(Adjudication.id))):
        out[d.cell_id][3].append(d)
    return out


def _record(sweep: Sweep, model_names: dict[str, str], cell: Cell, attempts: list[Attempt], results: list[Result],
            judgements: list[JudgementRow], adjudications: list[Adjudication],
            judge_prompt_file: str | None = None, reruns: dict[int, str] | None = None) -> RunRecord:
    latest = results[-1] if results else None
    # A rerun reopened the cell: its attempts up to attempt_base and results below result_base are superseded.
    by = (reruns or {}).get(cell.rerun_id) if cell.rerun_id is not None else None
    scored = _scored_attempt(attempts, latest)
    instructions = (sweep.seal_components or {}).get("instructions", {})
    latest_judgements = [j for j in judgements if latest is not None and j.scoring_run == latest.scoring_run]
    prompt_hashes = sorted({j.prompt_sha256 for j in judgements})
    grader_prompt = (GraderPromptFile(sha256=prompt_hashes, text_file=judge_prompt_file) if judge_prompt_file else
                     GraderPromptText(sha256=prompt_hashes, text=(sweep.inputs or {}).get("judge_prompt")))
    return RunRecord(
        cell_id=saved_id(cell.id),
        cell_key=cell.key,
        sweep_id=sweep.id,
        seal_hash=sweep.seal_hash,
        model=cell.model_label,
        model_hash=cell.model_hash,
        model_name=model_names.get(cell.model_hash),
        provider=cell.provider,
        served_model_version=scored.served_model if scored else None,
        reasoning_mode=scored.reasoning_params if scored else None,
        condition=cell.condition,
        instruction_version=InstructionVersion(version=instructions.get("version"), condition=cell.condition,
                                               sha256=instructions.get(cell.condition)),
        fixture_id=cell.fixture_id,
        fixture_version=cell.fixture_version,
        high_risk=cell.high_risk,
        repeat=cell.repeat,
        executed_at=_iso(scored.started_at) if scored else None,
        raw_output=RawOutput(attempt_id=scored.id if scored else None,
                             text=scored.output_text if scored else None,
                             raw_bodies=[r.get("raw_body") for r in scored.rounds] if scored else []),
        component_scores_and_rationale=ComponentScores(
            scores=_scores(latest) if latest else None,
            total=latest.total if latest else None,
            rationale=latest.rationale if latest else None,
            judge_rationales=[JudgeRationale(judge=j.judge_label, round=j.judge_round,
                                             rationales=j.parsed.get("rationales"), scores=j.parsed.get("scores"))
                              for j in latest_judgements if j.parsed],
        ),
        fatal_criterion=latest.fatal_criterion if latest else None,
        result_state=cell.state,
        state_reason=cell.state_reason,
        tokens=_tokens(scored),
        tool_calls=scored.tool_calls if scored else [],
        written_tool_call=(latest.details or {}).get("written_tool_call") if latest else None,
        latency=Latency(ms=scored.latency_ms if scored else None),
        grader_model=sorted({j.judge_label for j in judgements}),
        grader_prompt=grader_prompt,
        human_review_outcome=[_decision(a, results) for a in adjudications] or None,
        attempts=[_attempt(a, a is scored, by if a.number <= cell.attempt_base else None) for a in attempts],
        results=[_result(r, by if r.scoring_run < cell.result_base else None) for r in results],
        judgements=[_judgement(j) for j in judgements],
        simulated=SimulatedFlags(model_output=any(a.simulated for a in attempts),
                                 grading=any(j.simulated for j in judgements), sweep=sweep.simulated),
    )


def known_secret_values(sweep: Sweep) -> list[str]:
    """Values of the key variables the sweep's models and judges name, when set in this process."""
    names = {m.get("api_key_env") for m in [*sweep.spec.get("models", []), *sweep.spec.get("judges", [])]}
    values = [os.environ.get(n) for n in names if n]
    token = get_settings().api_token
    if token is not None:
        values.append(token.get_secret_value())
    return [v for v in values if v]


def records_jsonl(session: Session, sweep_id: str, batch: int = 500,
                  judge_prompt_file: str | None = None) -> Iterator[str]:
    """One JSON line per cell, in cell id order, loaded in batches (history per batch, not per cell).
    With `judge_prompt_file`, records name that file (written once beside them) instead of repeating
    the judge prompt text in every line."""
    sweep = session.get(Sweep, sweep_id)
    if sweep is None:
        raise RecordNotFound(f"no sweep with id {sweep_id!r}")
    secrets = known_secret_values(sweep)
    model_names = _model_names(sweep)
    reruns = _reruns(session, sweep_id)
    last_id = 0
    while True:
        cells = list(session.exec(select(Cell).where(Cell.sweep_id == sweep_id, col(Cell.id) > last_id)
                                  .order_by(col(Cell.id)).limit(batch)))
        if not cells:
            return
        history = _history(session, [saved_id(c.id) for c in cells])
        for cell in cells:
            record = _record(sweep, model_names, cell, *history[saved_id(cell.id)], judge_prompt_file=judge_prompt_file,
                             reruns=reruns)
            line = json.dumps(record.model_dump(mode="json"), ensure_ascii=False, sort_keys=True)
            yield mask_known(line, secrets)
        last_id = saved_id(cells[-1].id)
        session.expunge_all()
