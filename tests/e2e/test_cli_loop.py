"""The everyday loop from the shell: run a subset, list sweeps and cells, show one, start from `init`.

Real `afpbench` subprocesses on a SQLite file (embedded mode, the simulated model: output SIMULATED).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import yaml

from afpbench.reference.hashing import json_sha256
from afpbench.workers.sweeps.spec_loading import load_spec
from tests.e2e.test_cli_errors import afpbench, one_line_error, row_count

# The packaged P01's version (bumped when its assertions change), read, not written down twice.
REPO = Path(__file__).resolve().parents[2]
P01_VERSION = yaml.safe_load((REPO / "fixtures" / "pilot" / "P01.yaml").read_text(encoding="utf-8"))["version"]


def _stored(db: Path, sweep_id: str) -> tuple[dict, dict]:
    con = sqlite3.connect(db)
    try:
        spec, seal = con.execute("select spec, seal_components from sweep where id = ?", (sweep_id,)).fetchone()
    finally:
        con.close()
    return json.loads(spec), json.loads(seal)


@pytest.fixture(scope="module")
def subset_run(tmp_path_factory) -> tuple[Path, dict]:
    """The acceptance command: `afpbench run --fixtures P01 --conditions A,D --limit 2` (the demo spec)."""
    work = tmp_path_factory.mktemp("loop")
    proc = afpbench(["run", "--fixtures", "P01", "--conditions", "A,D", "--limit", "2", "--json"], work,
                    timeout=300)
    assert proc.returncode == 0, proc.stderr
    return work, json.loads(proc.stdout)


def test_run_subset_runs_only_those_cells_and_the_seal_covers_the_overrides(subset_run):
    """Rule: subset options are applied before validation and sealing; the stored spec shows them."""
    work, summary = subset_run
    assert summary["cells"] == summary["done"] == 2
    assert set(summary["by_condition"]) == {"A", "D"}
    spec, seal = _stored(work / "afpbench.db", summary["sweep_id"])
    assert spec["fixtures"]["only"] == ["P01"] and spec["conditions"] == ["A", "D"]
    assert seal["spec"] == json_sha256(spec), "the seal's spec component is the stored (overridden) spec"
    assert list(seal["fixtures"]) == ["P01.yaml"], "only the fixture that ran is sealed"
    verify = afpbench(["verify", summary["sweep_id"]], work)
    assert verify.returncode == 0 and "verified" in verify.stdout, verify.stdout + verify.stderr


def test_sweeps_lists_the_sweep_with_its_model_status_and_progress(subset_run):
    """Rule: `afpbench sweeps` prints recent sweeps: id, name, models, status, progress, simulated."""
    work, summary = subset_run
    listed = afpbench(["sweeps", "--json"], work)
    assert listed.returncode == 0, listed.stderr
    [line] = json.loads(listed.stdout)
    assert line["id"] == summary["sweep_id"] and line["name"] == "demo (simulated)"
    assert line["models"] == ["sim (simulated)"] and line["status"] == "complete"
    assert (line["done"], line["cells"], line["simulated"]) == (2, 2, True)
    table = afpbench(["sweeps"], work)
    assert table.returncode == 0 and summary["sweep_id"] in table.stdout and "2/2" in table.stdout


def test_cells_prints_ids_states_and_scores_and_filters(subset_run):
    """Rule: `afpbench cells SWEEP` gives the ids `show` takes, with states and scores; filters narrow."""
    work, summary = subset_run
    sweep = summary["sweep_id"]
    every = afpbench(["cells", sweep, "--json"], work)
    assert every.returncode == 0, every.stderr
    cells = json.loads(every.stdout)
    assert sorted(c["condition"] for c in cells) == ["A", "D"]
    assert {c["fixture"] for c in cells} == {f"P01@{P01_VERSION}"}
    states = {c["state"] for c in cells}
    assert states <= {"MODEL_PASS", "MODEL_FAIL", "GRADER_DISPUTE"}, states
    for c in cells:
        if c["state"] in ("MODEL_PASS", "MODEL_FAIL"):
            assert c["total"] == sum(c["scores"].values()), c
    only_d = json.loads(afpbench(["cells", sweep, "--condition", "d", "--json"], work).stdout)
    assert [c["condition"] for c in only_d] == ["D"]
    state = cells[0]["state"]
    by_state = json.loads(afpbench(["cells", sweep, "--state", state.lower(), "--json"], work).stdout)
    assert by_state and all(c["state"] == state for c in by_state)
    assert "fixture 'P02' is not in sweep" in one_line_error(afpbench(["cells", sweep, "--fixture", "P02"], work))
    assert json.loads(afpbench(["cells", "--model", "sim (simulated)", "--json"], work).stdout) == cells
    table = afpbench(["cells", sweep], work)
    assert table.returncode == 0 and all(str(c["id"]) in table.stdout for c in cells)
    shown = afpbench(["show", str(cells[0]["id"]), "--json"], work)
    assert shown.returncode == 0 and json.loads(shown.stdout)["cell_id"] == cells[0]["id"]


def test_cells_refuses_an_unknown_state_sweep_or_condition_in_one_line(subset_run):
    work, _ = subset_run
    assert "--state" in one_line_error(afpbench(["cells", "--state", "PASSED"], work))
    assert "no sweep with id 'nope'" in one_line_error(afpbench(["cells", "nope"], work))
    assert "--condition" in one_line_error(afpbench(["cells", "--condition", "E"], work))


def test_limit_keeps_the_first_fixtures_in_id_order_and_high_risk_keeps_three_repeats(tmp_path):
    """Rule: --limit N = the first N fixtures in id order; high-risk fixtures keep >= 3 repeats."""
    limited = afpbench(["run", "--limit", "2", "--conditions", "B", "--json"], tmp_path, timeout=300)
    assert limited.returncode == 0, limited.stderr
    spec, _ = _stored(tmp_path / "afpbench.db", json.loads(limited.stdout)["sweep_id"])
    assert spec["fixtures"]["only"] == ["P01", "P02"] and json.loads(limited.stdout)["cells"] == 2
    high_risk = afpbench(["run", "--fixtures", "P05", "--conditions", "C", "--repeats", "1", "--json"], tmp_path,
                         timeout=300)
    assert high_risk.returncode == 0, high_risk.stderr
    summary = json.loads(high_risk.stdout)
    assert summary["cells"] == 3, "P05 is high risk: three repeats per condition whatever --repeats says"
    spec, _ = _stored(tmp_path / "afpbench.db", summary["sweep_id"])
    assert spec["repeats"] == 1 and spec["fixtures"]["only"] == ["P05"]


@pytest.mark.parametrize(("args", "names"), [
    (["--models", "gpt-9"], ["--models", "'gpt-9'", "sim (simulated)"]),
    (["--fixtures", "P99"], ["P99"]),
    (["--conditions", "A,E"], ["conditions.1"]),
    (["--fixtures", ","], ["--fixtures", "empty"]),
])
def test_a_bad_subset_option_is_one_line_and_writes_nothing(tmp_path, args, names):
    """Rule: bad input gives one line naming the option/value and writes nothing."""
    line = one_line_error(afpbench(["run", *args], tmp_path))
    assert all(n in line for n in names), line
    assert row_count(tmp_path / "afpbench.db") == 0


def test_init_writes_a_commented_valid_example_and_never_overwrites(tmp_path):
    """Rule: `init [DIR]` writes a packaged example (default: local server), refuses to overwrite."""
    made = afpbench(["init", str(tmp_path / "new")], tmp_path)
    assert made.returncode == 0, made.stderr
    path = tmp_path / "new" / "local-openai-compatible.yaml"
    text = path.read_text(encoding="utf-8")
    assert text.startswith("#") and load_spec(path).models[0].provider == "openai-compatible"
    path.write_text(text + "# my edit\n", encoding="utf-8")
    again = one_line_error(afpbench(["init", str(tmp_path / "new")], tmp_path))
    assert "already exists" in again and path.read_text(encoding="utf-8").endswith("# my edit\n")
    two = afpbench(["init", str(tmp_path / "new"), "--example", "two-models"], tmp_path)
    assert two.returncode == 0 and len(load_spec(tmp_path / "new" / "two-models-with-judge.yaml").models) == 2
    assert "--example" in one_line_error(afpbench(["init", str(tmp_path), "--example", "mistral"], tmp_path))


def test_run_lists_every_spec_error_and_refuses_a_spec_without_judges(tmp_path):
    """Rule: `run SPEC` prints all errors of the spec at once, one line each; a missing `judges` is one."""
    spec = tmp_path / "s.yaml"
    spec.write_text("models: [{provider: sim, model: sim-1}]\n", encoding="utf-8")
    line = one_line_error(afpbench(["run", str(spec)], tmp_path))
    assert "s.yaml: judges: missing" in line and "judges: []" in line
    spec.write_text("models: [{provider: sim, model: sim-1, limts: {}}]\njudge: []\nrepeats: 0\n", encoding="utf-8")
    proc = afpbench(["run", str(spec)], tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = [x.strip() for x in proc.stderr.splitlines() if x.strip()]
    assert lines[0].endswith("s.yaml: 3 problems:"), proc.stderr
    assert lines[1:] == ["models.0.limts: unknown field; did you mean 'limits'?",
                         "repeats: Input should be greater than or equal to 1",
                         "judge: unknown field; did you mean 'judges'?"], proc.stderr
    assert row_count(tmp_path / "afpbench.db") == 0
