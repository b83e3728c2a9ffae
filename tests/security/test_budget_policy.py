"""The retry policy's decisions (workers/cells/retry.py), per outcome class, at and before the budget.

Rules checked (issue #15, items 5 and 6):
- At attempt AFP_MAX_ATTEMPTS no outcome class is retried, whatever Retry-After or the provider's
  advice says; before it, only the retryable classes are.
- quota_exhausted stops the model like an auth error (reason "quota exhausted"); context_too_long
  ends that cell only (reason "context too long").
- The provider's advice: should_retry=False ends a retryable outcome at once, naming the advice;
  should_retry=True retries a status we would not retry, still within the budget.
"""

from __future__ import annotations

import pytest

from afpbench.workers.cells.claim import ATTEMPT_STORAGE_ERROR
from afpbench.workers.cells.retry import RetryPolicy
from afpbench.workers.providers.types import OutcomeClass

MAX = 3
POLICY = RetryPolicy(max_attempts=MAX)
EVERY_CLASS = [*OutcomeClass, ATTEMPT_STORAGE_ERROR]
RETRYABLE = {OutcomeClass.rate_limited, OutcomeClass.overloaded, OutcomeClass.infra_error, ATTEMPT_STORAGE_ERROR}


@pytest.mark.parametrize("should_retry", [None, True, False])
@pytest.mark.parametrize("outcome", EVERY_CLASS)
def test_no_outcome_class_is_retried_at_the_budget(outcome, should_retry):
    """Rule: attempt AFP_MAX_ATTEMPTS is the last for every outcome class and any provider advice."""
    verdict = POLICY.decide(outcome, MAX, retry_after_s=0.0, should_retry=should_retry)
    assert verdict.kind != "retry", verdict
    assert POLICY.decide(outcome, MAX + 7, retry_after_s=1.0, should_retry=should_retry).kind != "retry"


@pytest.mark.parametrize("outcome", EVERY_CLASS)
def test_only_retryable_classes_are_retried_before_the_budget(outcome):
    """Rule: below the budget exactly the transient classes are retried (429s with their Retry-After)."""
    verdict = POLICY.decide(outcome, MAX - 1, retry_after_s=4.0)
    assert (verdict.kind == "retry") == (outcome in RETRYABLE), verdict
    if outcome in (OutcomeClass.rate_limited, OutcomeClass.overloaded):
        assert 4.0 <= verdict.delay_s <= 4.5


def test_quota_exhausted_stops_the_model_like_an_auth_error():
    """Rule: a billing / quota answer is not waited out; the model stops with the reason."""
    verdict = POLICY.decide(OutcomeClass.quota_exhausted, 1, retry_after_s=2.0)
    assert (verdict.kind, verdict.state, verdict.reason) == ("stop_model", "INFRA_ERROR", "quota exhausted")


def test_context_too_long_fails_this_cell_not_the_model():
    """Rule: an over-long prompt ends that cell INFRA_ERROR; the model's other cells still run."""
    verdict = POLICY.decide(OutcomeClass.context_too_long, 1)
    assert (verdict.kind, verdict.state, verdict.reason) == ("finish", "INFRA_ERROR", "context too long")


@pytest.mark.parametrize("outcome", sorted(RETRYABLE))
def test_should_retry_false_is_not_retried_and_the_reason_names_the_advice(outcome):
    """Rule: x-should-retry: false is honoured for outcomes we would otherwise retry."""
    verdict = POLICY.decide(outcome, 1, retry_after_s=1.0, should_retry=False)
    assert (verdict.kind, verdict.state) == ("finish", "INFRA_ERROR")
    assert verdict.reason == f"{outcome}: the provider advised not to retry"


@pytest.mark.parametrize("outcome", [OutcomeClass.auth_error, OutcomeClass.not_found])
def test_should_retry_true_retries_a_status_we_would_not_within_the_budget(outcome):
    """Rule: x-should-retry: true makes e.g. a 409 (classified from its 4xx status) retryable."""
    assert POLICY.decide(outcome, 1, should_retry=None).kind == "stop_model"
    assert POLICY.decide(outcome, 1, should_retry=True).kind == "retry"
    last = POLICY.decide(outcome, MAX, should_retry=True)
    assert (last.kind, last.reason) == ("finish", f"{outcome} after {MAX} attempts")


@pytest.mark.parametrize("outcome", [OutcomeClass.provider_block, OutcomeClass.quota_exhausted,
                                     OutcomeClass.context_too_long])
def test_should_retry_true_does_not_override_what_the_body_said(outcome):
    """Decision: a block, an exhausted quota or an over-long prompt is the body's own statement that
    waiting will not help; the advice header does not turn it into a retry."""
    assert POLICY.decide(outcome, 1, should_retry=True).kind != "retry"
