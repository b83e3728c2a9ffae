"""The judge check before a sweep (workers/grading/judge_check.py, issue 37): a judge that gives no usable
judgement on the calibration answers stops the run with one line naming it and why; a usable one passes.
The judges here are the simulator (SIMULATED), on a real HTTP server."""

from __future__ import annotations

import pytest

from afpbench.reference.loader import load_judge_prompt
from afpbench.workers.errors import JudgeCheckFailed
from afpbench.workers.grading.judge_check import (
    ADVICE,
    calibration_answers,
    check_judge,
    judges_to_check,
    run_judge_check,
)
from afpbench.workers.sim.server import SimConfig, SimServer
from afpbench.workers.sweeps.spec_loading import parse_spec

OTHER_PROMPT = "You grade answers. Reply with JSON.\n"  # not the sim's judge prompt: it answers as a model


def _spec(base_url: str, **extra: object):
    judge = {"provider": "sim", "model": "sim-judge", "label": "the judge", "base_url": base_url}
    return parse_spec({"models": [{"provider": "sim", "model": "sim-1"}], "judges": [judge],
                       "judge_check": {"enabled": True}, **extra})


def test_calibration_answers_come_one_fixture_at_a_time():
    answers = calibration_answers(4)
    assert len(answers) == 4 and len({f.id for f, _ in answers}) == 4
    assert all(a.gold is not None for _, a in answers)


def test_a_judge_that_judges_passes_the_check():
    with SimServer(SimConfig()) as sim:
        check = check_judge(_spec(sim.base_url).judges[0], load_judge_prompt(), calibration_answers(4))
    assert check.passed and check.usable == check.tried == 4 and check.failed_calls == 0
    assert check.line().startswith("judge check: the judge gave a usable judgement")


def test_a_judge_with_no_usable_judgement_stops_the_run_in_one_line():
    """Rule: 'judge X gave 0 of 4 usable judgements on the calibration answers; every cell would await a
    human — use a stronger judge, or --no-judge-check'."""
    with SimServer(SimConfig()) as sim:
        spec = _spec(sim.base_url)
        with pytest.raises(JudgeCheckFailed) as raised:
            run_judge_check(spec, OTHER_PROMPT)
    line = str(raised.value)
    assert line.startswith("judge the judge gave 0 of 4 usable judgements on the calibration answers (")
    assert line.endswith(ADVICE) and "\n" not in line and raised.value.exit_code == 2


def test_an_unreachable_judge_is_named_as_failed_calls():
    spec = _spec("http://127.0.0.1:9/v1", judge_check={"enabled": True, "answers": 2})
    with pytest.raises(JudgeCheckFailed, match=r"judge the judge: 2 of 2 calls on the calibration answers failed"):
        run_judge_check(spec, load_judge_prompt())


def test_simulated_judges_are_not_checked_by_default_and_a_spec_may_turn_the_check_off():
    sim = {"provider": "sim", "model": "j"}
    real = {"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    spec = parse_spec({"models": [sim], "judges": [sim, real]})
    assert [j.model for j in judges_to_check(spec)] == ["m"]
    assert judges_to_check(parse_spec({"models": [sim], "judges": [real], "judge_check": False})) == []
    assert run_judge_check(parse_spec({"models": [sim], "judges": [sim]}), OTHER_PROMPT) == []
