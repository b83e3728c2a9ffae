"""Acceptance: `adjudicate decide` on a cell that is not disputed is refused without `--override`; with
it (and a reason) the report lists the decision, and `verify` still passes and counts it.

A real embedded sweep (simulated model and judge), then the CLI as a user runs it. Protocol rules:
human adjudication is for GRADER_DISPUTE; every human-review outcome is on record and visible; the
sealed inputs are unchanged by it.
"""

from __future__ import annotations

import json
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
