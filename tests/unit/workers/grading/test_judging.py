"""workers/grading/judging.py, the one judging routine, through `answer_judging.judge_answer` (no
database) against a real HTTP judge on 127.0.0.1 (tests/faults/fault_server.py; SIMULATED replies).

Rules checked: a call that gets no reply is tried again within the same bounded tries, and a later
usable reply is used; a judge none of whose calls got a reply leaves the answer unjudged (INFRA_ERROR
naming the judge, never a pass, fail or dispute), after exactly max_parse_retries + 1 calls; a judge
that replied but never usably is a GRADER_DISPUTE, not INFRA_ERROR.
"""

from __future__ import annotations

from afpbench.fixtures.loader import load_fixture
from afpbench.reference.loader import load_judge_prompt
from afpbench.scoring.rules import DisputeRule
from afpbench.workers.grading.answer_judging import judge_answer
from afpbench.workers.sweeps.spec import ModelSpec
from tests.e2e.test_fixtures_check import answer_body, judgement
from tests.faults import fault_server as fs

FIXTURE = load_fixture("P04")
ANSWER = answer_body("P04/correct_04.md")
PASSED = {"passed": True, "failures": []}
TRIES = DisputeRule().max_parse_retries + 1


def _judged(behaviour: fs.Behaviour):
    with fs.FaultServer({"judge": behaviour}) as server:
        judge = ModelSpec(provider="openai-compatible", model="test-judge", base_url=server.base_url("judge"))
        judged = judge_answer(FIXTURE, ANSWER, [], PASSED, [judge], load_judge_prompt())
        return judged, len(server.requests_for("judge"))


def _agreeing(h: fs.Handler, n: int, req: dict) -> None:
    h.send_json(200, fs.completion(judgement(req["messages"][-1]["content"])))


def test_a_failed_call_is_tried_again_and_a_later_reply_is_used():
    judged, calls = _judged(fs.first(1, fs.status(503), _agreeing))
    assert judged.verdict.state.value == "MODEL_PASS" and judged.judge_unavailable is None
    assert calls == 2 and judged.tries[0]["error"].startswith("judge call failed")


def test_a_judge_that_never_replies_leaves_the_answer_unjudged():
    judged, calls = _judged(fs.status(503))
    assert calls == TRIES
    assert judged.verdict.state.value == "INFRA_ERROR" and judged.verdict.scores is None
    assert judged.verdict.rationale.startswith("judge unavailable: judge openai-compatible/test-judge: no reply")
    assert judged.judge_unavailable and len(judged.tries) == TRIES


def test_a_judge_that_replies_but_never_usably_is_a_dispute_not_an_infra_error():
    judged, calls = _judged(fs.answer("I think this answer is fine."))
    assert calls == TRIES and judged.judge_unavailable is None
    assert judged.verdict.state.value == "GRADER_DISPUTE"
