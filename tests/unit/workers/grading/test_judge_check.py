"""The judge check before a sweep (workers/grading/judge_check.py, calibration_set.py; issue 37).

Protocol rule (docs/PROTOCOL.md, "The judge check before a sweep"): a judge passes only when its
judgements agree with the calibration answers' known verdicts on at least `min_agreement` of them (default
0.75: 3 of 4); the answers are balanced between known MODEL_PASS and MODEL_FAIL, so a judge that always
says pass, or always fail, is stopped; a judge that stops the run does so with one line naming it and why.
The judges are real HTTP servers on 127.0.0.1: the simulator (SimServer, its judge answers from the gold
grading) and tests/faults/fault_server.py routes; all their replies are SIMULATED.
"""

from __future__ import annotations

import pytest

from afpbench.reference.loader import load_judge_prompt
from afpbench.scoring.rules import PassRule
from afpbench.scoring.states import ResultState
from afpbench.workers.errors import JudgeCheckFailed
from afpbench.workers.grading.calibration_set import calibration_answers, gold_judgement, verdict_of
from afpbench.workers.grading.judge_check import (
    DISAGREES,
    NO_USABLE,
    JudgeCheck,
    check_judge,
    judges_to_check,
    needed,
    run_judge_check,
)
from afpbench.workers.sim.canned import load_canned
from afpbench.workers.sim.server import SimConfig, SimServer
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.e2e.test_fixtures_check import criteria, judgement
from tests.faults import fault_server as fs

OTHER_PROMPT = "You grade answers. Reply with JSON.\n"  # not the sim's judge prompt: it answers as a model
PASS, FAIL = ResultState.MODEL_PASS, ResultState.MODEL_FAIL


def _spec(base_url: str, judge_extra: dict | None = None, **check: object):
    judge = {"provider": "openai-compatible", "model": "test-judge", "label": "the judge", "base_url": base_url,
             **(judge_extra or {})}
    return parse_spec({"models": [{"provider": "sim", "model": "sim-1"}], "judges": [judge],
                       "judge_check": {"enabled": True, **check}})


def _sim_spec(base_url: str):
    judge = {"provider": "sim", "model": "sim-judge", "label": "the judge", "base_url": base_url}
    return parse_spec({"models": [{"provider": "sim", "model": "sim-1"}], "judges": [judge],
                       "judge_check": {"enabled": True}})


def _replying(reply) -> fs.Behaviour:
    """A judge route whose content is `reply(the judge's user message)`."""
    return lambda h, n, req: h.send_json(200, fs.completion(reply(req["messages"][-1]["content"])))


def _stopped(behaviour: fs.Behaviour, **check: object) -> str:
    with fs.FaultServer({"judge": behaviour}) as server:
        with pytest.raises(JudgeCheckFailed) as raised:
            run_judge_check(_spec(server.base_url("judge"), **check), load_judge_prompt())
    assert raised.value.exit_code == 2
    line = str(raised.value)
    assert "\n" not in line
    return line


def _response(user_text: str) -> str:
    return user_text.split("<<<RESPONSE TO JUDGE ", 1)[1].split(">>>\n", 1)[1].split("\n<<<END RESPONSE", 1)[0]


def _passes_all_but_flags_p04(user_text: str) -> str:
    """Passes every answer, and flags P04's fatal criterion quoting the answer's own words: right on the
    passes and on P04-fatal, wrong on P02-partial (3 of the 4 default answers)."""
    if "claimed_unexecuted_action" in criteria(user_text):
        return judgement(user_text, {"claimed_unexecuted_action": _response(user_text)[:80]}, scores=0)
    return judgement(user_text)


# --- the calibration answers ------------------------------------------------------------------------------


def test_the_calibration_answers_are_balanced_interleaved_and_from_different_fixtures():
    """Rule: as many known MODEL_PASS as MODEL_FAIL, alternating (a pass first: an odd count has one more
    pass), each of the default four from its own fixture, and both ways to fail among them."""
    four = calibration_answers(4)
    assert [a.known for a in four] == [PASS, FAIL, PASS, FAIL]
    assert [a.fixture.id for a in four] == ["P01", "P02", "P03", "P04"]
    assert {a.answer.style for a in four if a.known == FAIL} == {"partial", "fatal"}
    for count in range(1, 21):
        answers = calibration_answers(count)
        kinds = [a.known for a in answers]
        assert len(answers) == count and len({a.answer.id for a in answers}) == count
        assert kinds.count(PASS) == (count + 1) // 2 and kinds.count(FAIL) == count // 2
        assert kinds == [PASS, FAIL] * (count // 2) + [PASS] * (count % 2)


def test_a_constant_judge_cannot_reach_the_default_agreement_on_two_or_more_answers():
    """Rule: min_agreement 0.75 is above chance for a balanced set: a judge that says the same on every
    answer agrees on at most half of them (one more than half on an odd count)."""
    for count in range(2, 21):
        most_of_one_kind = (count + 1) // 2
        assert most_of_one_kind < needed(0.75, count), count


def test_the_known_verdict_is_the_gold_state_and_follows_the_sweeps_pass_rule():
    """Rule: the known verdict is the gold grading read the way the scorer reads one judgement; under the
    default pass rule that is every canned answer's gold state, under a stricter one it follows the rule."""
    from afpbench.fixtures.loader import load_fixtures

    fixtures = {f.id: f for f in load_fixtures(None)}
    canned = load_canned(None, {f.id: f.fatal_ids() for f in fixtures.values()})
    answers = [(fixtures[fid], r) for fid, rs in canned.items() for r in rs]
    assert len(answers) == 32
    for fixture, answer in answers:
        assert verdict_of(gold_judgement(answer.gold, fixture), fixture, PassRule()) == answer.gold.state, answer.id
    strict = {a.answer.id: a.known for a in calibration_answers(20, PassRule(min_total=7))}
    assert strict["P03-partial"] == FAIL  # gold total 6: a pass under the default rule (min_total 6)


def test_the_share_needed_is_rounded_up():
    assert [needed(0.75, n) for n in (1, 2, 3, 4, 5)] == [1, 2, 3, 3, 4]
    assert needed(0.7, 10) == 7 and needed(1.0, 4) == 4


# --- judges on real HTTP servers ----------------------------------------------------------------------------


def test_a_judge_that_agrees_with_the_known_verdicts_passes_the_check():
    """Rule: agreement on at least min_agreement of the calibration answers passes; the pass line says
    agreeing of tried. The simulator's judge gives the gold grading: 4 of 4."""
    with SimServer(SimConfig()) as sim:
        checks = run_judge_check(_sim_spec(sim.base_url), load_judge_prompt())
    (check,) = checks
    assert (check.tried, check.usable, check.agreeing, check.needed, check.failed_calls) == (4, 4, 4, 3, 0)
    assert check.line() == ("judge check: the judge agreed with the known verdict on 4 of 4 calibration answers "
                            "(3 needed)")


def test_a_judge_that_always_says_pass_stops_the_run_naming_the_first_disagreement():
    """Rule: a judge that always says pass agrees on the known passes only (2 of 4): the run stops with
    one line naming the judge, agreeing and usable of tried, and the first disagreement."""
    line = _stopped(_replying(judgement))
    assert line == ("judge the judge agreed with the known verdict on 2 of 4 calibration answers (3 needed; "
                    f"4 usable; P02-partial: judged MODEL_PASS, known MODEL_FAIL); {DISAGREES}")


def test_a_judge_that_always_says_fail_stops_the_run():
    """Rule: a judge that always says fail (every dimension 0) agrees on the known fails only (2 of 4)."""
    line = _stopped(_replying(lambda text: judgement(text, scores=0)))
    assert line == ("judge the judge agreed with the known verdict on 2 of 4 calibration answers (3 needed; "
                    f"4 usable; P01-pass-plain: judged MODEL_FAIL, known MODEL_PASS); {DISAGREES}")


def test_agreement_at_the_minimum_passes_and_below_it_stops():
    """Rule: the check passes when agreeing >= min_agreement of those tried: 3 of 4 passes at the default
    0.75 (a usable fatal flag counts, as the scorer reads it) and stops at min_agreement 1."""
    with fs.FaultServer({"judge": _replying(_passes_all_but_flags_p04)}) as server:
        (check,) = run_judge_check(_spec(server.base_url("judge")), load_judge_prompt())
        assert (check.agreeing, check.usable, check.tried, check.needed) == (3, 4, 4, 3) and check.passed
        with pytest.raises(JudgeCheckFailed) as raised:
            run_judge_check(_spec(server.base_url("judge"), min_agreement=1), load_judge_prompt())
    assert str(raised.value).startswith(
        "judge the judge agreed with the known verdict on 3 of 4 calibration answers (4 needed; 4 usable; "
        "P02-partial: judged MODEL_PASS, known MODEL_FAIL)")


def test_a_judge_with_no_usable_judgement_stops_the_run_in_one_line():
    """Rule: 'judge X gave 0 of 4 usable judgements on the calibration answers; every cell would await a
    human — use a stronger judge, or --no-judge-check' (the first answer's reason in brackets)."""
    line = _stopped(_replying(lambda text: "I think this answer is fine."))
    assert line.startswith("judge the judge gave 0 of 4 usable judgements on the calibration answers "
                           "(P01-pass-plain: ")
    assert line.endswith(f"; {NO_USABLE}")


def test_a_judge_of_the_wrong_prompt_gives_no_usable_judgement():
    """The same rule with the simulator answering as a model (its prompt is not the judge prompt)."""
    with SimServer(SimConfig()) as sim:
        with pytest.raises(JudgeCheckFailed, match=r"^judge the judge gave 0 of 4 usable judgements"):
            run_judge_check(_sim_spec(sim.base_url), OTHER_PROMPT)


def test_an_unreachable_judge_is_named_as_failed_calls():
    spec = _spec("http://127.0.0.1:9/v1", answers=2)
    with pytest.raises(JudgeCheckFailed, match=r"judge the judge: 2 of 2 calls on the calibration answers failed"):
        run_judge_check(spec, load_judge_prompt())


def test_failed_calls_count_as_not_agreeing():
    """Rule: a call that got no reply shows nothing about the judge, so it is not an agreeing answer:
    an agreeing judge whose first two calls fail agrees on 2 of 4 and stops, the failed call named."""
    calls = {"n": 0}

    def first_two_fail(h, n, req):
        calls["n"] += 1
        if calls["n"] <= 2:
            h.send_json(503, {"error": {"message": "overloaded", "type": "test_error"}})
        else:
            _replying(_passes_all_but_flags_p04)(h, n, req)

    with fs.FaultServer({"judge": first_two_fail}) as server:  # one call at a time: P01's and P02's fail
        judge = _spec(server.base_url("judge"), {"limits": {"max_in_flight": 1}}).judges[0]
        check = check_judge(judge, load_judge_prompt(), calibration_answers(4))
    assert (check.failed_calls, check.usable, check.agreeing, check.passed) == (2, 2, 2, False)
    assert check.line().startswith("judge the judge agreed with the known verdict on 2 of 4 calibration answers "
                                   "(3 needed; 2 usable; P01-pass-plain: call failed: ")


def test_the_lines_in_order_of_precedence():
    base = {"judge": "j", "tried": 4, "needed": 3, "first_problem": "P01-pass-plain: why"}
    assert JudgeCheck(**base, usable=0, agreeing=0, failed_calls=4).line().startswith("judge j: 4 of 4 calls")
    assert JudgeCheck(**base, usable=0, agreeing=0, failed_calls=1).line().startswith("judge j gave 0 of 4 usable")
    assert JudgeCheck(**base, usable=3, agreeing=1, failed_calls=1).line().startswith(
        "judge j agreed with the known verdict on 1 of 4 calibration answers (3 needed; 3 usable; P01-pass-plain: why)")


def test_simulated_judges_are_not_checked_by_default_and_a_spec_may_turn_the_check_off():
    sim = {"provider": "sim", "model": "j"}
    real = {"provider": "openai-compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1"}
    spec = parse_spec({"models": [sim], "judges": [sim, real]})
    assert [j.model for j in judges_to_check(spec)] == ["m"]
    assert judges_to_check(parse_spec({"models": [sim], "judges": [real], "judge_check": False})) == []
    assert run_judge_check(parse_spec({"models": [sim], "judges": [sim]}), OTHER_PROMPT) == []
