"""A sweep and `afpbench fixtures check --judge` reach the same verdict on the same answer and the same
judge replies: both call workers/grading/judging.py:judged_verdict (issue 36, Build 2).

Rules checked, each through the real CLI process (a sweep in embedded mode, and `fixtures check`):
the same state, scores, total, fatal criterion, rationale and dispute reasons, for judges that agree
(pass; a confirmed fatal), that reject a deterministic fatal (blind swapped re-judge, then
GRADER_DISPUTE), whose first reply is unusable (asked again with the reason fed back), whose replies
are all unusable (GRADER_DISPUTE), and that never answer (docs/PROTOCOL.md "A judge that cannot be
reached": INFRA_ERROR; the sweep after its attempt budget, `fixtures check` at once with exit 3).
The tested model and the judge are one real HTTP server on 127.0.0.1 speaking the OpenAI wire format
(tests/faults/fault_server.py); its answers are SIMULATED, written for these tests. A judge's reply
depends only on the round's request and how many requests that round has had, so both paths get the
same replies.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.test_fixtures_check import answer_body, judgement
from tests.faults import fault_server as fs
from tests.faults.harness import afpbench, http_model, query

FIXTURE = "P04"
JUDGE = {"provider": "openai-compatible", "model": "test-judge"}


def _user_text(request: dict) -> str:
    return request["messages"][-1]["content"]


def _replying(reply) -> fs.Behaviour:
    """A judge route: `reply(user_text, n)` is the assistant's content, n the round's earlier requests."""
    return lambda h, n, req: h.send_json(200, fs.completion(reply(_user_text(req), n)))


def _quote(answer: str):
    return lambda text, n: judgement(text, {"claimed_unexecuted_action": answer}, scores=0)


CASES = {
    # case: (answer file, judge behaviour, state both must reach)
    "agree-pass": ("P04/correct_04.md", _replying(lambda text, n: judgement(text)), "MODEL_PASS"),
    "confirmed-fatal": ("P04/wrong_01.md", _replying(_quote("I've issued the refund")), "MODEL_FAIL"),
    "rejected-fatal-rejudged": ("P04/wrong_01.md", _replying(lambda text, n: judgement(text)), "GRADER_DISPUTE"),
    "unusable-then-usable": ("P04/wrong_01.md", _replying(lambda text, n: judgement(
        text, {"claimed_unexecuted_action": "I refunded the customer twice" if n == 0 else "I've issued the refund"},
        scores=0)), "MODEL_FAIL"),
    "always-unusable": ("P04/wrong_01.md", _replying(lambda text, n: "I think this answer is fine."), "GRADER_DISPUTE"),
    "no-reply": ("P04/correct_04.md", fs.status(503), "INFRA_ERROR"),
}


def _sweep(tmp_path, server: fs.FaultServer) -> dict:
    spec = {"name": "same verdict", "models": [http_model("m", server.base_url("model"))],
            "judges": [{**JUDGE, "base_url": server.base_url("judge")}],
            "fixtures": {"only": [FIXTURE]}, "conditions": ["A"],
            "judge_check": False}  # the judges here are made to fail; the check before the run would stop it
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    # One scoring try: a judge that never answers ends the cell at once (the attempt budget is AFP_MAX_ATTEMPTS).
    proc = afpbench(["run", str(tmp_path / "spec.json"), "--json"], tmp_path, timeout=240,
                    env={"AFP_MAX_ATTEMPTS": "1"})
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    ((state, scores, total, fatal, rationale, details),) = query(
        tmp_path / "afpbench.db",
        "select state, json_array(task_correctness, evidence_discipline, uncertainty_handling, failure_control),"
        " total, fatal_criterion, rationale, details from result")
    dims = json.loads(scores)
    return {"exit": proc.returncode, "state": state, "scores": None if dims == [None] * 4 else dims,
            "total": total, "fatal_criterion": fatal, "rationale": rationale,
            "dispute_reasons": json.loads(details).get("dispute_reasons", []),
            "rounds": sorted({r[0] for r in query(tmp_path / "afpbench.db", "select judge_round from judgement")})}


def _check(tmp_path, server: fs.FaultServer, answer: str) -> dict:
    (tmp_path / "answer.md").write_text(answer, encoding="utf-8")
    proc = afpbench(["fixtures", "check", FIXTURE, "--answer", str(tmp_path / "answer.md"), "--json", "--judge",
                     f"{JUDGE['provider']}:{JUDGE['model']}", "--base-url", server.base_url("judge")], tmp_path)
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    judged = json.loads(proc.stdout)["judgement"]
    v = judged["verdict"]
    return {"exit": proc.returncode, "state": v["state"],
            "scores": None if v["scores"] is None else list(v["scores"].values()), "total": v["total"],
            "fatal_criterion": v["fatal_criterion"], "rationale": v["rationale"],
            "dispute_reasons": v["dispute_reasons"], "rounds": sorted({t["round"] for t in judged["tries"]})}


@pytest.mark.parametrize("case", list(CASES))
def test_a_sweep_and_fixtures_check_give_the_same_verdict(tmp_path, case):
    answer_file, judge, state = CASES[case]
    answer = answer_body(answer_file)
    with fs.FaultServer({"model": fs.answer(answer), "judge": judge}) as server:
        (tmp_path / "sweep").mkdir()
        (tmp_path / "check").mkdir()
        swept = _sweep(tmp_path / "sweep", server)
        checked = _check(tmp_path / "check", server, answer)
    assert swept["state"] == checked["state"] == state, (swept, checked)
    if state == "INFRA_ERROR":
        # Not the model's output: the run exits 3, and so does the check; both name the same judge failure.
        assert swept["exit"] == checked["exit"] == 3
        assert checked["rationale"].startswith("judge unavailable: judge openai-compatible/test-judge: no reply")
        assert swept["rationale"].startswith(checked["rationale"] + " (after 1 scoring tries"), swept["rationale"]
        return
    assert checked["exit"] == 0
    for key in ("scores", "total", "fatal_criterion", "rationale", "dispute_reasons", "rounds"):
        assert swept[key] == checked[key], (key, swept[key], checked[key])
    if case == "rejected-fatal-rejudged":
        assert checked["rounds"] == [1, 2], "a dispute is re-judged blind with the order swapped"
