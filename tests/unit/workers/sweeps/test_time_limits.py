"""Task time limits derived from the declared timeouts and tool rounds (no hidden constant), carried by
each execute message, and never at or above the broker's visibility timeout."""

from __future__ import annotations

from kombu import Queue

from afpbench.workers.settings import Settings, soft_before
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import parse_spec
from afpbench.workers.sweeps.time_limits import (
    CONNECT_S,
    MARGIN_S,
    ceiling_s,
    execution_limits,
    scoring_limits,
    sweep_execution_limits,
)


def _spec(timeout_s: float, fixtures: list[str], judges: list[dict] | None = None):
    return parse_spec({"models": [{"provider": "sim", "model": "sim-1", "timeout_s": timeout_s}],
                       "judges": judges or [], "fixtures": {"only": fixtures}, "conditions": ["A"]})


def test_execute_limit_grows_with_timeout_and_tool_rounds():
    settings = Settings(max_tool_rounds=3, tool_round_wait_s=30)
    spec = _spec(600, ["P08"])
    limits = execution_limits(spec.models[0], 3, settings)
    assert limits.hard_s == int(3 * (600 + CONNECT_S) + 2 * 30 + MARGIN_S) + 1
    assert limits.soft_s == soft_before(limits.hard_s) < limits.hard_s
    # A sweep whose fixtures offer no tool makes one request per try.
    one_round = sweep_execution_limits(load_inputs(_spec(600, ["P02"])), spec.models[0], settings)
    assert one_round.hard_s == int(600 + CONNECT_S + MARGIN_S) + 1
    assert sweep_execution_limits(load_inputs(spec), spec.models[0], settings) == limits


def test_score_limit_counts_every_judge_call_in_both_rounds():
    judge = {"provider": "sim", "model": "sim-judge", "timeout_s": 30}
    spec = _spec(120, ["P02"], [judge, {**judge, "model": "sim-judge-2"}])
    calls = spec.dispute_rule.max_parse_retries + 1
    per_call = max(60.0, 30 + CONNECT_S) + 30 + CONNECT_S  # slot wait, then the call
    assert scoring_limits(spec, Settings()).hard_s == int(2 * 2 * calls * per_call + MARGIN_S) + 1


def test_a_limit_never_reaches_the_visibility_timeout():
    """A task given more than the broker's visibility timeout could be handed to a second worker while
    it runs: the derived limit is capped below it, and never below the configured hard limit."""
    slow = _spec(900, ["P08"]).models[0]
    default = Settings(max_tool_rounds=8)
    assert execution_limits(slow, 8, default).hard_s == ceiling_s(default) == 3600 - MARGIN_S
    tight = Settings(task_hard_time_limit_s=20, visibility_timeout_s=25, lease_expiry_s=30)
    assert execution_limits(slow, 8, tight).hard_s == ceiling_s(tight) == 20
    roomy = Settings(max_tool_rounds=8, visibility_timeout_s=9000, lease_expiry_s=9300)
    assert execution_limits(slow, 8, roomy).hard_s == int(8 * 910 + 7 * 30 + MARGIN_S) + 1 < 9000


def test_released_execute_messages_carry_the_derived_limits(settings_env, tmp_path):
    """The message on the broker says time_limit/soft_time_limit from the model's timeout_s, not 600."""
    settings = settings_env(AFP_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}", AFP_MAX_TOOL_ROUNDS="3")
    from afpbench.workers.celery_app import app
    from afpbench.workers.providers.families import family_of
    from afpbench.workers.runs import start_sweep

    spec = _spec(700, ["P08"])
    start_sweep(spec, check_endpoints=False)  # no worker: the messages stay on the in-memory broker
    wanted = execution_limits(spec.models[0], 3, settings)
    queue = family_of("sim").queue
    with app.connection_for_read() as conn:
        bound = Queue(queue, routing_key=queue)(conn.default_channel)
        message = bound.get(no_ack=True)
        bound.purge()  # leave no message of this test's database for a later test's worker
    assert message is not None, f"no message on {queue}"
    assert list(message.headers["timelimit"]) == [wanted.hard_s, wanted.soft_s]
    assert wanted.hard_s > 3 * 700 > settings.task_hard_time_limit_s
