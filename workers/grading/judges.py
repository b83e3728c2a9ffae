"""One judge call through the same adapters and shared limiter as the tested models (the judging
round, its retries and the verdict: judging.py).

Every judge call carries the fixture's judgement schema; the adapter sends it as the provider's
structured output, or drops it where that is off (workers/providers/structured.py). The text read back
is the answer, or the forced tool's arguments (Anthropic), and goes through the same strict parse; a
reply cut at max_tokens is named truncated, and a retry feeds the reason back (scoring/judge_reply.py),
since an identical request at temperature 0 returns identical text. A call keeps its finish reason,
tokens, latency and the request as sent (`JudgeCall`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from afpbench.fixtures.schema import Fixture
from afpbench.scoring.judge import (
    JUDGEMENT_SCHEMA_DESCRIPTION,
    JUDGEMENT_SCHEMA_NAME,
    Judgement,
    JudgementError,
    judgement_schema,
)
from afpbench.scoring.judge_reply import JudgeReply, read_reply
from afpbench.workers.errors import JudgeUnavailable
from afpbench.workers.limits.base import Limits
from afpbench.workers.limits.shared import get_limiter
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import AdapterResult, ChatRequest, OutcomeClass, ResponseSchema, Usage
from afpbench.workers.settings import get_settings
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.pools import pool_of
from afpbench.workers.sweeps.spec import ModelSpec
from afpbench.workers.sweeps.time_limits import judge_slot_wait_s, slot_lease_s


class JudgeSlotWait(JudgeUnavailable):
    """No slot for a judge call within AFP_SLOT_WAIT_S: no call was made, so no try is spent; the scorer
    waits again as a retried message (grading/scorer.py). `wait_s`: the limiter's last advice."""

    def __init__(self, message: str, wait_s: float) -> None:
        super().__init__(message)
        self.wait_s = wait_s


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


@dataclass(frozen=True)
class JudgeCall:
    """What one judge call gave: the judgement text (or why there is none) and the facts of the call,
    kept on its Judgement row (finish reason, tokens, latency, the request as sent without secrets)."""

    text: str | None
    error: str | None
    finish_reason: str | None
    usage: Usage
    latency_ms: float | None
    request_sent: dict


def judge_call(
    judge: ModelSpec, messages: list[dict], cell_key: str, response_schema: ResponseSchema | None = None,
    limits: Limits | None = None,
) -> JudgeCall:
    """One judge call through the shared limiter. `limits`: the pool's limits in the sweep
    (limits/base.py:pool_limits), so a judge on the tested model's server shares its cap; the judge's
    own entry when there is no sweep (calibration, fixtures check)."""
    limits = limits or judge.limits
    endpoint = endpoint_for(judge)
    pool = pool_of(endpoint)
    limiter = get_limiter()
    # A judge on a slow local server waits behind the tested model's calls; a wait costs no try.
    wait_s = judge_slot_wait_s(get_settings())
    deadline = time.monotonic() + wait_s
    lease_s = slot_lease_s(judge)
    grant = limiter.acquire(pool, limits, sum(len(m["content"]) for m in messages) // 4 + 1024, lease_s=lease_s)
    while not grant.granted:
        if time.monotonic() > deadline:
            raise JudgeSlotWait(f"judge {judge.display}: no rate or in-flight slot in its pool within "
                                f"{wait_s:g} s ({grant.reason or 'limiter'}); no call was made", grant.wait_s)
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
    error = None if text is not None else f"{result.outcome.value}: {result.error or ''}".strip()
    return JudgeCall(text, error, result.finish_reason, result.usage, result.latency_ms or None, result.request_sent)


def read_call(call: JudgeCall, fixture: Fixture, answer: str) -> Judgement | JudgementError | None:
    """What one call gave, read as the scorer reads it (scoring/judge_reply.py:read_reply: not cut at
    max_tokens, strict JSON, quotes found in the answer): the usable judgement, why the reply cannot be
    used, or None when the call got no reply. The sweep, `fixtures check`, the judge check and
    calibration all read a judge's reply here."""
    if call.error is not None or call.text is None:
        return None
    return read_reply(JudgeReply(call.text, call.finish_reason, call.usage.output_tokens), fixture.fatal_ids(), answer)
