"""The CLI behaves the same way across commands, typed the way a user types them.

Rules checked: `report`, `export` and `verify` act on the latest sweep when none is named, as `status`
and `cells` do; `cells --model` takes the name the tables show ("sim" for "sim (simulated)") and a
model or fixture the sweep does not have is an error naming those it has, never an empty listing;
errors for an unknown fixture id read as sentences, not as a module path; an unreadable spec is one
line and exit 2 (README "Exit status"); `--help` shows no `<bool>` label for a flag.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.test_cli_errors import afpbench, one_line_error


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, str]:
    """One small demo sweep (simulated), then a second so that "latest" is the second."""
    work = tmp_path_factory.mktemp("consistency")
    first = afpbench(["run", "--fixtures", "P01", "--conditions", "A,B", "--json"], work)
    assert first.returncode == 0, first.stderr
    latest = afpbench(["run", "--fixtures", "P01,P02", "--conditions", "A,D", "--json"], work)
    assert latest.returncode == 0, latest.stderr
    return work, json.loads(latest.stdout)["sweep_id"]


def test_report_export_and_verify_default_to_the_latest_sweep(demo):
    work, latest = demo
    report = afpbench(["report", "--format", "json"], work)
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["sweep_id"] == latest
    verify = afpbench(["verify"], work)
    assert verify.returncode == 0 and "verified" in verify.stdout, verify.stderr
    export = afpbench(["export", "bundle"], work)
    assert export.returncode == 0, export.stderr
    assert latest in (work / "bundle" / "summary.json").read_text(encoding="utf-8")
    named = afpbench(["export", latest, "bundle-named"], work)
    assert named.returncode == 0, named.stderr
    too_many = afpbench(["export", latest, "a", "b"], work)
    assert too_many.returncode == 2 and "[SWEEP] DIRECTORY" in too_many.stderr


def test_cells_takes_the_model_name_the_tables_show(demo):
    work, _ = demo
    table = afpbench(["status"], work).stdout
    assert "sim (simulated)" in table  # the name a user reads, and types as "sim"
    cells = afpbench(["cells", "--model", "sim", "--json"], work)
    assert cells.returncode == 0, cells.stderr
    assert len(json.loads(cells.stdout)) == 4
    by_name = json.loads(afpbench(["cells", "--model", "sim-1", "--fixture", "P02", "--json"], work).stdout)
    assert [c["fixture"].split("@")[0] for c in by_name] == ["P02", "P02"]


@pytest.mark.parametrize(("option", "value", "named"), [
    ("--fixture", "P99", "P01@"), ("--model", "gpt-4o", "sim (simulated)"),
])
def test_a_filter_the_sweep_cannot_match_is_an_error_naming_what_it_has(demo, option, value, named):
    work, latest = demo
    proc = afpbench(["cells", option, value], work)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert repr(value) in line and latest in line and named in line, line


def test_unknown_fixture_ids_are_sentences_not_module_paths(tmp_path):
    run = one_line_error(afpbench(["run", "--fixtures", "P99"], tmp_path))
    show = one_line_error(afpbench(["fixtures", "show", "P42"], tmp_path))
    assert run.startswith("error: unknown fixture id(s) P99 in the pilot set"), run
    assert show.startswith("error: unknown fixture id P42 in the pilot set; known: P01"), show
    assert "afpbench." not in run + show


def test_an_unreadable_spec_is_one_line_and_exit_2(tmp_path):
    # root reads any file whatever its mode; a write-only procfs file is unreadable even for root
    target = Path("/proc/sys/vm/compact_memory")
    if not target.exists() or os.access(target, os.R_OK):
        pytest.skip("no unreadable file to point at on this system")
    spec = tmp_path / "spec.yaml"
    spec.symlink_to(target)
    proc = afpbench(["run", str(spec)], tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line == f"error: {spec}: cannot read the file: Permission denied", line


@pytest.mark.parametrize("command", [[], ["run"], ["cells"], ["export"], ["fixtures", "check"],
                                     ["adjudicate", "decide"], ["rescore"]])
def test_help_shows_no_bool_label_for_a_flag(tmp_path, command):
    proc = afpbench([*command, "--help"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "--help" in proc.stdout and "<bool>" not in proc.stdout
