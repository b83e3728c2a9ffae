"""Adjudication scope and trail (SQLite, cells with KNOWN states, the real HTTP app and bundle writer).

Protocol rules: a GRADER_DISPUTE goes to human adjudication; a verdict the sealed rules reached is
not silently overwritten (any other cell needs an explicit override with a reason); the run record
keeps the human-review outcome; a published result shows every decision (report, bundle), and the
sealed inputs never change.
"""

from __future__ import annotations

import csv
import json

import pytest
from fastapi.testclient import TestClient
from sqlmodel import func, select

from afpbench.api.http.app import create_app
from afpbench.api.report import render_report
from afpbench.workers.errors import AdjudicationError
from afpbench.workers.grading.adjudication import record_human_decision
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.results.export import export_bundle
from afpbench.workers.results.human_decisions import decision_count
from afpbench.workers.results.records import run_record
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Adjudication, Cell, Result, Sweep
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import demo_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

TOKEN = "unit-test-token-adjudication-1"
SCORES_FAIL = {"task_correctness": 0, "evidence_discipline": 1, "uncertainty_handling": 1, "failure_control": 1}


@pytest.fixture(scope="module")
def demo_inputs() -> dict:
    return load_inputs(demo_spec()).to_json()


@pytest.fixture
def cells(sqlite_url, settings_env, demo_inputs) -> dict[str, int]:
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN=TOKEN)
    with session_scope() as s:
        maker = CellMaker(s, make_sweep(s, "adj", inputs=demo_inputs))
        ids = {
            "pass": maker.add("A", "P01", "MODEL_PASS"),
            "pass_b": maker.add("B", "P01", "MODEL_PASS"),
            "dispute": maker.add("C", "P01", "GRADER_DISPUTE", reason="judges disagree on pass/fail"),
            "infra": maker.add("D", "P01", "INFRA_ERROR", reason="connection reset after 5 attempts"),
        }
    return ids


def _rows() -> tuple[int, int, dict[int, str]]:
    with session_scope() as s:
        return (s.exec(select(func.count(Adjudication.id))).one(), s.exec(select(func.count(Result.id))).one(),
                {c.id: c.state for c in s.exec(select(Cell))})


def test_a_dispute_is_decided_without_override(cells):
    out = record_human_decision(cells["dispute"], "alice", "MODEL_FAIL", "invented the refund date", SCORES_FAIL)
    assert out["from_state"] == "GRADER_DISPUTE" and out["state"] == "MODEL_FAIL" and out["override"] is False


@pytest.mark.parametrize("name", ["pass", "infra"])
def test_a_cell_that_is_not_disputed_is_refused_without_override_and_nothing_is_written(cells, name):
    before = _rows()
    with pytest.raises(AdjudicationError) as refused:
        record_human_decision(cells[name], "bob", "MODEL_FAIL", "looks wrong to me", SCORES_FAIL)
    message = str(refused.value)
    state = "MODEL_PASS" if name == "pass" else "INFRA_ERROR"
    assert "\n" not in message and f"cell {cells[name]} is {state}, not GRADER_DISPUTE" in message
    assert "--override" in message and "--reason" in message
    assert _rows() == before


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_an_override_without_a_reason_is_refused_and_nothing_is_written(cells, reason):
    before = _rows()
    with pytest.raises(AdjudicationError, match="override needs a non-empty reason"):
        record_human_decision(cells["pass"], "bob", "MODEL_FAIL", "note", SCORES_FAIL, override=True, reason=reason)
    assert _rows() == before


def test_every_decision_is_on_the_trail_and_the_seal_is_untouched(cells, tmp_path):
    """The summary, the report (md, html, json), the bundle and the run record list each decision."""
    with session_scope() as s:
        seal_before = (s.get(Sweep, "adj").seal_hash, dict(s.get(Sweep, "adj").seal_components))
    rate_before = snapshot("adj").totals.pass_rate
    record_human_decision(cells["dispute"], "alice", "MODEL_FAIL", "invented the refund date", SCORES_FAIL)
    out = record_human_decision(cells["pass"], "bob", "MODEL_FAIL", "the judge missed the fabricated | operand",
                 SCORES_FAIL, override=True, reason="judge missed a <fabricated> operand")
    assert out["from_state"] == "MODEL_PASS" and out["override"] is True

    summary = snapshot("adj")
    assert summary.totals.pass_rate != rate_before, "the override changed the rate: exactly why it is shown"
    trail = [(d.cell_id, d.from_state, d.to_state, d.override, d.reviewer, d.reason) for d in summary.human_decisions]
    assert trail == [
        (cells["dispute"], "GRADER_DISPUTE", "MODEL_FAIL", False, "alice", "invented the refund date"),
        (cells["pass"], "MODEL_PASS", "MODEL_FAIL", True, "bob", "judge missed a <fabricated> operand"),
    ]
    assert all(d.decided_at and d.decided_at.endswith("+00:00") for d in summary.human_decisions)

    md = render_report(summary, "md")
    section = md.split("## Human decisions", 1)[1]
    assert f"| {cells['pass']} | " in section and "MODEL_PASS -> MODEL_FAIL | override | bob" in section
    assert "GRADER_DISPUTE -> MODEL_FAIL | dispute | alice" in section
    assert "human decisions: 2 (1 overrides)" in md
    html = render_report(summary, "html")
    assert "Human decisions" in html and "judge missed a &lt;fabricated&gt; operand" in html
    assert json.loads(render_report(summary, "json"))["human_decisions"][1]["override"] is True

    bundle = tmp_path / "bundle"
    export_bundle("adj", bundle, renderer=render_report)
    rows = list(csv.DictReader((bundle / "human_decisions.csv").open(encoding="utf-8")))
    assert [(r["cell_id"], r["from_state"], r["to_state"], r["override"], r["reviewer"]) for r in rows] == [
        (str(cells["dispute"]), "GRADER_DISPUTE", "MODEL_FAIL", "False", "alice"),
        (str(cells["pass"]), "MODEL_PASS", "MODEL_FAIL", "True", "bob")]
    assert "2 human decisions" in (bundle / "LIMITATIONS.md").read_text()
    seal = json.loads((bundle / "seal.json").read_text())
    assert (seal["seal_hash"], seal["components"]) == seal_before

    with session_scope() as s:
        record = run_record(s, cells["pass"])
        assert decision_count(s, "adj") == 2
        assert (s.get(Sweep, "adj").seal_hash, s.get(Sweep, "adj").seal_components) == seal_before
    [decision] = record.human_review_outcome
    assert (decision.from_state, decision.state, decision.override, decision.reason, decision.reviewer) == (
        "MODEL_PASS", "MODEL_FAIL", True, "judge missed a <fabricated> operand", "bob")
    assert record.result_state == "MODEL_FAIL" and record.raw_output.text == "SIMULATED answer", \
        "the decision is about the answer that was judged"


def test_http_refuses_an_override_without_flag_or_reason_with_422(cells):
    client = TestClient(create_app(runtime=False))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = {"reviewer": "carol", "state": "MODEL_FAIL", "scores": SCORES_FAIL, "note": "n"}
    refused = client.post(f"/adjudications/{cells['pass_b']}", json=body, headers=auth)
    assert refused.status_code == 422 and "not GRADER_DISPUTE" in refused.json()["detail"][0]["msg"]
    no_reason = client.post(f"/adjudications/{cells['pass_b']}", json={**body, "override": True}, headers=auth)
    assert no_reason.status_code == 422 and "non-empty reason" in no_reason.text
    assert _rows()[2][cells["pass_b"]] == "MODEL_PASS"
    done = client.post(f"/adjudications/{cells['pass_b']}", json={**body, "override": True, "reason": "r"},
                       headers=auth)
    assert done.status_code == 201, done.text
    assert done.json()["from_state"] == "MODEL_PASS" and done.json()["override"] is True
    assert client.get("/sweeps/adj/report?format=json", headers=auth).json()["human_decisions"][0]["reason"] == "r"
