"""A real sweep in embedded mode through the real CLI: the shipped local-model example spec (P01, P06, P08 x
A, D; P06 at its three high-risk repeats), the same local model as tested model and judge.

Nothing here is canned: whatever the model and its judging produce, every cell must end in one of the six
states with a full run record, and the report must render. What the cells ended as is printed (-s) for
the closing note, not asserted: a 0.5B model's verdicts are not the point, the pipeline's honesty is.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from afpbench.workers.sweeps.spec_loading import load_spec
from tests.realmodel.spec_helper import (
    CI_CUTS,
    SCOPE,
    STATES,
    assert_real_record,
    cell_records,
    example_spec,
    run_cli,
    scoped,
)

CELLS = 2 if SCOPE == "ci" else 10  # P01 and P08 once per condition, P06 (high risk) three times: 2 x (1 + 1 + 3)

pytestmark = pytest.mark.realmodel


@pytest.fixture(scope="module")
def example_sweep(local_model_server, tmp_path_factory):
    work = tmp_path_factory.mktemp("realmodel-sweep")
    spec = example_spec(local_model_server, work, **(CI_CUTS if SCOPE == "ci" else {}))
    subset = scoped([], ["--fixtures", "P08", "--conditions", "A,D"])
    # --no-judge-check: the sweep as before, without the check's calls (those: test_judge_check_real.py).
    proc, seconds = run_cli(["run", str(spec), *subset, "--json", "--no-judge-check"], work, timeout=3600)
    # Exit 3 would name cells excluded for configuration or infrastructure reasons: a pipeline fault here.
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    return work, summary, seconds


def test_example_spec_parses_as_shipped_and_plans_p06_at_three_repeats(local_model_server, tmp_path):
    spec = load_spec(str(example_spec(local_model_server, tmp_path)))
    assert [m.model for m in spec.models] == [local_model_server.model_name] == [j.model for j in spec.judges]
    assert spec.conditions == ["A", "D"] and spec.fixtures.only == ["P01", "P06", "P08"]
    assert spec.high_risk_repeat_count() == 3


def test_every_cell_ends_in_one_of_the_six_states(example_sweep):
    work, summary, seconds = example_sweep
    assert summary["cells"] == summary["done"] == CELLS, summary
    assert set(summary["by_state"]) <= STATES and sum(summary["by_state"].values()) == CELLS, summary
    print(f"\nsweep of {summary['cells']} cells in {seconds:.0f} s ({seconds / summary['cells']:.0f} s per cell)")
    for condition, counts in sorted(summary["by_condition"].items()):
        print(f"  {condition}: {dict(sorted(counts.items()))}")


def test_run_records_hold_served_model_usage_latency_request_and_raw_body(example_sweep, local_model_server):
    work, summary, _ = example_sweep
    records = cell_records(work, summary["sweep_id"])
    assert len(records) == CELLS
    if SCOPE != "ci":
        assert Counter((r["fixture_id"], r["condition"]) for r in records)[("P06", "D")] == 3
    for record in records:
        assert_real_record(record, local_model_server)
        assert all(j["simulated"] is False for j in record["judgements"]), record["cell_id"]
    (work / "records.json").write_text(json.dumps(records, indent=1), encoding="utf-8")
    for r in records:
        latency = r["latency"]["ms"] or 0
        answer = (r["raw_output"]["text"] or "").replace("\n", " ")
        print(f"\n[{r['fixture_id']} {r['condition']} r{r['repeat']}] {r['result_state']} "
              f"({r['state_reason']}) {latency / 1000:.1f} s: {answer[:400]}")


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_the_report_renders(example_sweep, fmt):
    work, summary, _ = example_sweep
    out = work / f"report.{fmt}"
    proc, _ = run_cli(["report", summary["sweep_id"], "--format", fmt, "--out", str(out)], work)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text(encoding="utf-8")
    assert summary["sweep_id"] in text and "SIMULATED" not in text
    if fmt == "json":
        assert json.loads(text)["cells"] == CELLS
