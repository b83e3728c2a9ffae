"""A judge that cannot be reached is bounded by the one attempt budget too (issue #15, item 5).

Rules checked:
- A scoring try lost to an unreachable judge is kept on record (a Judgement row saying so), and the
  cell is judged again later, at most AFP_MAX_ATTEMPTS times; then it ends INFRA_ERROR naming why
  (before: the score task retried every 30 s for as long as workers ran, and the sweep never finished).
- Such a run exits 3: the cells were excluded for a reason outside the model's output.
- A judge answer holding a NUL is stored (readable, NUL replaced) instead of failing the write.
"""

from __future__ import annotations

import json

from tests.faults import fault_server as fs
from tests.faults.harness import afpbench, http_model, query

MAX_ATTEMPTS = 2


def _spec(model_url: str, judge_url: str) -> dict:
    return {"name": "judge outage", "models": [http_model("m", model_url)],
            "judges": [http_model("j", judge_url)], "fixtures": {"only": ["P01"]}, "conditions": ["A"],
            "dispute_rule": {"max_parse_retries": 0},
            # These judges fail on purpose inside the run: the check before the sweep would stop it first.
            "judge_check": False}


def test_an_unreachable_judge_ends_the_cell_infra_error_within_the_budget(tmp_path):
    routes = {"model": fs.answer(), "judge": fs.status(503)}
    with fs.FaultServer(routes) as server:
        (tmp_path / "spec.json").write_text(json.dumps(_spec(server.base_url("model"), server.base_url("judge"))))
        # Short countdowns: the re-judge waits RejudgeLater's delay, capped by half the visibility timeout.
        proc = afpbench(["run", str(tmp_path / "spec.json"), "--json"], tmp_path, timeout=240, env={
            "AFP_MAX_ATTEMPTS": str(MAX_ATTEMPTS), "AFP_VISIBILITY_TIMEOUT_S": "4",
            "AFP_TASK_HARD_TIME_LIMIT_S": "3", "AFP_LEASE_EXPIRY_S": "5"})
        judge_calls = len(server.requests_for("judge"))
    assert proc.returncode == 3, proc.stderr[-2000:]
    db = tmp_path / "afpbench.db"
    ((state, reason),) = query(db, "select state, state_reason from cell")
    assert state == "INFRA_ERROR" and reason.startswith("judge unavailable: judge "), reason
    assert f"after {MAX_ATTEMPTS} scoring tries" in reason, reason
    lost = query(db, "select count(*) from judgement where parse_error like 'judge unavailable%'")[0][0]
    assert lost == MAX_ATTEMPTS
    assert judge_calls == MAX_ATTEMPTS  # one call per try (max_parse_retries 0), none after the budget
    assert query(db, "select count(*) from result where state = 'INFRA_ERROR'")[0][0] == 1


def test_a_judge_answer_with_a_nul_is_stored(tmp_path):
    """The judge's raw text is kept readable with the NUL replaced; the cell still gets its verdict."""
    poisoned = fs.answer("not json \x00 at all")
    with fs.FaultServer({"model": fs.answer(), "judge": poisoned}) as server:
        (tmp_path / "spec.json").write_text(json.dumps(_spec(server.base_url("model"), server.base_url("judge"))))
        proc = afpbench(["run", str(tmp_path / "spec.json"), "--json"], tmp_path, timeout=180)
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    db = tmp_path / "afpbench.db"
    raws = [r[0] for r in query(db, "select raw_text from judgement where raw_text is not null")]
    assert raws and all("\x00" not in r and "\ufffd" in r for r in raws), raws
    ((state,),) = query(db, "select state from cell")
    assert state == "GRADER_DISPUTE"  # an unparseable judgement is a dispute, never a pass or fail
