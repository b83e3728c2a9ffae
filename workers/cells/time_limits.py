"""Each task's time limits, derived from what the sweep declares: the models' `timeout_s`, the tool
rounds a conversation may take, the judges and their parse retries. Nothing here is a hidden constant
that a slow model runs into: raise a model's `timeout_s` and its tasks get the room that needs.

An execute task makes at most AFP_MAX_TOOL_ROUNDS requests when the sweep offers the calculator (one
otherwise); each may take the model's connect + read timeout, and each later round may wait
AFP_TOOL_ROUND_WAIT_S for its rate slot. A score task makes, per judge, up to max_parse_retries + 1
calls in each of two judging rounds (the swapped re-judge), each possibly waiting for its pool slot
first. The limits are sent with each message (Celery `time_limit` / `soft_time_limit`, see
dispatch.py); the conversation itself keeps to the execute limit, because the embedded thread pool
does not enforce Celery's.

The broker's visibility timeout must stay above every task's hard limit (settings.check_timing
holds that order for the defaults): `check_sweep` refuses, before anything is written, a sweep whose
derived limits (for scoring: its calls, waits left out) would let the broker hand a running task to a
second worker.
"""

from __future__ import annotations

from dataclasses import dataclass

from afpbench.scoring.render import tools_for
from afpbench.workers.errors import SpecError
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


def _limits(seconds: float) -> TaskLimits:
    hard = int(seconds) + 1
    return TaskLimits(hard, soft_before(hard))


def call_s(model: ModelSpec) -> float:
    """The longest one request to `model` can take: connect plus its declared read timeout."""
    return CONNECT_S + float(model.timeout_s)


def slot_lease_s(model: ModelSpec) -> float:
    """How long an in-flight slot taken for one call of `model` must live (the Redis limiter's leases
    expire, so that a dead worker's slot comes back): the call and the margin."""
    return call_s(model) + MARGIN_S


def judge_slot_wait_s(judge: ModelSpec) -> float:
    """How long a judge call may wait for its pool slot: at least one call of the judge's own length,
    since a judge on the tested model's server waits behind that model's calls (never under 60 s)."""
    return max(60.0, call_s(judge))


def requests_per_try(inputs: SweepInputs, settings: Settings) -> int:
    """The requests one try may make: every tool round when a fixture of the sweep offers a tool."""
    return settings.max_tool_rounds if any(tools_for(f) for f in inputs.fixtures.values()) else 1


def sweep_execution_limits(inputs: SweepInputs, model: ModelSpec, settings: Settings) -> TaskLimits:
    return execution_limits(model, requests_per_try(inputs, settings), settings)


def execution_limits(model: ModelSpec, rounds: int, settings: Settings) -> TaskLimits:
    """An execute task of `model` that may make `rounds` requests."""
    return _limits(rounds * call_s(model) + (rounds - 1) * settings.tool_round_wait_s + MARGIN_S)


def scoring_limits(spec: SweepSpec, *, slot_waits: bool = True) -> TaskLimits:
    """A score task: every judge's calls in both judging rounds, each after its slot wait (without
    `slot_waits`: the calls alone, what every such task needs when each call runs to its timeout)."""
    calls = spec.dispute_rule.max_parse_retries + 1
    per_round = sum(calls * ((judge_slot_wait_s(j) if slot_waits else 0.0) + call_s(j)) for j in spec.judges or [])
    return _limits(2 * per_round + MARGIN_S)


def check_sweep(inputs: SweepInputs, settings: Settings) -> None:
    """Refuse a sweep whose tasks could outlive the broker's visibility timeout (distributed mode)."""
    spec, rounds = inputs.spec, requests_per_try(inputs, settings)
    for model in spec.models:
        hard = execution_limits(model, rounds, settings).hard_s
        if hard >= settings.visibility_timeout_s:
            raise SpecError(
                f"model {model.display}: timeout_s {model.timeout_s:g} s x {rounds} request(s) per try gives an "
                f"execute time limit of {hard} s, not below AFP_VISIBILITY_TIMEOUT_S = "
                f"{settings.visibility_timeout_s} s; raise AFP_VISIBILITY_TIMEOUT_S and AFP_LEASE_EXPIRY_S above "
                f"{hard} s, lower timeout_s, or lower AFP_MAX_TOOL_ROUNDS (docs/OPERATIONS.md, slow local models)")
    # Slot waits are left out here: a scoring try that waits that long is still fenced by its renewed
    # lease (a redelivered copy finds the cell held), and counting them would refuse every 3-judge sweep.
    hard = scoring_limits(spec, slot_waits=False).hard_s
    if spec.judges and hard >= settings.visibility_timeout_s:
        raise SpecError(
            f"judges: their timeouts and retries give a score time limit of {hard} s, not below "
            f"AFP_VISIBILITY_TIMEOUT_S = {settings.visibility_timeout_s} s; raise AFP_VISIBILITY_TIMEOUT_S and "
            f"AFP_LEASE_EXPIRY_S above {hard} s or lower the judges' timeout_s")
