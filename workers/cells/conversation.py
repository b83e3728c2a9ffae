"""One try's conversation with the model: the prompt, then calculator rounds for numeric fixtures.

The conversation holds one in-flight slot for its whole life: execute_cell (execution.py) takes it
before the claim, and later rounds pass that lease to the limiter as `holding`, so they wait only for
rate and token budget, never for a second slot (with `max_in_flight: 1` that slot would be their own).

A conversation that cannot finish is never the model's answer: no slot for a later round within the
bounded wait, a later round lost to a provider fault, the hard-time-limit guard, or a model still
calling the calculator after `max_tool_rounds`. It ends with a non-scorable outcome whose error says
"tool conversation incomplete: ...", so the record step retries the cell (its slot given back) and,
when the attempts run out, ends it INFRA_ERROR naming why. The hard-time-limit guard is final: the
cell ends INFRA_ERROR at once naming the model and the limit (a retry would be cut at the same round
and pay for the rounds before it again).

Every round is recorded (request as sent, status, headers, raw body, latency); calculator calls are
evaluated exactly by the harness and their records kept with the attempt. A round that is not sent
(the lease was lost, the limiter kept it waiting, it could overrun the hard time limit) is recorded
too, with `sent: false` and the reason, so the attempt's rounds are exactly the requests it made.
"""

from __future__ import annotations

import time
from dataclasses import replace

from afpbench.fixtures.numeric_schema import NumericSpec
from afpbench.scoring.calculator import CalculatorError, evaluate, shown_result
from afpbench.scoring.render import render
from afpbench.workers.cells.claim import CellRow
from afpbench.workers.limits.base import Grant, Limiter, Limits
from afpbench.workers.limits.shared import get_limiter
from afpbench.workers.providers.families import adapter_for
from afpbench.workers.providers.types import AdapterResult, ChatRequest, OutcomeClass, failure_result
from afpbench.workers.settings import get_settings
from afpbench.workers.store.lease import Hold
from afpbench.workers.store.lossless import body_record
from afpbench.workers.store.models import Cell
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.pools import pool_limits, pool_of
from afpbench.workers.sweeps.progress import is_cancelled
from afpbench.workers.sweeps.spec import ModelSpec
from afpbench.workers.sweeps.time_limits import slot_lease_s, sweep_execution_limits

INCOMPLETE = "tool conversation incomplete"
# Outcomes of a later round that lose the conversation (the cell retries); the others keep their own
# meaning (a provider block, a refused key, an over-long prompt, a length-truncated final answer).
_LOST = (OutcomeClass.infra_error, OutcomeClass.rate_limited, OutcomeClass.overloaded)


def estimate_tokens(messages: list[dict], params: dict) -> int:
    chars = sum(len(m.get("content") or "") for m in messages)
    return chars // 4 + int(params.get("max_tokens") or params.get("max_completion_tokens") or 1024)


def _run_calculator(result: AdapterResult, round_no: int, numeric: NumericSpec | None) -> tuple[list[dict], list[dict]]:
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
                output = shown_result(value, numeric)  # rounded as the fixture declares; the ladder matches it
                record["result"] = output
            except CalculatorError as exc:
                output = f"error: {exc}"
                record["error"] = str(exc)
        records.append(record)
        messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
    return records, messages


def round_record(result: AdapterResult, sent: bool = True) -> dict:
    return {
        "sent": sent,
        "request": result.request_sent,
        "http_status": result.http_status,
        "outcome": result.outcome.value,
        "headers": result.headers,
        **body_record(result.raw_bytes, result.raw_body),  # the exact bytes too when the text is not them
        "latency_ms": round(result.latency_ms, 3),
        "error": result.error,
    }


def _not_sent(round_no: int, reason: str) -> AdapterResult:
    """The result of a round that was never sent: an infra error (the try is retried), named."""
    return failure_result(OutcomeClass.infra_error, f"round {round_no} not sent: {reason}")


def incomplete(reason: str, outcome: OutcomeClass = OutcomeClass.infra_error) -> AdapterResult:
    """The result of a conversation that could not finish: never scorable, the error names why."""
    return failure_result(outcome, f"{INCOMPLETE}: {reason}")


def _round_slot(
    limiter: Limiter, pool: str, limits: Limits, tokens: int, holding: str | None, budget_s: float, lease_s: float
) -> Grant:
    """Wait (at most budget_s) for a later round's rate and token budget, holding the conversation's
    in-flight lease. Reserving ahead (reserve_s) paces this round against other waiting tasks instead
    of racing them at every refill. A grant carries a lease only when the caller held none."""
    deadline = time.monotonic() + budget_s
    prepaid = False
    while True:
        left = deadline - time.monotonic()
        grant = limiter.acquire(pool, limits, tokens, reserve_s=max(0.0, left), prepaid=prepaid,
                                holding=holding, lease_s=lease_s)
        if grant.granted:
            return grant
        prepaid = grant.prepaid
        if grant.wait_s > deadline - time.monotonic():
            if prepaid:  # the reserved request will never be sent
                limiter.refund(pool, limits, tokens)
            return grant
        time.sleep(grant.wait_s)


def converse(
    model: ModelSpec, inputs: SweepInputs, cell: Cell | CellRow, hold: Hold | None = None, holding: str | None = None
) -> tuple[AdapterResult, list[dict], list[dict], dict]:
    """All rounds of one try. Returns the last result, round records, tool-call records, token sums.

    `hold` is the claim's lease (store/lease.py): once it is lost, no further round is sent. `holding` is the
    in-flight lease execute_cell took for round one; it covers every round."""
    settings = get_settings()
    fixture = inputs.fixtures[cell.fixture_id]
    prompt = render(cell.condition, fixture, inputs.instructions.text(cell.condition))
    endpoint = endpoint_for(model)
    adapter = adapter_for(model.provider)
    limiter = get_limiter()
    pool = pool_of(endpoint)
    limits = pool_limits(inputs.spec, model)
    messages: list[dict] = prompt.messages()  # later rounds add assistant turns with tool calls
    rounds: list[dict] = []
    tool_records: list[dict] = []
    tokens = {"input": 0, "output": 0, "cached": 0, "reasoning": 0, "latency_ms": 0.0}
    result: AdapterResult | None = None
    started = time.monotonic()


    for round_no in range(1, settings.max_tool_rounds + 1):
        estimate = estimate_tokens(messages, model.params)
        if hold is not None and hold.lost:
            result = _not_sent(round_no, "the lease was taken over by another claim")
            rounds.append(round_record(result, sent=False))
            break
        if round_no > 1 and hold is not None and is_cancelled(cell.sweep_id):
            # Nothing is sent after a cancel; the record says why the conversation stopped here. Round
            # one needs no read of its own: the claim just before it refuses a cancelled sweep's cell.
            result = _not_sent(round_no, "the sweep was cancelled")
            rounds.append(round_record(result, sent=False))
            break
        if round_no > 1:
            # The thread pool does not enforce Celery's hard time limit, so the conversation does: a
            # round that could overrun it (waiting for its slot included) is not started. The limit is the
            # one its execute message carries (sweeps/time_limits.py), not a constant a raised timeout_s outgrows.
            hard_limit_s = sweep_execution_limits(inputs, model, settings).hard_s
            spare = (hard_limit_s - (time.monotonic() - started)
                     - endpoint.connect_timeout_s - endpoint.timeout_s)
            if spare <= 0:
                # Final: a retry would send the same rounds and be cut at the same cap, paying for them again.
                why = (f"round {round_no} could exceed the task's hard time limit of {hard_limit_s} s (from "
                       f"timeout_s {model.timeout_s:g} s and the tool rounds, at most AFP_VISIBILITY_TIMEOUT_S "
                       f"- 60 s); raise AFP_VISIBILITY_TIMEOUT_S and AFP_LEASE_EXPIRY_S, or lower timeout_s or "
                       f"AFP_MAX_TOOL_ROUNDS")
                final = f"the declared time limits cannot fit model {model.display}'s conversation"
                result = replace(incomplete(why), final=final)
                rounds.append(round_record(result, sent=False))
                break
            budget = min(settings.tool_round_wait_s, spare)
            grant = _round_slot(limiter, pool, limits, estimate, holding, budget, slot_lease_s(model))
            if not grant.granted:
                result = incomplete(f"no rate slot for round {round_no} within {budget:g} s "
                                    f"({grant.reason or 'limiter'})")
                rounds.append(round_record(result, sent=False))
                break
            if hold is not None and hold.lost:  # lost while waiting for the slot
                limiter.release(pool, grant.lease)
                result = _not_sent(round_no, "the lease was taken over by another claim while waiting")
                rounds.append(round_record(result, sent=False))
                break
            lease = grant.lease
        else:
            lease = None  # the conversation's own lease, released by execute_cell
        result = adapter.call(endpoint, ChatRequest(messages, prompt.tools, {"X-Afpbench-Cell": cell.key}))
        if lease or limits.tokens_per_min:
            # Correct the token budget with the reported usage; round one's estimate is what
            # execute_cell took (before the prompt was rendered).
            taken = estimate_tokens([], model.params) if round_no == 1 else estimate
            used = (result.usage.input_tokens or 0) + (result.usage.output_tokens or 0)
            limiter.release(pool, lease, taken, used if result.usage.input_tokens is not None else None)
        if result.outcome in (OutcomeClass.rate_limited, OutcomeClass.overloaded):
            limiter.cool_down(pool, result.retry_after_s or 1.0)
        rounds.append(round_record(result))
        for key, value in (
            ("input", result.usage.input_tokens),
            ("output", result.usage.output_tokens),
            ("cached", result.usage.cached_tokens),
            ("reasoning", result.usage.reasoning_tokens),
        ):
            tokens[key] += value or 0
        tokens["latency_ms"] += result.latency_ms
        if round_no > 1 and result.outcome in _LOST:
            # Keep the outcome class (a 429 retries on the rate-limit budget) and say what was lost.
            result = replace(result, error=f"{INCOMPLETE}: round {round_no} lost: {result.error or result.outcome}")
            break
        if result.outcome != OutcomeClass.tool_call or not prompt.tools:
            break
        records, tool_messages = _run_calculator(result, round_no, fixture.numeric)
        tool_records.extend(records)
        messages = messages + [
            {
                "role": "assistant",
                "content": result.text,
                "tool_calls": [c.to_message_dict() for c in result.tool_calls],
            },
            *tool_messages,
        ]
    else:
        # Still calling the calculator after the last allowed round: cut, not answered.
        assert result is not None
        if result.outcome == OutcomeClass.tool_call and prompt.tools:
            result = incomplete(f"still calling the calculator after max_tool_rounds = {settings.max_tool_rounds}")
            rounds.append(round_record(result, sent=False))  # the verdict on the try, not a request
    assert result is not None
    return result, rounds, tool_records, tokens


def sent_rounds(rounds: list[dict]) -> int:
    """How many of a try's rounds were sent (records written before `sent` existed were all sent)."""
    return sum(1 for r in rounds if r.get("sent", True))
