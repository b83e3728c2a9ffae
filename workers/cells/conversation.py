"""One try's conversation with the model: the prompt, then calculator rounds for numeric fixtures.

Round one's limiter slot is granted before the claim (execution.py); later rounds ask for their own.
Every round is recorded (request as sent, status, headers, raw body, latency); calculator calls are
evaluated exactly by the harness and their records kept with the attempt. A round that is not sent
(the lease was lost, the limiter kept it waiting, it could overrun the hard time limit) is recorded
too, with `sent: false` and the reason, so the attempt's rounds are exactly the requests it made.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from afpbench.scoring.calculator import CalculatorError, evaluate
from afpbench.scoring.render import render
from afpbench.workers.cells.lease import Hold
from afpbench.workers.limits.base import Limiter, pool_of
from afpbench.workers.limits.shared import get_limiter
from afpbench.workers.providers.endpoints import endpoint_for
from afpbench.workers.providers.registry import adapter_for
from afpbench.workers.providers.types import AdapterResult, ChatRequest, OutcomeClass, failure_result
from afpbench.workers.settings import get_settings
from afpbench.workers.store.models import Cell
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.spec import ModelSpec


def estimate_tokens(messages: list[dict], params: dict) -> int:
    chars = sum(len(m.get("content") or "") for m in messages)
    return chars // 4 + int(params.get("max_tokens") or params.get("max_completion_tokens") or 1024)


def _run_calculator(result: AdapterResult, round_no: int) -> tuple[list[dict], list[dict]]:
    """Evaluate every calculator call exactly; return (records for the attempt, tool messages)."""
    records, messages = [], []
    for call in result.tool_calls:
        record = {"round": round_no, "id": call.id, "name": call.name, "arguments_raw": call.arguments_raw}
        expression = (call.arguments or {}).get("expression") if call.name == "calculator" else None
        if not isinstance(expression, str):
            output = f"error: unknown tool {call.name!r} or missing 'expression' argument"
            record["error"] = output
        else:
            record["expression"] = expression
            try:
                value = evaluate(expression)
                output = str(value)
                record["result"] = output
            except CalculatorError as exc:
                output = f"error: {exc}"
                record["error"] = str(exc)
        records.append(record)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    return records, messages


def _round_record(result: AdapterResult, sent: bool = True) -> dict:
    return {
        "sent": sent,
        "request": result.request_sent,
        "http_status": result.http_status,
        "outcome": result.outcome.value,
        "headers": result.headers,
        "raw_body": result.raw_body,
        "latency_ms": round(result.latency_ms, 3),
        "error": result.error,
    }


def _not_sent(round_no: int, reason: str) -> AdapterResult:
    """The result of a round that was never sent: an infra error (the try is retried), named."""
    return failure_result(OutcomeClass.infra_error, f"round {round_no} not sent: {reason}")


def _grant_next_round(
    limiter: Limiter, pool: str, model: ModelSpec, estimate: int, fits: Callable[[float], bool], hold: Hold | None
) -> tuple[str | None, str | None]:
    """Wait (briefly, bounded) for a later round's limiter slot. Returns (lease, None) when granted,
    or (None, why not) when the round must not be sent: the wait would make the round overrun the
    hard time limit, or the lease was lost meanwhile."""
    waited = 0.0
    grant = limiter.acquire(pool, model.limits, estimate)
    while not grant.granted:
        pause = min(grant.wait_s, 2.0)
        if waited + pause > 30:
            return None, f"the limiter kept it waiting over 30 s ({grant.reason})"
        if not fits(pause):
            return None, f"waiting for the limiter ({grant.reason}) would overrun the hard time limit"
        time.sleep(pause)
        waited += pause
        if hold is not None and hold.lost:
            return None, "the lease was taken over by another claim while waiting for the limiter"
        grant = limiter.acquire(pool, model.limits, estimate)
    return grant.lease, None


def converse(
    model: ModelSpec, inputs: SweepInputs, cell: Cell, hold: Hold | None = None
) -> tuple[AdapterResult, list[dict], list[dict], dict]:
    """All rounds of one try. Returns the last result, round records, tool-call records, token sums.

    `hold` is the claim's lease (lease.py): once it is lost, no further round is sent."""
    settings = get_settings()
    fixture = inputs.fixtures[cell.fixture_id]
    prompt = render(cell.condition, fixture, inputs.instructions.text(cell.condition))
    endpoint = endpoint_for(model)
    adapter = adapter_for(model.provider)
    limiter = get_limiter()
    pool = pool_of(endpoint)
    messages = prompt.messages()
    rounds: list[dict] = []
    tool_records: list[dict] = []
    tokens = {"input": 0, "output": 0, "cached": 0, "reasoning": 0, "latency_ms": 0.0}
    result: AdapterResult | None = None
    started = time.monotonic()

    def fits(extra_wait_s: float = 0.0) -> bool:
        # The thread pool does not enforce Celery's hard time limit, so the conversation does: a round
        # that could overrun it (waits included) is not started; the try ends as an infra error.
        worst_case = time.monotonic() - started + extra_wait_s + endpoint.connect_timeout_s + endpoint.timeout_s
        return worst_case <= settings.task_hard_time_limit_s

    for round_no in range(1, settings.max_tool_rounds + 1):
        estimate = estimate_tokens(messages, model.params)
        lease = None
        unsent = None
        if hold is not None and hold.lost:
            unsent = "the lease was taken over by another claim"
        elif round_no > 1 and not fits():
            unsent = (f"tool conversation stopped after {round_no - 1} rounds: another round could exceed "
                      f"the hard time limit of {settings.task_hard_time_limit_s} s")
        elif round_no > 1:  # the first round's slot was granted before the claim
            lease, unsent = _grant_next_round(limiter, pool, model, estimate, fits, hold)
        if unsent is not None:
            result = _not_sent(round_no, unsent)
            rounds.append(_round_record(result, sent=False))
            break
        result = adapter.call(endpoint, ChatRequest(messages, prompt.tools, {"X-Afpbench-Cell": cell.key}))
        if lease or model.limits.tokens_per_min:  # round 1's lease is released by the caller
            used = (result.usage.input_tokens or 0) + (result.usage.output_tokens or 0)
            limiter.release(pool, lease, estimate, used if result.usage.input_tokens is not None else None)
        if result.outcome in (OutcomeClass.rate_limited, OutcomeClass.overloaded):
            limiter.cool_down(pool, result.retry_after_s or 1.0)
        rounds.append(_round_record(result))
        for key, value in (
            ("input", result.usage.input_tokens),
            ("output", result.usage.output_tokens),
            ("cached", result.usage.cached_tokens),
            ("reasoning", result.usage.reasoning_tokens),
        ):
            tokens[key] += value or 0
        tokens["latency_ms"] += result.latency_ms
        if result.outcome != OutcomeClass.tool_call or not prompt.tools:
            break
        records, tool_messages = _run_calculator(result, round_no)
        tool_records.extend(records)
        messages = messages + [
            {
                "role": "assistant",
                "content": result.text,
                "tool_calls": [c.to_message_dict() for c in result.tool_calls],
            },
            *tool_messages,
        ]
    assert result is not None
    return result, rounds, tool_records, tokens


def sent_rounds(rounds: list[dict]) -> int:
    """How many of a try's rounds were sent (records written before `sent` existed were all sent)."""
    return sum(1 for r in rounds if r.get("sent", True))
