"""Classification helpers shared by the adapters: HTTP status buckets, error lines, retry hints,
header subsets, body decoding. Pure functions, no I/O."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from afpbench.workers.providers.semantics import should_retry_from
from afpbench.workers.providers.types import AdapterResult, OutcomeClass, ToolCall, Usage
from afpbench.workers.redact import mask_known, mask_secrets, scrub_headers

ERROR_LINE_MAX = 200

# Response headers worth keeping on the attempt row: request ids, rate-limit state, retry hints.
_KEEP_EXACT = frozenset(
    {
        "x-request-id",
        "request-id",
        "apim-request-id",
        "x-ms-request-id",
        "x-goog-request-id",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "content-type",
        "date",
    }
)
_KEEP_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "ratelimit-")
_REQUEST_ID_HEADERS = (
    "x-request-id",
    "request-id",
    "apim-request-id",
    "x-ms-request-id",
    "x-goog-request-id",
)


def normalize_headers(headers: Mapping[str, Any] | None) -> dict[str, str]:
    """Lower-cased names, list values joined, credential headers dropped."""
    return {k.lower(): v for k, v in scrub_headers(headers).items()}


def relevant_headers(norm: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in norm.items() if k in _KEEP_EXACT or k.startswith(_KEEP_PREFIXES)}


def request_id_from(norm: Mapping[str, str]) -> str | None:
    for name in _REQUEST_ID_HEADERS:
        if norm.get(name):
            return norm[name]
    return None


def load_json(body_text: str) -> tuple[Any, str | None]:
    """(decoded body, None) or (None, short reason) for empty, malformed or truncated JSON."""
    if not body_text or not body_text.strip():
        return None, "empty body"
    try:
        return json.loads(body_text), None
    except json.JSONDecodeError as exc:
        # The parser ran off the end (inside a string, or expecting more): the body was cut short.
        if exc.msg.startswith("Unterminated string") or exc.pos >= len(body_text.rstrip()):
            return None, f"truncated JSON body ({len(body_text)} chars)"
        return None, f"malformed JSON body: {exc.msg} at char {exc.pos}"


def status_class(status: int) -> OutcomeClass | None:
    """Outcome implied by a non-2xx HTTP status alone; None for 2xx (the body decides)."""
    if 200 <= status < 300:
        return None
    if status == 429:
        return OutcomeClass.rate_limited
    if status == 529:
        return OutcomeClass.overloaded
    if status == 402:  # Payment Required: credits or billing (OpenRouter, Anthropic billing_error)
        return OutcomeClass.quota_exhausted
    if status == 413:  # this request is too large for the endpoint; smaller ones may pass
        return OutcomeClass.context_too_long
    if status in (401, 403, 407):
        return OutcomeClass.auth_error
    if status in (404, 410):
        return OutcomeClass.not_found
    if status in (408, 425):
        return OutcomeClass.infra_error
    if 300 <= status < 500:
        # Redirects are not followed (custom key headers would travel to the new host) and other
        # 4xx are request/config errors such as an over-long context: retrying will not help.
        return OutcomeClass.auth_error
    return OutcomeClass.infra_error


def error_line(status: int | None, code: Any, message: Any, secrets: Iterable[str] = ()) -> str:
    """One short masked line: '401 invalid_api_key: Incorrect API key provided ...'."""
    head = " ".join(str(p) for p in (status, code) if p not in (None, ""))
    msg = " ".join(str(message or "").split())
    line = f"{head}: {msg}" if msg else head or "unknown error"
    line = mask_secrets(line, secrets)
    return line if len(line) <= ERROR_LINE_MAX else line[: ERROR_LINE_MAX - 3] + "..."


def body_snippet(body_text: str, limit: int = 120, secrets: Iterable[str] = ()) -> str:
    # Mask before cutting; cutting first can leave a key prefix no mask recognises.
    return " ".join(mask_secrets(body_text, secrets)[:limit].split())


# --- retry hints ------------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text: str) -> float | None:
    """OpenAI-style reset durations ('12ms', '6m0s', '1h2m3.5s', '0s') and '37s' in seconds."""
    text = text.strip()
    if not text or _DURATION_PART.sub("", text):
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in _DURATION_PART.findall(text))


def _http_date_delta(value: str, norm: Mapping[str, str], now: datetime | None) -> float | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    # Measure against the server's own Date header when present, so client clock skew cancels out.
    reference = now
    if reference is None and norm.get("date"):
        try:
            reference = parsedate_to_datetime(norm["date"])
        except (TypeError, ValueError):
            reference = None
    reference = reference or datetime.now(UTC)
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    if reference.tzinfo is None:
        reference = reference.replace(tzinfo=UTC)
    return max(0.0, (when - reference).total_seconds())


def retry_after_from(
    norm: Mapping[str, str],
    outcome: OutcomeClass,
    body_hint: float | None = None,
    now: datetime | None = None,
) -> float | None:
    """Seconds to wait: retry-after-ms, then Retry-After (seconds or HTTP date), then a body hint
    (Gemini RetryInfo), then, for rate limits only, the largest x-ratelimit-reset-* duration."""
    if norm.get("retry-after-ms"):
        try:
            return max(0.0, float(norm["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    value = norm.get("retry-after", "").strip()
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            delta = _http_date_delta(value, norm, now)
            if delta is not None:
                return delta
    if body_hint is not None:
        return body_hint
    if outcome is OutcomeClass.rate_limited:
        durations = [parse_duration(v) for k, v in norm.items() if k.startswith("x-ratelimit-reset-")]
        resets = [r for r in durations if r is not None]
        if resets:
            return max(resets)
    return None


# --- small field helpers ------------------------------------------------------------------------


def int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def tool_call_from_raw(call_id: str, name: str, arguments_raw: str) -> ToolCall:
    try:
        parsed = json.loads(arguments_raw) if arguments_raw else {}
    except json.JSONDecodeError:
        parsed = None
    return ToolCall(
        id=call_id,
        name=name,
        arguments=parsed if isinstance(parsed, dict) else None,
        arguments_raw=arguments_raw,
    )


def assemble(
    outcome: OutcomeClass,
    status: int,
    norm: Mapping[str, str],
    body_text: str,
    secrets: Iterable[str],
    *,
    text: str | None = None,
    tool_calls: list[ToolCall] | None = None,
    finish_reason: str | None = None,
    usage: Usage | None = None,
    served_model: str | None = None,
    request_id: str | None = None,
    error: str | None = None,
    retry_hint: float | None = None,
) -> AdapterResult:
    """Build the AdapterResult with masking applied in one place.

    Every field that is stored comes from the response, and a server may echo the key
    into any of them (kept headers, request id, model name, finish reason, tool-call arguments), not
    only into the body and text; all of them are masked here. Model-authored fields (text, tool calls)
    get the known values only, so key-shaped strings the model legitimately wrote stay verbatim."""
    secrets = list(secrets)
    request_id = request_id_from(norm) or request_id
    return AdapterResult(
        outcome=outcome,
        http_status=status,
        text=mask_known(text, secrets) if text is not None else None,
        tool_calls=[_masked_call(c, secrets) for c in tool_calls or []],
        finish_reason=mask_secrets(finish_reason, secrets) if isinstance(finish_reason, str) else finish_reason,
        usage=usage or Usage(),
        served_model=mask_secrets(served_model, secrets) if isinstance(served_model, str) else served_model,
        request_id=mask_secrets(request_id, secrets) if isinstance(request_id, str) else request_id,
        retry_after_s=retry_after_from(norm, outcome, retry_hint),
        headers={k: mask_secrets(v, secrets) for k, v in relevant_headers(norm).items()},
        raw_body=mask_secrets(body_text, secrets),
        error=mask_secrets(error, secrets) if error else None,
        should_retry=should_retry_from(norm),
    )


def _masked_call(call: ToolCall, secrets: list[str]) -> ToolCall:
    masked = [mask_known(v, secrets) for v in (call.id, call.name, call.arguments_raw)]
    if masked == [call.id, call.name, call.arguments_raw]:
        return call
    rebuilt = tool_call_from_raw(*masked)
    rebuilt.thought_signature = call.thought_signature
    return rebuilt
