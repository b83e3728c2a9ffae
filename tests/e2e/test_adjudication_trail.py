"""Acceptance: `adjudicate decide` on a cell that is not disputed is refused without `--override`; with
it (and a reason) the report lists the decision, and `verify` still passes and counts it.

A real embedded sweep (simulated model and judge), then the CLI as a user runs it. Protocol rules:
human adjudication is for GRADER_DISPUTE; every human-review outcome is on record and visible; the
sealed inputs are unchanged by it.
"""

from __future__ import annotations

import json
import re
import sqlite3

import yaml

from tests.e2e.test_cli_errors import afpbench, one_line_error, row_count


def test_override_is_refused_without_flag_then_listed_in_report_and_counted_by_verify(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "models": [{"provider": "sim", "model": "sim-1"}], "judges": [{"provider": "sim", "model": "sim-1"}],
        "fixtures": {"only": ["P01", "P02"]}, "conditions": ["A", "B"],
    }))
    run = afpbench(["run", str(spec), "--json"], tmp_path)
    assert run.returncode == 0, run.stderr
    sweep_id = json.loads(run.stdout)["sweep_id"]
    db = tmp_path / "afpbench.db"
    con = sqlite3.connect(db)
    try:
        cell_id, state = con.execute("select id, state from cell where state in ('MODEL_PASS', 'MODEL_FAIL') "
                                     "order by id limit 1").fetchone()
    finally:
        con.close()
    target, scores = ("MODEL_FAIL", "0,1,1,1") if state == "MODEL_PASS" else ("MODEL_PASS", "2,2,2,2")
    decide = ["adjudicate", "decide", str(cell_id), "--state", target, "--reviewer", "dana",
              "--note", "second look at the answer", "--scores", scores]
    rows_before = row_count(db)

    refused = afpbench(decide, tmp_path)
    assert refused.returncode == 2
    line = one_line_error(refused)
    assert f"cell {cell_id} is {state}, not GRADER_DISPUTE" in line and "--override" in line
    no_reason = afpbench([*decide, "--override"], tmp_path)
    assert no_reason.returncode == 2 and "needs a non-empty reason" in one_line_error(no_reason)
    assert row_count(db) == rows_before, "a refused decision writes nothing"

    done = afpbench([*decide, "--override", "--reason", "the judge overlooked the draft wording"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"cell {cell_id}: {state} -> {target} (override" in done.stdout

    report = afpbench(["report", sweep_id, "--format", "md"], tmp_path)
    assert report.returncode == 0, report.stderr
    section = report.stdout.split("## Human decisions", 1)[1]
    assert f"| {cell_id} | " in section and f"{state} -> {target} | override | dana" in section
    assert "the judge overlooked the draft wording" in section

    verify = afpbench(["verify", sweep_id], tmp_path)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "the sweep has 1 human decision " in verify.stdout and "verified" in verify.stdout


def test_a_decided_dispute_keeps_its_tool_call_written_as_text_in_show_report_and_viewer(
        tmp_path, settings_env, sqlite_url):
    """A human decision keeps the scorer's record: the answer (a real recorded Qwen reply that writes its
    calculator call as a ```json fence) was scored as text; after a reviewer decides the dispute, `show`,
    the report and the viewer still say a tool call was written as text."""
    from fastapi.testclient import TestClient

    from afpbench.api.http.app import create_app
    from tests.conftest import REPO
    from tests.e2e.test_scoring_pipeline import replaying_server, rows

    answers = json.loads((REPO / "tests" / "data" / "realmodel" / "answers.json").read_text("utf-8"))["answers"]
    p08 = next(a for a in answers if a["fixture"] == "P08" and a["condition"] == "A")
    model = replaying_server(lambda request: p08["raw_body"])
    try:
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump({
            "models": [{"provider": "openai-compatible", "model": "qwen-recorded",
                        "base_url": f"http://127.0.0.1:{model.server_port}/v1"}],
            "judges": [], "fixtures": {"only": ["P08"]}, "conditions": ["A"],
        }))
        run = afpbench(["run", str(spec), "--json"], tmp_path)
    finally:
        model.shutdown()
    sweep_id = json.loads(run.stdout)["sweep_id"]
    ((cell_id, state),) = rows(tmp_path / "afpbench.db", "select id, state from cell")
    assert state == "GRADER_DISPUTE", run.stdout + run.stderr
    ((reason,),) = rows(tmp_path / "afpbench.db", "select state_reason from cell")
    assert len(reason) > 120  # the old listing cut it at 120 characters, mid-word
    listed = afpbench(["adjudicate", "list"], tmp_path, env={"COLUMNS": "80"}).stdout
    assert max(map(len, listed.splitlines())) <= 80
    words = set(re.split(r"[\s│┃|]+", listed))
    assert [w for w in reason.split() if w not in words] == [], listed  # wrapped at spaces: every word whole
    shown = afpbench(["adjudicate", "show", str(cell_id)], tmp_path, env={"COLUMNS": "100"}).stdout
    assert "why disputed:" in shown and "no human decision yet" in shown and '\\"' not in shown
    assert "calculateLatePayment" in shown and not shown.lstrip().startswith("{")
    awaiting = afpbench(["status"], tmp_path, env={"COLUMNS": "200"}).stdout
    assert "awaiting a human decision: 1 GRADER_DISPUTE" in awaiting
    done = afpbench(["adjudicate", "decide", str(cell_id), "--state", "MODEL_FAIL", "--reviewer", "dana",
                     "--note", "it wrote the calculator call out instead of making it, no figure given",
                     "--scores", "0,1,1,1"], tmp_path)
    assert done.returncode == 0, done.stderr

    assert "(human: dana)" in afpbench(["cells"], tmp_path, env={"COLUMNS": "200"}).stdout
    status = afpbench(["status"], tmp_path, env={"COLUMNS": "200"}).stdout
    assert "human decisions: 1 " in status and "awaiting a human decision:" not in status
    assert "dana" in afpbench(["adjudicate", "show", str(cell_id)], tmp_path, env={"COLUMNS": "100"}).stdout
    record = json.loads(afpbench(["show", str(cell_id), "--json"], tmp_path).stdout)
    assert record["result_state"] == "MODEL_FAIL" and record["results"][-1]["details"]["source"] == "human"
    assert record["written_tool_call"]["calls"][0]["name"] == "calculateLatePayment"
    table = afpbench(["show", str(cell_id)], tmp_path).stdout
    assert "tool call written as text" in table and "calculateLatePayment" in table
    report = afpbench(["report", sweep_id, "--format", "md"], tmp_path).stdout
    assert "no answer wrote a tool call as text" not in report
    assert "calculateLatePayment (not offered)" in report

    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN="")
    page = TestClient(create_app(runtime=False)).get(f"/view/cells/{cell_id}")
    assert page.status_code == 200
    assert "the whole answer is a tool call written as text (calculateLatePayment" in page.text
