"""Execution honesty at the conversation level, against a real simulated model over HTTP.

Protocol rule: only the model's behaviour is scored. A tool conversation holds one in-flight slot for
its whole life (later rounds take rate budget only, never a second slot), and a conversation that
cannot finish ends with a non-scorable outcome naming why, so the cell is retried, then INFRA_ERROR.
"""

from __future__ import annotations

import socket

import pytest
import yaml

from afpbench.workers.cells.conversation import INCOMPLETE, converse
from afpbench.workers.cells.retry import RetryPolicy
from afpbench.workers.limits.base import Limits
from afpbench.workers.limits.in_memory import InMemoryLimiter
from afpbench.workers.limits.shared import get_limiter
from afpbench.workers.providers.types import OutcomeClass
from afpbench.workers.sim.faults import Fault, FaultConfig, draw_fault
from afpbench.workers.sim.server import SimConfig, SimServer
from afpbench.workers.store.models import Cell
from afpbench.workers.sweeps.endpoints import endpoint_for
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.pools import pool_of
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.conftest import REPO

# Calculator calls of each canned P08 answer (the sim picks one per cell key).
CANNED_TOOL_CALLS = {r["text"]: len(r["tool_calls"]) for r in yaml.safe_load(
    (REPO / "fixtures" / "pilot" / "simulated" / "P08.yaml").read_text(encoding="utf-8"))["responses"]}


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


# ---------------------------------------------------------------- the limiter's `holding`


def test_a_held_lease_admits_later_rounds_without_a_second_slot():
    """max_in_flight: 1 and the conversation holds it: its next round is granted, nobody else is."""
    limiter = InMemoryLimiter(Clock())
    limits = Limits(max_in_flight=1)
    first = limiter.acquire("p", limits)
    assert first.granted and first.lease
    assert limiter.acquire("p", limits).reason == "max in flight"
    later = limiter.acquire("p", limits, holding=first.lease)
    assert later.granted and later.lease is None, "no new lease: the held one covers the round"
    assert limiter.acquire("p", limits).reason == "max in flight", "still one conversation in flight"
    limiter.release("p", first.lease)
    assert limiter.acquire("p", limits).granted


def test_a_held_lease_still_pays_rate_and_cool_down():
    """Holding skips only the in-flight cap: the request bucket and a 429 cool-down still apply."""
    clock = Clock()
    limiter = InMemoryLimiter(clock)
    limits = Limits(requests_per_min=60, burst=1, max_in_flight=1)
    first = limiter.acquire("p", limits)
    later = limiter.acquire("p", limits, holding=first.lease)
    assert not later.granted and later.reason == "rate" and later.wait_s == pytest.approx(1.0)
    reserved = limiter.acquire("p", limits, reserve_s=2, holding=first.lease)
    assert reserved.prepaid and reserved.wait_s == pytest.approx(1.0)
    clock.now += 1.0
    limiter.cool_down("p", 3.0)
    assert limiter.acquire("p", limits, prepaid=True, holding=first.lease).reason == "cool-down after a 429"
    clock.now += 3.01
    assert limiter.acquire("p", limits, prepaid=True, holding=first.lease).granted


# ---------------------------------------------------------------- whole conversations


def _setup(base_url: str, limits: dict, repeat: int = 1, **model_fields):
    spec = parse_spec({"models": [{"provider": "sim", "model": "sim-1", "base_url": base_url, "limits": limits,
                                   **model_fields}],
                       "judges": [], "fixtures": {"only": ["P08"]}, "conditions": ["C"]})
    model = spec.models[0]
    inputs = load_inputs(spec)
    cell = Cell(sweep_id="unit", model_label=model.display, model_hash=model.model_hash, provider="sim",
                condition="C", fixture_id="P08", fixture_version=inputs.fixtures["P08"].version, repeat=repeat)
    return model, inputs, cell


def _hold(model):
    limiter = get_limiter()
    grant = limiter.acquire(pool_of(endpoint_for(model)), model.limits)
    assert grant.granted
    return limiter, grant.lease


@pytest.fixture
def sim():
    with SimServer(SimConfig()).start() as server:
        yield server


def test_rounds_never_wait_for_a_second_slot_with_max_in_flight_one(settings_env, sim):
    """The bug this fixes: round 2 asked for another slot while round 1's lease held the only one."""
    settings_env(AFP_TOOL_ROUND_WAIT_S="0.5")
    model, inputs, cell = _setup(sim.base_url, {"max_in_flight": 1})
    limiter, lease = _hold(model)
    result, rounds, tools, _ = converse(model, inputs, cell, holding=lease)
    assert result.outcome == OutcomeClass.answer and result.error is None
    calls = CANNED_TOOL_CALLS[result.text]
    assert calls >= 2 and [r["outcome"] for r in rounds] == ["tool_call"] * calls + ["answer"]
    assert len(tools) == calls and all("result" in t for t in tools)
    assert limiter.acquire(pool_of(endpoint_for(model)), model.limits).reason == "max in flight", \
        "the conversation's slot stays held until execute_cell releases it"
    assert RetryPolicy().decide(result.outcome, 1, None).kind == "score"


def test_no_rate_slot_for_a_later_round_is_incomplete_then_infra_error(settings_env, sim):
    settings_env(AFP_TOOL_ROUND_WAIT_S="0.2")
    model, inputs, cell = _setup(sim.base_url, {"requests_per_min": 60, "burst": 1, "max_in_flight": 1})
    _, lease = _hold(model)
    result, rounds, _, _ = converse(model, inputs, cell, holding=lease)
    assert result.outcome == OutcomeClass.infra_error and result.text is None
    assert result.error == f"{INCOMPLETE}: no rate slot for round 2 within 0.2 s (rate)"
    assert [r["outcome"] for r in rounds] == ["tool_call", "infra_error"], "the cut is on record"
    policy = RetryPolicy(max_attempts=3)
    assert policy.decide(result.outcome, 1, None).kind == "retry"
    last = policy.decide(result.outcome, 3, None)
    assert last.kind == "finish" and last.state == "INFRA_ERROR"


def test_the_tool_loop_cut_by_max_tool_rounds_is_not_an_answer(settings_env, sim):
    settings_env(AFP_MAX_TOOL_ROUNDS="1")  # every canned P08 answer makes at least two calls
    model, inputs, cell = _setup(sim.base_url, {"max_in_flight": 1})
    _, lease = _hold(model)
    result, rounds, tools, _ = converse(model, inputs, cell, holding=lease)
    assert result.outcome == OutcomeClass.infra_error and result.text is None
    assert result.error == f"{INCOMPLETE}: still calling the calculator after max_tool_rounds = 1"
    assert [r["outcome"] for r in rounds] == ["tool_call", "infra_error"] and len(tools) == 1


def test_a_raised_timeout_leaves_room_for_every_tool_round(settings_env, sim):
    # A CPU model needs timeout_s 600. The old fixed 600 s task limit (600 - 10 s connect - 600 s read < 0)
    # refused round 2 of every tool conversation; the limit derived from timeout_s x rounds does not.
    settings_env(AFP_TASK_HARD_TIME_LIMIT_S="600")
    model, inputs, cell = _setup(sim.base_url, {}, timeout_s=600)
    result, rounds, tools, _ = converse(model, inputs, cell)
    assert result.outcome == OutcomeClass.answer, result.error
    assert len(rounds) >= 2 and all(r["sent"] for r in rounds) and tools


def test_a_later_round_lost_to_a_429_keeps_its_class_and_says_so(settings_env):
    # The sim's bucket admits round 1 only; its 429 at round 2 loses the conversation.
    with SimServer(SimConfig(faults=FaultConfig(rate_per_min=1, burst=1))).start() as limited:
        settings_env()
        model, inputs, cell = _setup(limited.base_url, {"max_in_flight": 1})
        _, lease = _hold(model)
        result, rounds, _, _ = converse(model, inputs, cell, holding=lease)
    assert result.outcome == OutcomeClass.rate_limited, "retried on the rate-limit budget"
    assert result.error.startswith(f"{INCOMPLETE}: round 2 lost: ")
    assert [r["http_status"] for r in rounds] == [200, 429]
    assert RetryPolicy().decide(result.outcome, 1, result.retry_after_s).kind == "retry"


def test_a_later_round_lost_to_a_5xx_is_retried_not_scored(settings_env):
    # The sim's fault draws are a hash of (seed, cell key, request number): pick a seed whose round 1
    # is served and round 2 gets a 5xx. The cell key names the model's base URL, so fix the port first.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model, inputs, cell = _setup(f"http://127.0.0.1:{port}/v1", {})
    faults = next(f for f in (FaultConfig(error_5xx_rate=0.5, seed=s) for s in range(200))
                  if draw_fault(f, cell.key, 0) is Fault.none and draw_fault(f, cell.key, 1) is Fault.error_5xx)
    with SimServer(SimConfig(faults=faults), port=port).start():
        settings_env()
        result, rounds, _, _ = converse(model, inputs, cell)
    assert result.outcome == OutcomeClass.infra_error and result.text is None
    assert result.error.startswith(f"{INCOMPLETE}: round 2 lost: ")
    assert [r["http_status"] for r in rounds][0] == 200 and rounds[1]["http_status"] >= 500
    assert RetryPolicy().decide(result.outcome, 1, None).kind == "retry"


def test_a_conversation_the_time_limits_cannot_fit_ends_at_once_not_retried(settings_env, sim):
    """Rule: a conversation cut by the time-limit cap is final: INFRA_ERROR at once naming the model and
    the limit, never retried (a retry is cut at the same round and pays for the rounds before it again)."""
    # The cap: a task may take at most 30 s; one call of this model may take 10 + 20 s, so no later round fits.
    settings_env(AFP_TASK_HARD_TIME_LIMIT_S="30", AFP_VISIBILITY_TIMEOUT_S="60", AFP_LEASE_EXPIRY_S="90")
    model, inputs, cell = _setup(sim.base_url, {}, timeout_s=20)
    result, rounds, _, _ = converse(model, inputs, cell)
    assert result.outcome == OutcomeClass.infra_error and result.text is None
    assert "round 2 could exceed the task's hard time limit of 30 s" in result.error
    assert [r["sent"] for r in rounds] == [True, False], "round 1 was paid for; round 2 never sent"
    verdict = RetryPolicy(max_attempts=5).decide(result.outcome, 1, None, result.should_retry, result.final)
    assert verdict.kind == "finish" and verdict.state == "INFRA_ERROR", "ended at attempt 1 of 5"
    assert "not retried" in verdict.reason and "sim-1" in verdict.reason and "time limits" in verdict.reason
