"""What a provider's error means for the run, beyond its HTTP status: the billing or quota answers for
which waiting will not help (the model stops), the over-long prompts that fail one cell only, and the
provider's own retry advice. Pure functions over the decoded error fields, shared by the adapters.

Decided from the providers' documented and recorded shapes (shared/provider-samples):

- quota: OpenAI `insufficient_quota` (a 429, as billing-exhausted keys answer), billing codes, any 402;
  a per-day request/token limit (OpenAI, Groq: "... per day (RPD)"), whose window outlasts any retry;
  Anthropic `billing_error`, "credit balance is too low", "reached your specified API usage limits";
  Gemini RESOURCE_EXHAUSTED whose QuotaFailure names a per-day quota or a limit of 0, or, without
  details, whose message points at billing or plan quota. A 429 that is only a rate (Groq's TPM
  answer, whose message links a billing page; Gemini's plain "Resource exhausted. Please try again
  later.") stays rate_limited: waiting does help there.
- context: a 400 or 413 whose code or message says the prompt does not fit the model's context
  (OpenAI/Azure/Groq `context_length_exceeded`, vLLM and OpenRouter "maximum context length",
  llama.cpp `exceed_context_size_error`, Anthropic "prompt is too long", Gemini "input token count
  ... exceeds the maximum"), and every 413: a request too large for the endpoint stays too large.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

QUOTA_CODES = frozenset(
    {"insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "insufficient_credits",
     "billing_error", "quota_exceeded"}
)
CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "request_too_large"})

_CONTEXT_WORDING = re.compile(
    r"context length|context window|context limit|context size|prompt is too long|input token count"
    r"|maximum number of tokens allowed|too many input tokens",
    re.IGNORECASE,
)
_PER_DAY = re.compile(r"\bper day\b|\(RPD\)|\(TPD\)|PerDay", re.IGNORECASE)
_BILLING_WORDING = re.compile(
    r"billing|credit balance|current quota|usage limits|insufficient credits|regain access",
    re.IGNORECASE,
)


def should_retry_from(norm: Mapping[str, str]) -> bool | None:
    """The `x-should-retry` header (Anthropic; OpenAI's SDKs honour it from any server): True, False,
    or None when absent or not a boolean."""
    value = str(norm.get("x-should-retry", "")).strip().lower()
    return {"true": True, "false": False}.get(value)


def is_context_error(status: int, code: Any, message: Any) -> bool:
    """The prompt does not fit the model's context: that cell cannot run, the model's other cells can."""
    if status == 413 or str(code) in CONTEXT_CODES:
        return True
    # Only client errors: a 429's advice ("reduce the prompt length or try again later") is a rate.
    return status == 400 and bool(_CONTEXT_WORDING.search(str(message or "")))


def is_quota_error(status: int, code: Any, message: Any) -> bool:
    """Billing or quota exhausted (OpenAI-style bodies): waiting will not help, the model stops."""
    if status == 402 or str(code) in QUOTA_CODES:
        return True
    return status == 429 and bool(_PER_DAY.search(str(message or "")))


def is_billing_message(message: Any) -> bool:
    """Wording of a billing refusal where the provider gives no dedicated code (Anthropic's 400s)."""
    return bool(_BILLING_WORDING.search(str(message or "")))


def gemini_quota_exhausted(err: Mapping[str, Any]) -> bool:
    """A Gemini RESOURCE_EXHAUSTED that waiting will not cure.

    Gemini says "You exceeded your current quota, please check your plan and billing details" for a
    per-minute free-tier limit too, so the QuotaFailure details decide when present: a per-day quota
    or a limit of 0 (the model is not in the plan at all) is exhausted, a per-minute one is a rate."""
    message = str(err.get("message") or "")
    violations = [
        v
        for d in err.get("details") or []
        if isinstance(d, dict) and str(d.get("@type", "")).endswith("QuotaFailure")
        for v in d.get("violations") or []
        if isinstance(v, dict)
    ]
    if "limit: 0" in message:
        return True
    if violations:
        return any(_PER_DAY.search(f"{v.get('quotaId', '')} {v.get('quotaMetric', '')}") for v in violations)
    return is_billing_message(message) or bool(_PER_DAY.search(message))
