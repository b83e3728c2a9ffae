"""`afpbench plan` and what `run` does with the plan (issue 37 acceptance): the demo spec's plan as JSON has
MDD and repeats_needed per comparison; `run` prints the plan's one line before it starts and seals the
plan with the sweep; a subset run of A and D reports D vs A whole. All model output here is SIMULATED."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Sweep


def _cli(*args: str, url: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AFP_")}
    env |= {"AFP_DATABASE_URL": url, "AFP_BROKER_URL": "memory://localhost/"}
    return subprocess.run([sys.executable, "-m", "afpbench.api.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_plan_json_on_the_demo_spec_gives_mdd_and_repeats_needed_per_comparison(tmp_path):
    done = _cli("plan", "--json", "--detect", "0.10", url=f"sqlite:///{tmp_path / 'p.db'}")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert [(c["first"], c["second"]) for c in plan["comparisons"]] == [
        ("B", "A"), ("C", "A"), ("C", "B"), ("D", "A"), ("D", "B"), ("D", "C")]
    for c in plan["comparisons"]:
        assert {"min_detectable_difference", "repeats_needed"} <= set(c) and c["min_detectable_difference"] > 0.1
    assert plan["variance_from"] == "stated defaults" and plan["detect"] == 0.1


def test_plan_prints_its_assumptions_and_refuses_an_unknown_pilot_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    text = _cli("plan", url=url)
    assert text.returncode == 0 and "variance assumed: discordant pairs q = 0.5" in text.stdout
    bad = _cli("plan", "--from", "nope", url=url)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == ["error: --from: no sweep with id 'nope'"]


def test_a_subset_run_prints_the_plan_seals_it_and_reports_d_vs_a_whole(tmp_path, settings_env):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    done = _cli("run", "--fixtures", "P01,P08", "--conditions", "A,D", "--json", url=url)
    assert done.returncode == 0, done.stderr
    assert done.stderr.lstrip().startswith("plan: 4 cells (1 model x 2 conditions x 2 fixtures x 1 repeat)")
    overview = json.loads(done.stdout)
    [c] = overview["comparisons"]
    assert (c["comparison"], c["status"], c["n_pairs"]) == ("D vs A", "ok", 2)
    assert {"difference", "difference_ci95", "p_value", "clustered", "holm_p_value", "power_reading"} <= set(c)
    settings_env(AFP_DATABASE_URL=url)
    with session_scope() as s:
        sweep = s.get(Sweep, overview["sweep_id"])
        assert sweep is not None
        sealed = sweep.seal_components["plan"]
    assert [(p["first"], p["second"]) for p in sealed["comparisons"]] == [("D", "A")]
