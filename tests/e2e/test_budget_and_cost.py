"""A sweep's cost, planned and capped, end to end in embedded mode on the simulator (priced, judged).

Rules checked (docs/PROTOCOL.md, "Cost plan and budget"):
- A budget below the plan's estimate stops the release: what was spent stays within the budget (each cell
  in flight holds its ceiling: the declared max_tokens, every judge twice), the cells never sent are
  "not run" (no result state, in no denominator, never INFRA_ERROR), spread evenly over the conditions,
  and the report says "budget reached" with the estimate and the actual cost side by side.
- The plan's estimate, made with a pilot sweep's measurements, is within 15 % of the actual cost, judges
  included.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter

import yaml

from tests.e2e.test_cli_errors import afpbench

MODEL = {"provider": "sim", "model": "sim-a", "label": "a", "params": {"max_tokens": 1500},
         "prices": {"input_per_mtok": 3, "output_per_mtok": 15}}
JUDGE = {"provider": "sim", "model": "sim-j", "label": "j", "params": {"max_tokens": 800},
         "prices": {"input_per_mtok": 1, "output_per_mtok": 5}}


def _spec(tmp_path, name: str, **extra) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"name": name, "models": [MODEL], "judges": [JUDGE],
                                    "fixtures": {"only": ["P01", "P02", "P03", "P04"]}, "conditions": list("ABCD"),
                                    **extra}))
    return str(path)


def _report(tmp_path, sweep: str) -> dict:
    return json.loads(afpbench(["report", sweep, "--format", "json"], tmp_path).stdout)


def test_a_budget_below_the_estimate_stops_sending_and_leaves_the_rest_not_run(tmp_path):
    budget = 0.2
    spec = _spec(tmp_path, "budgeted", repeats=2, budget={"usd": budget})
    plan = json.loads(afpbench(["plan", spec, "--json"], tmp_path).stdout)["cost"]
    assert plan["sync_usd"] > budget and plan["budget_usd"] == budget
    ran = afpbench(["run", spec, "--json"], tmp_path, timeout=300)
    assert ran.returncode == 0, ran.stderr
    sweep = json.loads(ran.stdout)["sweep_id"]
    report = _report(tmp_path, sweep)
    assert report["budget"]["reached"] and report["budget"]["spent_usd"] == report["cost"]["sweep_usd"]
    assert report["cost"]["sweep_usd"] <= budget, "each cell in flight held its ceiling: the spend stays within"
    assert report["cost"]["by_judge"] and report["cost"]["estimate_usd"] == plan["sync_usd"]
    con = sqlite3.connect(tmp_path / "afpbench.db")
    cells = con.execute("select condition, state, state_reason, attempts from cell").fetchall()
    con.close()
    not_run = [c for c in cells if c[1] is None]
    assert not_run and report["budget"]["not_run"] == len(not_run) == report["totals"]["not_run"]
    assert all(reason.startswith("not run: budget reached") and attempts == 0 for _, _, reason, attempts in not_run)
    assert report["totals"]["excluded"]["INFRA_ERROR"] == 0 and report["totals"]["unfinished"] == 0
    assert report["totals"]["n"] + sum(report["totals"]["excluded"].values()) == len(cells) - len(not_run)
    per_condition = Counter(c[0] for c in not_run)
    assert max(per_condition[c] for c in "ABCD") - min(per_condition[c] for c in "ABCD") <= 1
    md = afpbench(["report", sweep], tmp_path).stdout
    assert "budget reached" in md and "plan's estimate" in md


def test_the_plans_estimate_with_a_pilot_is_within_15_percent_of_the_actual_cost(tmp_path):
    pilot = afpbench(["run", _spec(tmp_path, "pilot"), "--json"], tmp_path, timeout=300)
    assert pilot.returncode == 0, pilot.stderr
    pilot_id = json.loads(pilot.stdout)["sweep_id"]
    ran = afpbench(["run", _spec(tmp_path, "main", repeats=3), "--json", "--pilot", pilot_id], tmp_path, timeout=600)
    assert ran.returncode == 0, ran.stderr
    cost = _report(tmp_path, json.loads(ran.stdout)["sweep_id"])["cost"]
    judges = sum(r["usd"] for r in cost["by_judge"])
    assert judges > 0, "judge calls are in the actual cost"
    error = cost["estimate_usd"] / cost["sweep_usd"] - 1
    print(f"plan's estimate ${cost['estimate_usd']:.4f}, actual ${cost['sweep_usd']:.4f} ({error:+.1%})")
    assert abs(error) <= 0.15
