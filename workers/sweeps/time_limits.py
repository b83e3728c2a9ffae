"""Each task's time limits, derived from what the sweep declares: the models' `timeout_s`, the tool
rounds a conversation may take, the judges and their parse retries. Nothing here is a hidden constant
that a slow model runs into: raise a model's `timeout_s` and its tasks get the room that needs.

An execute task makes at most AFP_MAX_TOOL_ROUNDS requests when the sweep offers the calculator (one
otherwise); each may take the model's connect + read timeout, and each later round may wait
AFP_TOOL_ROUND_WAIT_S for its rate slot. A score task makes, per judge, up to max_parse_retries + 1
calls in each of two judging rounds (the swapped re-judge), each possibly waiting for its pool slot
first. The limits are sent with each message (Celery `time_limit` / `soft_time_limit`, see
cells/dispatch.py); the conversation itself keeps to the execute limit, because the embedded thread pool
does not enforce Celery's.

The broker's visibility timeout must stay above every task's hard limit (settings.check_timing
holds that order for AFP_TASK_HARD_TIME_LIMIT_S), or the broker would hand a running task to a second
worker: a derived limit is therefore capped at `ceiling_s` (the visibility timeout less the margin,
never below AFP_TASK_HARD_TIME_LIMIT_S). A conversation that would need more than the cap is cut
before the round that could overrun it, recorded as such (cells/conversation.py); raise
AFP_VISIBILITY_TIMEOUT_S and AFP_LEASE_EXPIRY_S to give it more (docs/OPERATIONS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from afpbench.workers.settings import Settings, soft_before
from afpbench.workers.sweeps.inputs import SweepInputs
from afpbench.workers.sweeps.spec import ModelSpec, SweepSpec

# Room for what is not a provider call: claim, record, scoring, database round trips under load.
MARGIN_S = 60
# Connect timeout of every endpoint (workers/providers/types.py:Endpoint.connect_timeout_s).
CONNECT_S = 10.0


@dataclass(frozen=True)
class TaskLimits:
    hard_s: int
    soft_s: int

    def options(self) -> dict[str, int]:
        """The per-message options of `app.send_task` (retries keep them: Celery copies a request's
        time limits into its retry)."""
        return {"time_limit": self.hard_s, "soft_time_limit": self.soft_s}


def ceiling_s(settings: Settings) -> int:
    """The most any task is given: below the visibility timeout, never below the configured hard limit."""
    return max(settings.task_hard_time_limit_s, settings.visibility_timeout_s - MARGIN_S)


def _limits(seconds: float, settings: Settings) -> TaskLimits:
    hard = min(int(seconds) + 1, ceiling_s(settings))
    return TaskLimits(hard, soft_before(hard))


def call_s(model: ModelSpec) -> float:
    """The longest one request to `model` can take: connect plus its declared read timeout."""
    return CONNECT_S + float(model.timeout_s)


def slot_lease_s(model: ModelSpec) -> float:
    """How long an in-flight slot taken for one call of `model` must live (the Redis limiter's leases
    expire, so that a dead worker's slot comes back): the call and the margin."""
    return call_s(model) + MARGIN_S


def judge_slot_wait_s(settings: Settings) -> float:
    """How long a judge call waits in its task for its pool slot (AFP_SLOT_WAIT_S) before the task hands
    its thread back and waits as a retried message (no try is spent on a wait)."""
    return settings.slot_wait_s


def requests_per_try(inputs: SweepInputs, settings: Settings) -> int:
    """The requests one try may make: every tool round when a fixture of the sweep offers a tool."""
    return settings.max_tool_rounds if inputs.offers_tools else 1


def sweep_execution_limits(inputs: SweepInputs, model: ModelSpec, settings: Settings) -> TaskLimits:
    return execution_limits(model, requests_per_try(inputs, settings), settings)


def execution_limits(model: ModelSpec, rounds: int, settings: Settings) -> TaskLimits:
    """An execute task of `model` that may make `rounds` requests."""
    return _limits(rounds * call_s(model) + (rounds - 1) * settings.tool_round_wait_s + MARGIN_S, settings)


def scoring_limits(spec: SweepSpec, settings: Settings) -> TaskLimits:
    """A score task: every judge's calls in both judging rounds, each after its slot wait."""
    calls = spec.dispute_rule.max_parse_retries + 1
    per_round = sum(calls * (judge_slot_wait_s(settings) + call_s(j)) for j in spec.judges or [])
    return _limits(2 * per_round + MARGIN_S, settings)
