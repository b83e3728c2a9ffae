"""Cancel and resume are inverse (issue #15, item 10), on real sweeps run by the real CLI.

Replayed holes: `cancel` then `resume` on a finished sweep left it "running" with 0 unfinished cells and
no way back; `afpbench cancel` did not stop a running `afpbench run` (it went on to the last cell and
exited 0); a score message after a cancel still asked the judges. The simulated model is served by an
in-process SimServer, so no fixed port is shared with anything else on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient
from sqlmodel import select

from afpbench.api.http.app import create_app
from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.e2e.test_cli_errors import afpbench, one_line_error

TOKEN = "valid-cancel-token-90ad2c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RUN_CANCELLED_EXIT = 4


def _spec(path: Path, base_url: str, **overrides) -> Path:
    model = {"provider": "sim", "model": "sim-1", "base_url": base_url}
    spec = {"name": "cancel (simulated)", "models": [model], "judges": [], "conditions": ["A"],
            "fixtures": {"only": ["P01"]}, **overrides}
    path.write_text(yaml.safe_dump(spec))
    return path


def _sql(db: Path, query: str, *args) -> list[tuple]:
    con = sqlite3.connect(db, timeout=30)
    try:
        with con:
            return con.execute(query, args).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def sim():
    with SimServer(SimConfig(faults=FaultConfig())).start() as server:
        yield server


@pytest.fixture(scope="module")
def finished(tmp_path_factory, sim) -> tuple[Path, str]:
    """A SQLite file holding one complete sweep (run to the end by `afpbench run`), and its id."""
    work = tmp_path_factory.mktemp("finished")
    run = afpbench(["run", str(_spec(work / "spec.yaml", sim.base_url)), "--json"], work)
    assert run.returncode == 0, run.stderr
    sweep_id = json.loads(run.stdout)["sweep_id"]
    assert _sql(work / "afpbench.db", "select status from sweep") == [("complete",)]
    return work / "afpbench.db", sweep_id


@pytest.fixture
def copy_of(finished, tmp_path) -> tuple[Path, str]:
    """Each test changes its own copy of the finished sweep's database."""
    db, sweep_id = finished
    for suffix in ("", "-wal", "-shm"):
        if Path(f"{db}{suffix}").exists():
            shutil.copy(f"{db}{suffix}", tmp_path / f"afpbench.db{suffix}")
    return tmp_path / "afpbench.db", sweep_id


def _status(db: Path, sweep_id: str) -> str:
    return _sql(db, "select status from sweep where id = ?", sweep_id)[0][0]


def test_cancelling_a_finished_sweep_is_a_no_op_that_says_so_and_resume_keeps_it_complete(copy_of):
    """Rule: cancelling a complete sweep changes nothing and says so (exit 0); a resume after it finds
    nothing to do and the sweep stays complete (before: cancelled, then 'running' for ever)."""
    db, sweep_id = copy_of
    cancel = afpbench(["cancel", sweep_id], db.parent)
    assert cancel.returncode == 0, cancel.stderr
    assert "complete" in cancel.stdout and "nothing to cancel" in cancel.stdout, cancel.stdout
    assert _status(db, sweep_id) == "complete"
    resume = afpbench(["resume", sweep_id], db.parent)
    assert resume.returncode == 0, resume.stderr
    assert "nothing to resume" in resume.stdout, resume.stdout
    assert _status(db, sweep_id) == "complete"


def test_resuming_a_cancelled_sweep_with_nothing_unfinished_completes_and_reaggregates(copy_of):
    """Rule: resume is the way back from a cancel: a cancelled sweep whose cells are all done (cancelled
    at its very end, or by an older afpbench) becomes complete, and its stored summary is recomputed."""
    db, sweep_id = copy_of
    _sql(db, "update sweep set status = 'cancelled', finished_at = null where id = ?", sweep_id)
    _sql(db, "update aggregate set summary = null where sweep_id = ?", sweep_id)
    resume = afpbench(["resume", sweep_id], db.parent)
    assert resume.returncode == 0, resume.stderr
    assert "now complete" in resume.stdout, resume.stdout
    assert _status(db, sweep_id) == "complete"
    assert _sql(db, "select finished_at is not null from sweep where id = ?", sweep_id) == [(1,)]
    summary = json.loads(_sql(db, "select summary from aggregate where sweep_id = ?", sweep_id)[0][0])
    assert summary["complete"] is True and summary["interim"] is False


def test_http_cancel_and_resume_are_inverse_on_a_finished_sweep(copy_of, settings_env):
    """Rule: the same over the HTTP API: cancel on a complete sweep answers with its real status
    (complete, 0 unfinished) and changes nothing; resume of a cancelled sweep with nothing unfinished
    completes it and stores its summary."""
    db, sweep_id = copy_of
    settings_env(AFP_DATABASE_URL=f"sqlite:///{db}", AFP_API_TOKEN=TOKEN, AFP_BROKER_URL="memory://")
    client = TestClient(create_app(runtime=False))
    cancelled = client.post(f"/sweeps/{sweep_id}/cancel", headers=AUTH)
    assert cancelled.json() == {"id": sweep_id, "status": "complete", "unfinished": 0}, cancelled.text
    assert client.get(f"/sweeps/{sweep_id}", headers=AUTH).json()["status"] == "complete"
    _sql(db, "update sweep set status = 'cancelled' where id = ?", sweep_id)
    _sql(db, "delete from aggregate where sweep_id = ?", sweep_id)
    resumed = client.post(f"/sweeps/{sweep_id}/resume", headers=AUTH)
    assert resumed.status_code == 200 and resumed.json()["resent"] == 0, resumed.text
    assert client.get(f"/sweeps/{sweep_id}", headers=AUTH).json()["status"] == "complete"
    summary = json.loads(_sql(db, "select summary from aggregate where sweep_id = ?", sweep_id)[0][0])
    assert summary["complete"] is True


def _wait_until(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _attempts(db: Path) -> int:
    try:
        return _sql(db, "select count(*) from attempt")[0][0]
    except sqlite3.OperationalError:  # the file or its tables do not exist yet
        return 0


def test_cancel_stops_a_running_afpbench_run(tmp_path):
    """Rule: `afpbench cancel` stops a running `afpbench run`: its wait loop notices, the embedded worker
    takes no new cells, and it exits with status 4 and a line saying how to resume (before: the run went
    on to the last cell and exited 0)."""
    threads = 2
    with SimServer(SimConfig(faults=FaultConfig(latency_ms=400))).start() as slow:
        spec = _spec(tmp_path / "spec.yaml", slow.base_url, conditions=["A", "B", "C", "D"], fixtures={})
        env = {**os.environ, "AFP_DATABASE_URL": f"sqlite:///{tmp_path / 'afpbench.db'}",
               "AFP_BROKER_URL": "memory://"}
        run = subprocess.Popen([sys.executable, "-m", "afpbench.api.cli", "run", str(spec), "--json", "--threads",
                                str(threads)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            db = tmp_path / "afpbench.db"
            _wait_until(lambda: _attempts(db) >= 1, 60, "the first attempt")
            sweep_id, total = _sql(db, "select sweep_id, count(*) from cell group by sweep_id")[0]
            cancel = afpbench(["cancel", sweep_id], tmp_path)
            assert cancel.returncode == 0 and "cancelled" in cancel.stdout, cancel.stdout + cancel.stderr
            at_cancel = _attempts(db)
            out, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
        # The run's plan line came before it started; what it says on stopping is one line.
        err = "\n".join(x for x in err.splitlines() if not x.startswith("plan: "))
        proc = subprocess.CompletedProcess(run.args, run.returncode, out, err)
        line = one_line_error(proc)
        assert proc.returncode == RUN_CANCELLED_EXIT, (proc.returncode, line)
        assert "cancelled" in line and f"afpbench resume {sweep_id}" in line, line
        done = _sql(db, "select count(*) from cell where phase = 'done'")[0][0]
        assert done < total, "the run went on to the last cell"
        # Cells already claimed when the cancel landed may finish; nothing new is started after it.
        assert _attempts(db) <= at_cancel + 2 * threads, (_attempts(db), at_cancel)
        assert _status(db, sweep_id) == "cancelled"
        assert _sql(db, "select count(*) from cell where phase = 'executing'") == [(0,)], "a claim was left behind"
        # The way back: in embedded mode `afpbench resume` runs the rest here, to a complete sweep.
        resume = afpbench(["resume", sweep_id], tmp_path, timeout=180)
        assert resume.returncode == 0, resume.stderr
    assert _status(db, sweep_id) == "complete"
    assert _sql(db, "select count(*) from cell where phase = 'done'") == [(total,)]


def test_judging_does_not_go_on_after_cancel(settings_env, sqlite_url, sim):
    """Rule: the score task checks the sweep's status as execute does: after a cancel a score message
    asks no judge and writes no result; after resume the cell is judged."""
    from afpbench.workers import runs
    from afpbench.workers.celery_app import QUEUES
    from afpbench.workers.celery_app import app as celery_app
    from afpbench.workers.cells.decisions import ScoreNext
    from afpbench.workers.cells.execution import execute_cell
    from afpbench.workers.grading.scorer import NotScored, Scored, score_cell
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.store.models import Cell, Result
    from afpbench.workers.sweeps.spec_loading import parse_spec

    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://")
    with SimServer(SimConfig(faults=FaultConfig())).start() as judge:
        spec = parse_spec({"models": [{"provider": "sim", "model": "sim-1", "base_url": sim.base_url}],
                           "judges": [{"provider": "sim", "model": "sim-judge", "base_url": judge.base_url}],
                           "conditions": ["A"], "fixtures": {"only": ["P01"]}})
        try:
            sweep_id = runs.start_sweep(spec)
            with session_scope() as session:
                (cell_id,) = session.exec(select(Cell.id).where(Cell.sweep_id == sweep_id)).all()
            assert isinstance(execute_cell(cell_id, "valid-test"), ScoreNext)
            assert runs.cancel(sweep_id).changed
            assert isinstance(score_cell(cell_id, "valid-test"), NotScored)
            assert judge.stats()["judge_requests"] == 0, "a judge was asked after the cancel"
            with session_scope() as session:
                assert session.exec(select(Result).where(Result.cell_id == cell_id)).all() == []
                assert session.get(Cell, cell_id).phase == "awaiting_score"
            assert runs.resume(sweep_id).resent == 1
            assert isinstance(score_cell(cell_id, "valid-test"), Scored)
            assert judge.stats()["judge_requests"] > 0
        finally:
            with celery_app.connection_for_write() as conn:  # no worker here: drop what was enqueued
                for queue in QUEUES:
                    conn.default_channel.queue_purge(queue)



def test_a_cancelled_sweeps_cell_is_never_claimed(settings_env, sqlite_url, sim):
    """Rule: nothing is sent after a cancel. Round one of a try goes out right after the claim, so the
    claim itself refuses a cancelled sweep's cell (no status read of its own per cell): a cancel that
    lands between a task's read of the cell and its claim leaves the cell unclaimed, no attempt row and
    no request; after resume the same claim succeeds."""
    from afpbench.workers import runs
    from afpbench.workers.celery_app import QUEUES
    from afpbench.workers.celery_app import app as celery_app
    from afpbench.workers.cells.claim import Claimed, claim
    from afpbench.workers.store.db import session_scope, transaction
    from afpbench.workers.store.models import Attempt, Cell
    from afpbench.workers.sweeps.spec_loading import parse_spec

    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://")
    spec = parse_spec({"models": [{"provider": "sim", "model": "sim-1", "base_url": sim.base_url}],
                       "judges": [], "conditions": ["A"], "fixtures": {"only": ["P01"]}})
    requests_before = sim.stats()["requests"]
    try:
        sweep_id = runs.start_sweep(spec)
        with session_scope() as session:
            (cell_id,) = session.exec(select(Cell.id).where(Cell.sweep_id == sweep_id)).all()
        assert runs.cancel(sweep_id).changed
        with transaction() as conn:
            assert claim(conn, cell_id, "valid-test", 60, 3) is None, "a cancelled sweep's cell was claimed"
        with session_scope() as session:
            assert session.get(Cell, cell_id).phase in ("pending", "queued")
            assert session.exec(select(Attempt).where(Attempt.cell_id == cell_id)).all() == []
        assert sim.stats()["requests"] == requests_before
        runs.resume(sweep_id)
        with transaction() as conn:
            assert isinstance(claim(conn, cell_id, "valid-test", 60, 3), Claimed)
    finally:
        with celery_app.connection_for_write() as conn:  # no worker here: drop what was enqueued
            for queue in QUEUES:
                conn.default_channel.queue_purge(queue)


def test_a_cancel_between_read_and_claim_finishes_the_message_at_once(settings_env, sqlite_url, sim, monkeypatch):
    """Rule: a cancelled sweep's message ends without a try. When the cancel lands after the task read
    the cell (status still running) and before its claim, the refused claim is told from a cell another
    worker holds: the message finishes "sweep cancelled" at once instead of coming back in 5 s."""
    from afpbench.workers import runs
    from afpbench.workers.celery_app import QUEUES
    from afpbench.workers.celery_app import app as celery_app
    from afpbench.workers.cells import execution
    from afpbench.workers.cells.decisions import Finished
    from afpbench.workers.store.db import session_scope
    from afpbench.workers.store.models import Attempt, Cell
    from afpbench.workers.sweeps.spec_loading import parse_spec

    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_BROKER_URL="memory://")
    spec = parse_spec({"models": [{"provider": "sim", "model": "sim-1", "base_url": sim.base_url}],
                       "judges": [], "conditions": ["A"], "fixtures": {"only": ["P01"]}})
    requests_before = sim.stats()["requests"]
    real_claim = execution.claim_cell

    def cancel_then_claim(*args, **kwargs):  # the cancel lands in the window between the read and the claim
        runs.cancel(sweep_id)
        return real_claim(*args, **kwargs)

    try:
        sweep_id = runs.start_sweep(spec)
        with session_scope() as session:
            (cell_id,) = session.exec(select(Cell.id).where(Cell.sweep_id == sweep_id)).all()
        monkeypatch.setattr(execution, "claim_cell", cancel_then_claim)
        decision = execution.execute_cell(cell_id, "valid-test")
        assert isinstance(decision, Finished) and decision.reason == "sweep cancelled", decision
        with session_scope() as session:
            assert session.exec(select(Attempt).where(Attempt.cell_id == cell_id)).all() == []
        assert sim.stats()["requests"] == requests_before
    finally:
        with celery_app.connection_for_write() as conn:
            for queue in QUEUES:
                conn.default_channel.queue_purge(queue)
