"""README command one, end to end: the zero-configuration demo, its reports, bundle and seal."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import yaml

from afpbench.scoring.states import ResultState
from afpbench.workers.results.summary import SweepSummary
from afpbench.workers.results.tables import TERMINAL_TABLES
from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench

SIX = {s.value for s in ResultState}


def test_demo_runs_56_cells_to_six_states_with_raw_outputs(tmp_path):
    proc = afpbench(["run", "--json"], tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["cells"] == 56 and summary["done"] == 56 and summary["simulated"] is True
    assert set(summary["by_state"]) <= SIX and sum(summary["by_state"].values()) == 56
    assert set(summary["by_condition"]) == {"A", "B", "C", "D"}
    for condition, rate in summary["pass_rate_by_condition"].items():
        counts = summary["by_condition"][condition]
        assert rate["n"] == counts.get("MODEL_PASS", 0) + counts.get("MODEL_FAIL", 0)
    assert "password" not in summary["database"]
    con = sqlite3.connect(tmp_path / "afpbench.db")
    missing = con.execute(
        "select c.id, c.state from cell c left join attempt a on a.cell_id = c.id "
        "where a.id is null or (a.output_text is null and c.state in ('MODEL_PASS', 'MODEL_FAIL'))"
    ).fetchall()
    simulated = con.execute("select count(*) from attempt where simulated = 1").fetchone()[0]
    con.close()
    assert missing == [], "every scored cell has its stored raw output"
    assert simulated == 56

    sweep = summary["sweep_id"]
    for fmt, marker in (("md", "| A |"), ("json", '"pass_rate"'), ("html", "<svg")):
        out = afpbench(["report", sweep, "--format", fmt], tmp_path)
        assert out.returncode == 0 and marker in out.stdout and "SIMULATED" in out.stdout.upper(), out.stderr
    bundle = afpbench(["export", sweep, str(tmp_path / "bundle")], tmp_path)
    assert bundle.returncode == 0, bundle.stderr
    assert (tmp_path / "bundle" / "STATUS.md").read_text().startswith("# Status: published")
    again = afpbench(["export", sweep, str(tmp_path / "bundle")], tmp_path)
    assert again.returncode == 2 and "bundle" in again.stderr, "an existing bundle is never overwritten"


def test_the_demo_summary_fits_80_columns_and_no_number_is_split(tmp_path):
    """`afpbench run` in an 80-column pipe: no line is longer, and each rate and comparison row is on one
    line with every number whole (numbers never wrap; labels fold), the short heads and A-D spelled out."""
    proc = afpbench(["run"], tmp_path, env={"COLUMNS": "80"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80, proc.stdout
    sweep = re.match(r"sweep (\w+) ", lines[0]).group(1)
    report = json.loads(afpbench(["report", sweep, "--format", "json"], tmp_path).stdout)
    del report["tables"]
    summary = SweepSummary.model_validate(report)
    for table in TERMINAL_TABLES:
        rendered = table.render(summary, narrow=True)
        assert rendered.rows, table.id
        for row in rendered.rows:
            numbers = [cell for head, cell in zip(rendered.columns, row, strict=True) if head.numeric]
            pattern = r"\s+".join(re.escape(cell) for cell in numbers) + r"\s*$"
            assert any(re.search(r"(^|\s)" + pattern, line) for line in lines), (row, proc.stdout)
    text = " ".join(proc.stdout.split())
    assert "PB PROVIDER_BLOCK" in text and "conditions: A = Model only;" in text and " pts " in text


def test_verify_passes_then_names_the_fixture_changed_by_one_byte(tmp_path):
    fixtures = tmp_path / "fx"
    shutil.copytree(REPO / "fixtures" / "pilot", fixtures)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "models": [{"provider": "sim", "model": "sim-1"}], "judges": [{"provider": "sim", "model": "sim-1"}],
        "fixtures": {"dir": str(fixtures), "only": ["P03", "P04"]}, "conditions": ["A", "D"],
    }))
    run = afpbench(["run", str(spec), "--json"], tmp_path)
    assert run.returncode == 0, run.stderr
    sweep = json.loads(run.stdout)["sweep_id"]
    ok = afpbench(["verify", sweep], tmp_path)
    assert ok.returncode == 0 and "verified" in ok.stdout
    text = (fixtures / "P03.yaml").read_text()
    (fixtures / "P03.yaml").write_text(re.sub(r'^version: "[^"]+"', 'version: "9.9.9"', text, count=1, flags=re.M))
    broken = afpbench(["verify", sweep], tmp_path)
    assert broken.returncode == 1 and "fixtures/P03.yaml" in broken.stdout
    assert "P04" not in broken.stdout
    refused = afpbench(["resume", sweep], tmp_path)
    assert refused.returncode == 2 and "P03.yaml" in refused.stderr


def test_line_endings_do_not_break_the_seal(tmp_path):
    fixtures = tmp_path / "fx"
    shutil.copytree(REPO / "fixtures" / "pilot", fixtures)
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "models": [{"provider": "sim", "model": "sim-1"}], "judges": [],
        "fixtures": {"dir": str(fixtures), "only": ["P01"]}, "conditions": ["A"],
    }))
    run = afpbench(["run", str(spec), "--json"], tmp_path)
    sweep = json.loads(run.stdout)["sweep_id"]
    path = fixtures / "P01.yaml"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert afpbench(["verify", sweep], tmp_path).returncode == 0


def test_rescore_adds_a_scoring_run_and_calibrate_reports_agreement(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "models": [{"provider": "sim", "model": "sim-1"}], "judges": [{"provider": "sim", "model": "sim-1"}],
        "fixtures": {"only": ["P02", "P08"]}, "conditions": ["A", "C"],
    }))
    run = afpbench(["run", str(spec), "--json"], tmp_path)
    assert run.returncode == 0, run.stderr
    sweep = json.loads(run.stdout)["sweep_id"]
    rescored = afpbench(["rescore", sweep], tmp_path)
    assert rescored.returncode == 0 and "rescored 4 cells" in rescored.stdout, rescored.stderr
    con = sqlite3.connect(tmp_path / "afpbench.db")
    runs = con.execute("select cell_id, group_concat(scoring_run) from result group by cell_id").fetchall()
    con.close()
    assert all(r[1].split(",") == ["1", "2"] for r in runs), "re-scoring adds a run; the first stays queryable"
    calibrated = afpbench(["calibrate", "--judge", "sim:sim-1", "--json"], tmp_path)
    assert calibrated.returncode == 0, calibrated.stderr
    report = json.loads(calibrated.stdout)
    assert report["simulated"] is True and report["items"] >= 32 and report["unparseable"] == 0
    assert report["kappa"] == 1.0 and all(v == 1.0 for v in report["exact_by_dimension"].values())


def test_rescore_keeps_a_human_decision_unless_asked(tmp_path):
    """Adjudication rule: a reviewer's verdict is not replaced silently by a judge re-run."""
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "models": [{"provider": "sim", "model": "sim-1"}], "judges": [{"provider": "sim", "model": "sim-1"}],
        "fixtures": {"only": ["P02"]}, "conditions": ["A", "C"],
    }))
    run = afpbench(["run", str(spec), "--json"], tmp_path)
    assert run.returncode == 0, run.stderr
    sweep = json.loads(run.stdout)["sweep_id"]
    con = sqlite3.connect(tmp_path / "afpbench.db")
    cell, judged = con.execute("select id, state from cell order by id limit 1").fetchone()
    con.close()
    decided = "MODEL_FAIL" if judged != "MODEL_FAIL" else "MODEL_PASS"
    scores = ["--scores", "2,2,2,2"] if decided == "MODEL_PASS" else ["--scores", "0,1,1,1"]
    out = afpbench(["adjudicate", "decide", str(cell), "--state", decided, "--reviewer", "rev",
                    "--note", "read it", "--override", "--reason", "the judge missed it", *scores], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr

    def state_of_cell() -> str:
        with sqlite3.connect(tmp_path / "afpbench.db") as c:
            return c.execute("select state from cell where id = ?", (cell,)).fetchone()[0]

    assert state_of_cell() == decided
    kept = afpbench(["rescore", sweep], tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert "rescored 1 cells" in kept.stdout and f"kept the human decision on 1 cells ({cell})" in kept.stdout
    assert state_of_cell() == decided
    over = afpbench(["rescore", sweep, "--over-decisions"], tmp_path)
    assert over.returncode == 0 and "rescored 2 cells" in over.stdout, over.stdout + over.stderr
    assert state_of_cell() == judged


def test_two_demo_runs_give_the_same_figures_and_the_sealed_seed_reaches_the_simulator(tmp_path):
    """The simulator draws from the sealed seed and each cell's place, never the sweep id: two runs of
    the demo (new sweep ids) give the same figures; `params: {seed: N}` is sent as OpenAI's `seed`."""
    subset = ["--fixtures", "P01,P04,P08", "--json"]
    first, second = (json.loads(afpbench(["run", *subset], tmp_path, timeout=300).stdout) for _ in range(2))
    assert first["sweep_id"] != second["sweep_id"]
    for key in ("by_state", "by_condition", "pass_rate_by_condition", "by_model_condition", "comparisons",
                "seal"):
        assert first[key] == second[key], key
    sim = {"provider": "sim", "model": "sim-1", "label": "sim (simulated)", "params": {"seed": 7}}
    spec = tmp_path / "seeded.yaml"
    spec.write_text(yaml.safe_dump({"name": "seeded", "models": [sim], "judges": [{**sim, "label": "judge"}],
                                    "fixtures": {"only": ["P01"]}, "conditions": ["A"]}))
    seeded = json.loads(afpbench(["run", str(spec), "--json"], tmp_path, timeout=300).stdout)
    cell = json.loads(afpbench(["cells", seeded["sweep_id"], "--json"], tmp_path).stdout)[0]["id"]
    record = json.loads(afpbench(["show", str(cell), "--json"], tmp_path).stdout)
    assert record["attempts"][0]["rounds"][0]["request"]["json"]["seed"] == 7
