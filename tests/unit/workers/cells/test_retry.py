"""Retry decisions per outcome class (workers/cells/retry.py): what is scored, retried, finished or stops
the model, within the one attempt budget."""

from __future__ import annotations

import pytest

from afpbench.scoring.states import ResultState
from afpbench.workers.cells.retry import RetryPolicy
from afpbench.workers.providers.types import OutcomeClass


@pytest.mark.parametrize("outcome", [OutcomeClass.answer, OutcomeClass.tool_call, OutcomeClass.truncated])
def test_answers_go_to_scoring(outcome):
    assert RetryPolicy().decide(outcome, 1, None).kind == "score"


def test_provider_block_is_its_own_state_not_a_fail():
    v = RetryPolicy().decide(OutcomeClass.provider_block, 1, None)
    assert (v.kind, v.state) == ("finish", ResultState.PROVIDER_BLOCK.value)


@pytest.mark.parametrize("outcome", [OutcomeClass.auth_error, OutcomeClass.not_found])
def test_auth_and_unknown_model_stop_the_model(outcome):
    v = RetryPolicy().decide(outcome, 1, None)
    assert (v.kind, v.state) == ("stop_model", ResultState.INFRA_ERROR.value)


def test_rate_limited_honours_retry_after_then_gives_up_after_the_one_budget():
    policy = RetryPolicy(max_attempts=3)
    v = policy.decide(OutcomeClass.rate_limited, 1, 7.0)
    assert v.kind == "retry" and 7.0 <= v.delay_s <= 7.5
    assert policy.decide(OutcomeClass.overloaded, 3, None).state == ResultState.INFRA_ERROR.value


def test_infra_error_backs_off_exponentially_then_is_infra_error():
    policy = RetryPolicy(max_attempts=4, base_delay_s=1.0)
    delays = [policy.decide(OutcomeClass.infra_error, n, None).delay_s for n in (1, 2, 3)]
    assert 0.5 <= delays[0] <= 1.0 and 1.0 <= delays[1] <= 2.0 and 2.0 <= delays[2] <= 4.0
    final = policy.decide(OutcomeClass.infra_error, 4, None)
    assert (final.kind, final.state) == ("finish", ResultState.INFRA_ERROR.value)
    assert "after 4 attempts" in final.reason
