"""One try's conversation with the model: the prompt, then calculator rounds for numeric fixtures.

Round one's limiter slot is granted before the claim (execution.py); later rounds ask for their own.
Every round is recorded (request as sent, status, headers, raw body, latency); calculator calls are
evaluated exactly by the harness and their records kept with the attempt.
"""

from __future__ import annotations

import time

from afpbench.scoring.calculator import CalculatorError, evaluate
from afpbench.scoring.render import render
from afpbench.workers.limits.base import pool_of
from afpbench.workers.limits.shared import get_limiter
from afpbench.workers.providers.endpoints import endpoint_for
from afpbench.workers.providers.registry import adapter_for
from afpbench.workers.providers.types import AdapterResult, ChatRequest, OutcomeClass, failure_result
from afpbench.workers.settings import get_settings
from afpbench.workers.store.lossless import body_record
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


def _round_record(result: AdapterResult) -> dict:
    return {
        "request": result.request_sent,
        "http_status": result.http_status,
        "outcome": result.outcome.value,
        "headers": result.headers,
        **body_record(result.raw_bytes, result.raw_body),  # the exact bytes too when the text is not them
        "latency_ms": round(result.latency_ms, 3),
        "error": result.error,
    }


def converse(
    model: ModelSpec, inputs: SweepInputs, cell: Cell
) -> tuple[AdapterResult, list[dict], list[dict], dict]:
    """All rounds of one try. Returns the last result, round records, tool-call records, token sums."""
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
    for round_no in range(1, settings.max_tool_rounds + 1):
        estimate = estimate_tokens(messages, model.params)
        # The thread pool does not enforce Celery's hard time limit, so the conversation does: a round
        # that could overrun it is not started (the try ends as an infra error and is retried).
        worst_case = time.monotonic() - started + endpoint.connect_timeout_s + endpoint.timeout_s
        if round_no > 1 and worst_case > settings.task_hard_time_limit_s:
            result = failure_result(
                OutcomeClass.infra_error,
                f"tool conversation stopped after {round_no - 1} rounds: another round could exceed "
                f"the hard time limit of {settings.task_hard_time_limit_s} s",
            )
            rounds.append(_round_record(result))
            break
        if round_no > 1:  # the first round's slot was granted before the claim
            grant = limiter.acquire(pool, model.limits, estimate)
            waited = 0.0
            while not grant.granted and waited < 30:  # short, bounded waits inside one conversation
                time.sleep(min(grant.wait_s, 2.0))
                waited += min(grant.wait_s, 2.0)
                grant = limiter.acquire(pool, model.limits, estimate)
            if not grant.granted:
                break
            lease = grant.lease
        else:
            lease = None
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
