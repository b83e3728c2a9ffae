"""The publication bundle and its gate, run records, and the result commands (SQLite, real files)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from afpbench.api import cli_report
from afpbench.api.report import render_report
from afpbench.reference.loader import protocol
from afpbench.workers.errors import ExportError
from afpbench.workers.results.export import export_bundle
from afpbench.workers.results.records import run_record
from afpbench.workers.store.db import session_scope
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import demo_spec, parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

PENDING = "protocol published / results pending"


@pytest.fixture
def db(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    return sqlite_url


@pytest.fixture(scope="module")
def demo_loaded():
    return load_inputs(demo_spec())


@pytest.fixture(scope="module")
def demo_inputs(demo_loaded) -> dict:
    return demo_loaded.to_json()


@pytest.fixture(scope="module")
def demo_files(demo_loaded) -> dict:
    return dict(zip(demo_loaded.fixtures, demo_loaded.fixture_files, strict=True))


def _sweep(sweep_id: str, inputs: dict, *, unfinished: bool = False, spec=None, files=None) -> list[int]:
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, sweep_id, inputs=inputs, spec=spec, fixture_files=files))
        ids = [cells.add(c, "P01", "MODEL_PASS") for c in "ABCD"]
        ids.append(cells.add("C", "P01", "MODEL_FAIL", fatal="followed_injection"))
        ids.append(cells.add("D", "P01", "INFRA_ERROR", reason="connection reset after 3 attempts"))
        if unfinished:
            ids.append(cells.add("A", "P01", None))
    return ids


def test_complete_bundle_reads_published_with_all_seven_items(db, tmp_path, demo_inputs, demo_files):
    """Publication gate: all seven protocol items present and non-empty + a complete sweep -> published."""
    ids = _sweep("pub", demo_inputs, files=demo_files)
    out = tmp_path / "bundle"
    report = export_bundle("pub", out, renderer=render_report)
    assert report.status == "published" and report.missing == []
    assert (out / "STATUS.md").read_text().startswith("# Status: published")
    assert sorted(p.name for p in (out / "fixtures").iterdir()) == sorted(f.name for f in demo_files.values())
    assert (out / "instructions" / "C.md").read_text() == demo_inputs["instructions"]["texts"]["C"]
    rubric = (out / "rubric_and_fatal_criteria.yaml").read_text()
    assert "followed_injection" in rubric and "min_total" in rubric
    lines = (out / "raw_outputs.jsonl").read_text().splitlines()
    assert [json.loads(x)["cell_id"] for x in lines] == ids
    first = json.loads(lines[0])
    assert first["raw_output"]["raw_bodies"] == ['{"choices": []}']  # raw body stored once per record
    assert first["attempts"][0]["rounds"][0]["raw_body"] == "(raw_output.raw_bodies[0])"
    assert first["grader_prompt"]["text_file"] == "judge_prompt.md"
    assert (out / "judge_prompt.md").read_text() == demo_inputs["judge_prompt"]
    scores = list(csv.DictReader((out / "scores.csv").open()))
    assert len(scores) == len(ids) and scores[4]["fatal_criterion"] == "followed_injection"
    excluded = list(csv.DictReader((out / "excluded.csv").open()))
    assert [(r["state"], r["reason"]) for r in excluded] == [("INFRA_ERROR", "connection reset after 3 attempts")]
    limitations = (out / "LIMITATIONS.md").read_text()
    assert "not evidence of agent or tool-use capability" in limitations
    assert "SIMULATED" in limitations  # the demo spec uses the sim provider
    assert json.loads((out / "seal.json").read_text())["seal_hash"] == "seal-pub"
    assert json.loads((out / "summary.json").read_text())["totals"]["n"] == 5
    assert "SIMULATED" in (out / "report.html").read_text()


def test_missing_item_reads_results_pending_and_names_it(db, tmp_path, demo_inputs):
    """Publication gate: without the fixture texts the bundle is 'protocol published / results pending'."""
    _sweep("nofx", demo_inputs)  # no fixture rows
    report = export_bundle("nofx", tmp_path / "b")
    assert report.status == PENDING == protocol()["pending_status"]
    assert any(m.startswith("fixtures:") for m in report.missing)
    status = (tmp_path / "b" / "STATUS.md").read_text()
    assert status.startswith(f"# Status: {PENDING}") and "fixtures: missing or empty" in status


def test_incomplete_sweep_reads_results_pending(db, tmp_path, demo_inputs, demo_files):
    """Publication gate: every item present but a cell unfinished -> still pending, and the reason is named."""
    _sweep("open", demo_inputs, unfinished=True, files=demo_files)
    report = export_bundle("open", tmp_path / "b")
    assert report.status == PENDING
    assert report.missing == ["results: sweep is not complete (status complete, 1 of 7 cells unfinished)"]


def test_existing_non_empty_directory_is_never_overwritten(db, tmp_path, demo_inputs, demo_files):
    _sweep("pub", demo_inputs, files=demo_files)
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ExportError, match="already exists and is not an empty directory"):
        export_bundle("pub", out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert export_bundle("pub", empty).status == "published"  # an empty directory is fine


def test_failed_export_leaves_nothing_half_written(db, tmp_path, demo_inputs, demo_files):
    _sweep("pub", demo_inputs, files=demo_files)

    def broken(summary: dict, fmt: str) -> str:
        raise RuntimeError("renderer failed")

    with pytest.raises(RuntimeError, match="renderer failed"):
        export_bundle("pub", tmp_path / "out", renderer=broken)
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]


def test_run_record_has_every_protocol_field_and_masks_keys_in_export(db, tmp_path, demo_inputs, monkeypatch):
    """Run record (protocol run_record list) complete; a provider key never reaches the exported bundle."""
    monkeypatch.setenv("AFP_TEST_EXPORT_KEY", "sk-live-secret-value-123456")
    spec = parse_spec({"name": "keyed", "judges": [], "models": [
        {"provider": "openai", "model": "gpt-x", "api_key_env": "AFP_TEST_EXPORT_KEY"}]})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "key", spec=spec, inputs=demo_inputs))
        cid = cells.add("A", "P01", "MODEL_PASS", output_text="echo sk-live-secret-value-123456 back")
    with session_scope() as s:
        record = run_record(s, cid).model_dump(mode="json")
    missing = [f for f in protocol()["run_record"] if f not in record]
    assert missing == []
    assert record["model_name"] == "gpt-x" and record["result_state"] == "MODEL_PASS"
    assert record["raw_output"]["raw_bodies"] == ['{"choices": []}']
    assert record["grader_prompt"]["text"] == demo_inputs["judge_prompt"]
    export_bundle("key", tmp_path / "b")
    exported = (tmp_path / "b" / "raw_outputs.jsonl").read_text()
    assert "sk-live-secret-value-123456" not in exported and "echo *** back" in exported


def test_report_and_show_commands(db, tmp_path, demo_inputs, demo_files):
    """The CLI commands print the summary and the run record; unknown ids fail as one-line errors."""
    ids = _sweep("cli", demo_inputs, files=demo_files)
    app = typer.Typer()
    cli_report.register(app)
    runner = CliRunner()
    out = runner.invoke(app, ["report", "cli", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["totals"]["pass"] == 4
    target = tmp_path / "r.html"
    assert runner.invoke(app, ["report", "cli", "--format", "html", "--out", str(target)]).exit_code == 0
    assert target.read_text().startswith("<!DOCTYPE html>")
    shown = runner.invoke(app, ["show", str(ids[0])])
    assert shown.exit_code == 0 and "MODEL_PASS" in shown.output
    bad = runner.invoke(app, ["show", "999999"])
    assert isinstance(bad.exception, cli_report.CommandError)
    assert "no cell with id 999999" in str(bad.exception)
    assert isinstance(runner.invoke(app, ["report", "nope"]).exception, cli_report.CommandError)
    exported = runner.invoke(app, ["export", "cli", str(tmp_path / "bundle")])
    assert exported.exit_code == 0 and "status: published" in exported.output
    assert Path(tmp_path / "bundle" / "summary.md").read_text().startswith("# afpbench report")
