"""What to do after an attempt, as a typed value (not flags threaded through calls).

- answer / tool_call / truncated  -> score it (a length-truncated answer is the model's output under
  the declared max_tokens; it is scored and the truncation stays visible in the record)
- provider_block                   -> PROVIDER_BLOCK, out of the denominator
- rate_limited / overloaded        -> retry after Retry-After (or backoff); a separate, larger budget,
  because waiting out a provider's limit is not the cell's fault
- infra_error                      -> retry with exponential backoff and jitter, then INFRA_ERROR
- auth_error / not_found           -> INFRA_ERROR and stop the model's remaining cells
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

from afpbench.scoring.states import ResultState
from afpbench.workers.providers.types import OutcomeClass


@dataclass(frozen=True)
class Verdict:
    kind: Literal["score", "retry", "finish", "stop_model"]
    delay_s: float = 0.0
    state: str | None = None
    reason: str = ""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 5
    max_rate_limited_attempts: int = 20
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0

    def backoff(self, attempt: int) -> float:
        delay = min(self.max_delay_s, self.base_delay_s * 2 ** max(0, attempt - 1))
        return delay * (0.5 + random.random() / 2)  # full jitter keeps retries from synchronising

    def decide(self, outcome: OutcomeClass, attempt: int, retry_after_s: float | None) -> Verdict:
        if outcome in (OutcomeClass.answer, OutcomeClass.tool_call, OutcomeClass.truncated):
            return Verdict("score")
        if outcome == OutcomeClass.provider_block:
            return Verdict(
                "finish", state=ResultState.PROVIDER_BLOCK.value, reason="provider blocked the request"
            )
        if outcome in (OutcomeClass.auth_error, OutcomeClass.not_found):
            return Verdict("stop_model", state=ResultState.INFRA_ERROR.value, reason=f"{outcome.value}")
        if outcome in (OutcomeClass.rate_limited, OutcomeClass.overloaded):
            if attempt >= self.max_rate_limited_attempts:
                return Verdict(
                    "finish",
                    state=ResultState.INFRA_ERROR.value,
                    reason=f"{outcome.value} after {attempt} attempts",
                )
            delay = retry_after_s if retry_after_s is not None else self.backoff(attempt)
            return Verdict("retry", delay_s=delay + random.random() * 0.5, reason=outcome.value)
        # infra_error and anything unknown
        if attempt >= self.max_attempts:
            return Verdict(
                "finish",
                state=ResultState.INFRA_ERROR.value,
                reason=f"{outcome.value} after {attempt} attempts",
            )
        return Verdict("retry", delay_s=self.backoff(attempt), reason=outcome.value)
