"""`afpbench rerun`, end to end in embedded mode: the protocol's rule for INFRA_ERROR and PROVIDER_BLOCK
("fix or document the environment and rerun") on a sweep whose every chat call failed.

Protocol rules checked (AFP v0.1, result states and run records):
- INFRA_ERROR / PROVIDER_BLOCK cells can be rerun after the environment is fixed; scored cells never are.
- Every attempt stays on record: the rerun's earlier attempts and results are kept, shown as superseded
  with the rerun's note; the latest result is the one counted (the denominator stays right).
- The attempt budget holds per rerun as for any attempt; the seal is unchanged and `verify` stays green;
  a changed sealed input refuses the rerun, naming the component.
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
from pathlib import Path

import yaml

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench

ENV = {"AFP_MAX_ATTEMPTS": "2"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows(db: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _sim(port: int, error_rate: float) -> SimServer:
    return SimServer(SimConfig(faults=FaultConfig(error_5xx_rate=error_rate)), port=port).start()


def test_rerun_turns_infra_errors_into_results_keeping_the_first_attempts_as_superseded(tmp_path):
    fixtures = tmp_path / "fx"
    shutil.copytree(REPO / "fixtures" / "pilot", fixtures)
    port = _free_port()
    model = {"provider": "sim", "model": "sim-r", "label": "r", "base_url": f"http://127.0.0.1:{port}/v1"}
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({"name": "rerun", "models": [model], "judges": [model],
                                    "fixtures": {"dir": str(fixtures), "only": ["P01", "P03"]},
                                    "conditions": ["A", "C"], "repeats": 1}))
    db = tmp_path / "afpbench.db"

    sim = _sim(port, 1.0)  # every chat call fails (afpbench sim --error-5xx-rate 1)
    try:
        ran = afpbench(["run", str(spec), "--json"], tmp_path, env=ENV, timeout=300)
        assert ran.returncode == 3, ran.stderr  # finished, cells excluded
        sweep = json.loads(ran.stdout)["sweep_id"]
        assert _rows(db, "select distinct state from cell") == [("INFRA_ERROR",)]
        seal = _rows(db, "select seal_hash from sweep")[0][0]

        # Only what the environment caused can be rerun; a model the sweep lacks is named.
        refused = afpbench(["rerun", sweep, "--state", "MODEL_FAIL"], tmp_path, env=ENV)
        assert refused.returncode == 2 and "only INFRA_ERROR and PROVIDER_BLOCK" in refused.stderr
        unknown = afpbench(["rerun", sweep, "--model", "nope"], tmp_path, env=ENV)
        assert unknown.returncode == 2 and "--model 'nope'" in unknown.stderr and "r" in unknown.stderr

        # Still failing: the rerun's attempts are bounded by the one budget, counted from the rerun.
        again = afpbench(["rerun", sweep, "--note", "first try"], tmp_path, env=ENV, timeout=300)
        assert again.returncode == 0, again.stderr
        assert "rerun 1" in again.stdout and "4 cells reopened" in again.stdout
        assert _rows(db, "select distinct state, attempts, attempt_base from cell") == [("INFRA_ERROR", 4, 2)]
        assert _rows(db, "select count(*), count(distinct cell_id) from result") == [(8, 4)]
    finally:
        sim.stop()

    sim = _sim(port, 0.0)  # the environment is fixed
    try:
        fixed = afpbench(["rerun", sweep, "--note", "sim healthy again"], tmp_path, env=ENV, timeout=300)
        assert fixed.returncode == 0, fixed.stderr
        assert "rerun 2" in fixed.stdout and "4 cells reopened" in fixed.stdout
        states = {s for (s,) in _rows(db, "select state from cell")}
        assert states <= {"MODEL_PASS", "MODEL_FAIL", "GRADER_DISPUTE"}, states
        nothing = afpbench(["rerun", sweep], tmp_path, env=ENV)
        assert nothing.returncode == 0 and "nothing to rerun" in nothing.stdout
    finally:
        sim.stop()

    # The first attempts and results are on record, superseded, with the rerun's note.
    cell = _rows(db, "select min(id) from cell")[0][0]
    shown = afpbench(["show", str(cell), "--json"], tmp_path, env=ENV)
    record = json.loads(shown.stdout)
    assert [a["number"] for a in record["attempts"]] == [1, 2, 3, 4, 5]
    assert all("rerun 2" in a["superseded"] and "sim healthy again" in a["superseded"]
               for a in record["attempts"][:4])
    assert record["attempts"][4]["superseded"] is None
    assert [r["superseded"] is not None for r in record["results"]] == [True, True, False]
    assert record["result_state"] == record["results"][-1]["state"] != "INFRA_ERROR"

    # The summary counts the latest result only; the reruns and what they superseded are reported.
    report = json.loads(afpbench(["report", sweep, "--format", "json"], tmp_path, env=ENV).stdout)
    assert report["totals"]["excluded"]["INFRA_ERROR"] == 0
    assert report["totals"]["n"] + sum(report["totals"]["excluded"].values()) == 4
    assert [r["note"] for r in report["reruns"]] == ["first try", "sim healthy again"]
    assert report["superseded"] == {"attempts": 16, "results": 8}
    md = afpbench(["report", sweep], tmp_path, env=ENV).stdout
    assert "## Reruns" in md and "sim healthy again" in md

    # The seal is unchanged and verifies; a changed sealed input refuses the rerun, naming it.
    assert _rows(db, "select seal_hash from sweep")[0][0] == seal
    assert afpbench(["verify", sweep], tmp_path, env=ENV).returncode == 0
    p03 = fixtures / "P03.yaml"
    p03.write_text(p03.read_text() + "\n# edited\n")
    changed = afpbench(["rerun", sweep], tmp_path, env=ENV)
    assert changed.returncode == 2 and "fixtures/P03.yaml" in changed.stderr
