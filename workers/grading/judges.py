"""Judges: one call through the same adapters and shared limiter as the tested models, and a judging
round (every configured judge once, with bounded parse retries), every try kept as a Judgement row.

Every judge call carries the fixture's judgement schema; the adapter sends it as the provider's
structured output, or drops it where that is off (workers/providers/structured.py). The text read back
is the answer, or the forced tool's arguments (Anthropic), and goes through the same strict parse."""

from __future__ import annotations

import time

from sqlmodel import Session

from afpbench.fixtures.schema import Fixture
from afpbench.reference.hashing import text_sha256
from afpbench.scoring.judge import (
    JUDGEMENT_SCHEMA_DESCRIPTION,
    JUDGEMENT_SCHEMA_NAME,
    Judgement,
    JudgementError,
    build_judge_messages,
    judgement_schema,
    read_judgement,
)
from afpbench.workers.cells.time_limits import judge_slot_wait_s, slot_lease_s
from afpbench.workers.errors import JudgeUnavailable
from afpbench.workers.limits.base import pool_limits, pool_of
from afpbench.workers.limits.shared import get_limiter
from afpbench.workers.providers.endpoints import endpoint_for
from afpbench.workers.providers.registry import adapter_for
from afpbench.workers.providers.types import AdapterResult, ChatRequest, OutcomeClass, ResponseSchema
from afpbench.workers.store.lossless import storable_text
from afpbench.workers.store.models import Cell, saved_id
from afpbench.workers.store.models import Judgement as JudgementRow
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.progress import is_cancelled
from afpbench.workers.sweeps.spec import Limits, ModelSpec

# How a judgement row records a call that got no answer (workers/results/exclusions.py counts them).
CALL_FAILED = "judge call failed"


class JudgingCancelled(Exception):
    """The sweep was cancelled between two judge calls: no further judge call is started."""


def judgement_response(fixture: Fixture, swapped: bool = False) -> ResponseSchema:
    """The structured output a judge is asked for on this fixture (and order of presentation)."""
    return ResponseSchema(JUDGEMENT_SCHEMA_NAME, judgement_schema(fixture, swapped), JUDGEMENT_SCHEMA_DESCRIPTION)


def judgement_text(result: AdapterResult, wanted: ResponseSchema | None) -> str | None:
    """The judgement as text: the forced tool's arguments when the provider answered with that tool
    (Anthropic), else the answer text; None when the call gave neither (an error for the caller)."""
    forced = [c for c in result.tool_calls if wanted is not None and c.name == wanted.name]
    if forced and result.outcome in (OutcomeClass.tool_call, OutcomeClass.truncated):
        return forced[0].arguments_raw
    if result.outcome in (OutcomeClass.answer, OutcomeClass.truncated):
        return result.text or ""
    return None


def call_judge(
    judge: ModelSpec, messages: list[dict], cell_key: str, response_schema: ResponseSchema | None = None,
    limits: Limits | None = None,
) -> tuple[str | None, str | None]:
    """One judge call through the shared limiter; returns (raw text, error). `limits`: the pool's limits
    in the sweep (limits/base.py:pool_limits), so a judge on the tested model's server shares its cap;
    the judge's own entry when there is no sweep (calibration, fixtures check)."""
    limits = limits or judge.limits
    endpoint = endpoint_for(judge)
    pool = pool_of(endpoint)
    limiter = get_limiter()
    # A judge on a slow local server waits behind the tested model's calls: one call's length at least.
    wait_s = judge_slot_wait_s(judge)
    deadline = time.monotonic() + wait_s
    lease_s = slot_lease_s(judge)
    grant = limiter.acquire(pool, limits, sum(len(m["content"]) for m in messages) // 4 + 1024, lease_s=lease_s)
    while not grant.granted:
        if time.monotonic() > deadline:
            raise JudgeUnavailable(f"judge {judge.display}: waited {wait_s:g} s for its pool's rate or "
                                   f"in-flight slot ({grant.reason or 'limiter'})")
        time.sleep(min(grant.wait_s, 2.0))
        grant = limiter.acquire(pool, limits, 0, lease_s=lease_s)
    try:
        result = adapter_for(judge.provider).call(
            endpoint, ChatRequest(messages, [], {"X-Afpbench-Cell": cell_key}, response_schema)
        )
    finally:
        limiter.release(pool, grant.lease)
    if result.outcome in (OutcomeClass.rate_limited, OutcomeClass.overloaded):
        limiter.cool_down(pool, result.retry_after_s or 1.0)
    text = judgement_text(result, response_schema)
    if text is None:
        return None, f"{result.outcome.value}: {result.error or ''}".strip()
    return text, None


def judge_round(
    session: Session,
    cell: Cell,
    inputs: SweepInputs,
    judges: list[ModelSpec],
    response: str,
    originated: list[str],
    scoring_run: int,
    judge_round: int,
) -> tuple[list[Judgement], int]:
    """Every configured judge once (with bounded parse retries); rows stored; returns (usable, failures)."""
    fixture = inputs.fixtures[cell.fixture_id]
    fatal_ids = fixture.fatal_ids()
    messages = build_judge_messages(
        fixture, response, inputs.judge_prompt, originated, swapped=judge_round == 2
    )
    wanted = judgement_response(fixture, swapped=judge_round == 2)
    prompt_hash = text_sha256(inputs.judge_prompt)

    def row(judge: ModelSpec, raw: str | None, parsed: dict | None, parse_error: str | None) -> JudgementRow:
        """Every try is kept: the raw text, and either the parsed judgement or why it is unusable."""
        return JudgementRow(
            cell_id=saved_id(cell.id), scoring_run=scoring_run, judge_label=judge.display, judge_round=judge_round,
            # A judge's text may hold bytes a database column cannot (NUL on PostgreSQL): stored readable.
            prompt_sha256=prompt_hash, raw_text=None if raw is None else storable_text(raw), parsed=parsed,
            parse_error=parse_error,
            simulated=judge.simulated,
        )

    usable: list[Judgement] = []
    failures = 0
    for judge in judges:
        parsed: Judgement | JudgementError | None = None
        infra_errors = 0
        for _ in range(inputs.spec.dispute_rule.max_parse_retries + 1):
            if is_cancelled(cell.sweep_id):
                raise JudgingCancelled(f"sweep cancelled during judging round {judge_round}: judge "
                                       f"{judge.display} not called; the calls made are kept")
            raw, error = call_judge(judge, messages, f"{cell.key}|judge{judge_round}", wanted,
                                    pool_limits(inputs.spec, judge))
            if error:
                infra_errors += 1
                session.add(row(judge, None, None, f"{CALL_FAILED}: {error}"))
                continue
            assert raw is not None, "call_judge returns either a text or an error"
            parsed = read_judgement(raw, fatal_ids, response)
            if isinstance(parsed, Judgement):
                session.add(row(judge, raw, _judgement_json(parsed), None))
                break
            session.add(row(judge, raw, None, parsed.reason))
        if infra_errors and parsed is None:
            raise JudgeUnavailable(f"judge {judge.display} unavailable: {infra_errors} failed calls")
        if isinstance(parsed, Judgement):
            usable.append(parsed)
        else:
            failures += 1
    return usable, failures


def _judgement_json(j: Judgement) -> dict:
    return {
        "scores": j.scores,
        "rationales": j.rationales,
        "fatal_flags": j.fatal_flags,
        "quotes": j.quotes,
        "total": j.total,
    }
