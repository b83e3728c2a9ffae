"""What to do after an attempt, as a typed value (not flags threaded through calls).

- answer / tool_call / truncated  -> score it (a length-truncated answer is the model's output under
  the declared max_tokens; it is scored and the truncation stays visible in the record)
- provider_block                   -> PROVIDER_BLOCK, out of the denominator
- quota_exhausted                  -> INFRA_ERROR and stop the model (billing: waiting will not help)
- context_too_long                 -> INFRA_ERROR for this cell only (the model's other prompts may fit)
- rate_limited / overloaded        -> retry after Retry-After (or backoff)
- infra_error / storage_error      -> retry with exponential backoff and jitter (storage_error: the
  attempt's row could not be written, cells/claim.py:ATTEMPT_STORAGE_ERROR; also anything unknown)
- auth_error / not_found           -> INFRA_ERROR and stop the model's remaining cells

One budget bounds every retry: attempt `max_attempts` (AFP_MAX_ATTEMPTS) is the last, whatever the
outcome, 429s included; the claim (cells/claim.py) refuses to start one more, so no path can exceed it.

A try the harness knows a retry cannot fix (`final`: a tool conversation the declared time limits cannot
fit) ends at once, INFRA_ERROR naming why, instead of paying for its first rounds again.

The provider's own advice (`should_retry`, from x-should-retry) overrides a decision drawn from the
HTTP status alone: False ends a retryable outcome at once, True retries an auth_error / not_found.
It does not override what the body itself said (a block, an exhausted quota, an over-long prompt).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from afpbench.scoring.states import ResultState
from afpbench.workers.providers.types import OutcomeClass

_SCORED = frozenset({OutcomeClass.answer, OutcomeClass.tool_call, OutcomeClass.truncated})
_WAIT_OUT = frozenset({OutcomeClass.rate_limited, OutcomeClass.overloaded})  # the provider says when
_STOPS_MODEL = frozenset({OutcomeClass.auth_error, OutcomeClass.not_found})
_INFRA = ResultState.INFRA_ERROR.value


@dataclass(frozen=True)
class RetryDecision:
    kind: Literal["score", "retry", "finish", "stop_model"]
    delay_s: float = 0.0
    state: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def backoff(self, attempt: int) -> float:
        delay = min(self.max_delay_s, self.base_delay_s * 2 ** max(0, attempt - 1))
        return delay * (0.5 + random.random() / 2)  # full jitter keeps retries from synchronising

    def decide(
        self, outcome: str, attempt: int, retry_after_s: float | None = None, should_retry: bool | None = None,
        final: str | None = None,
    ) -> RetryDecision:
        """`outcome`: an OutcomeClass value or an attempt outcome of cells/claim.py; `attempt`: the number
        just made (the cell's attempt count under the claim's fence); `final`: why a retry cannot help
        (AdapterResult.final), which ends a retryable outcome at once."""
        if outcome in _SCORED:
            return RetryDecision("score")
        if outcome == OutcomeClass.provider_block:
            return RetryDecision("finish", state=ResultState.PROVIDER_BLOCK.value,
                                 reason="provider blocked the request")
        if outcome == OutcomeClass.quota_exhausted:
            return RetryDecision("stop_model", state=_INFRA, reason="quota exhausted")
        if outcome == OutcomeClass.context_too_long:
            return RetryDecision("finish", state=_INFRA, reason="context too long")
        if outcome in _STOPS_MODEL and should_retry is not True:
            return RetryDecision("stop_model", state=_INFRA, reason=str(outcome))
        # Retryable from here: rate limits, overload, infra and storage errors, anything unknown, and
        # what the provider asked us to retry.
        if should_retry is False:
            return RetryDecision("finish", state=_INFRA, reason=f"{outcome}: the provider advised not to retry")
        if final:
            return RetryDecision("finish", state=_INFRA, reason=f"{outcome}, not retried: {final}")
        if attempt >= self.max_attempts:
            return RetryDecision("finish", state=_INFRA, reason=f"{outcome} after {attempt} attempts")
        if outcome in _WAIT_OUT:
            delay = retry_after_s if retry_after_s is not None else self.backoff(attempt)
            return RetryDecision("retry", delay_s=delay + random.random() * 0.5, reason=str(outcome))
        return RetryDecision("retry", delay_s=self.backoff(attempt), reason=str(outcome))
