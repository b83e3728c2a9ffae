"""Duplicate scoring (issue #15): a second scorer never writes a second result, and a scorer that lost
its claim cannot undo the claim of the scorer that took over.

Replayed holes, in workers/grading/scorer.py as it was: the claim asked for a fixed 15-minute lease
that nothing renewed and that the reconciler cut to AFP_LEASE_EXPIRY_S, measured from the claim, so a
live scorer with slow judges lost its cell to a duplicate message; and neither the result write nor
the "judges unavailable, give the cell back" write checked that the cell was still the writer's. A
scorer stalled past its lease (here: its worker process stopped with SIGSTOP, as a machine under
memory pressure or a paused container would be) could, on waking, move a cell another scorer had
finished back to `awaiting_score`, and its retry then scored the cell a second time.

Real parts: an `afpbench worker` process on a real Redis broker, the product's scorer in this process
as the second scorer, a SQLite file both share, the simulator behind a real HTTP gate that holds and
fails chosen judge requests.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from datetime import timedelta

import pytest

from afpbench.workers.sim.server import SimConfig, SimServer
from tests.integration.workers_helper import service_env
from tests.reliability.fleet import WorkerFleet
from tests.reliability.lease_rig import LEASE_S, SHORT_TIMING, cell_now, create_one_cell_sweep, one_cell_spec
from tests.reliability.ledger import wait_until
from tests.reliability.poison import PoisonGate, judge_request, never

HOLD_S = LEASE_S * 2 + 1


@pytest.fixture
def sim():
    with SimServer(SimConfig()) as server:
        yield server


def _executed_cell(gate: PoisonGate) -> tuple[str, int]:
    """A judged one-cell sweep whose cell has been executed and awaits scoring."""
    from afpbench.workers.cells.decisions import ScoreNext
    from afpbench.workers.cells.execution import execute_cell

    sweep_id, cell_id = create_one_cell_sweep(one_cell_spec(gate, judged=True))
    assert isinstance(execute_cell(cell_id, "executor"), ScoreNext)
    return sweep_id, cell_id


def test_a_live_scorer_slower_than_the_lease_keeps_its_cell_through_the_reconciler(tmp_path, settings_env, sim):
    """Rule: the scorer's lease is AFP_LEASE_EXPIRY_S, renewed while its judges run; the reconciler never
    takes it over, so a duplicate score message sends no judge request and writes no result."""
    settings_env(AFP_DATABASE_URL=f"sqlite:///{tmp_path / 'dups.db'}", AFP_BROKER_URL="memory://localhost/",
                 AFP_REDIS_URL="", **SHORT_TIMING)
    from afpbench.workers.cells.reconciler import reconcile_sweep
    from afpbench.workers.grading.scorer import RejudgeLater, Scored, score_cell

    with PoisonGate(sim.base_url, never, delay_s=lambda k: HOLD_S if judge_request(k) else 0.0) as gate:
        sweep_id, cell_id = _executed_cell(gate)
        out: dict = {}
        first = threading.Thread(target=lambda: out.update(first=score_cell(cell_id, "scorer-1")), daemon=True)
        first.start()
        assert gate.wait_for(judge_request, 1, 15), "the first scorer never asked its judge"
        time.sleep(LEASE_S + 1)
        reconcile_sweep(sweep_id, older_than=timedelta(seconds=1))
        judge_calls = gate.count(judge_request)
        duplicate = score_cell(cell_id, "scorer-2")
        sent_by_duplicate = gate.count(judge_request) - judge_calls
        first.join(4 * HOLD_S + 15)
    now = cell_now(cell_id)
    assert isinstance(duplicate, RejudgeLater) and "scoring" in duplicate.reason, duplicate
    assert sent_by_duplicate == 0, "the duplicate scorer asked the judges again"
    assert isinstance(out.get("first"), Scored), out
    assert (now.phase, now.results) == ("done", 1), now


def _scorer_stalled_past_its_lease(tmp_path, settings_env, fresh_redis, sim, judge_fails: bool):
    """Scorer 1 (a worker process) sends its judge request and is stopped (SIGSTOP) past its lease; the
    reconciler passes; scorer 2 (this process) claims the cell and finishes it; scorer 1 is continued. Returns the cell,
    what scorer 2 returned and scorer 1's log."""
    db = f"sqlite:///{tmp_path / 'dups.db'}"
    settings_env(AFP_DATABASE_URL=db, AFP_BROKER_URL=fresh_redis, **SHORT_TIMING)
    from afpbench.workers.celery_app import make_app
    from afpbench.workers.cells.reconciler import reconcile_sweep
    from afpbench.workers.grading.scorer import score_cell

    armed = {"on": True}
    gate = PoisonGate(sim.base_url, lambda k: judge_fails and armed["on"] and judge_request(k),
                      delay_s=lambda k: 2.0 if armed["on"] and judge_request(k) else 0.0).start()
    fleet = WorkerFleet(service_env(db, fresh_redis, **SHORT_TIMING), tmp_path, concurrency=1)
    producer = make_app()
    try:
        sweep_id, cell_id = _executed_cell(gate)
        first = fleet.start(queues="score", name="scorer1")
        fleet.wait_ready(first)
        producer.send_task("afpbench.score", args=[cell_id], queue="score")
        assert gate.wait_for(judge_request, 1, 30), fleet.tail(first)
        os.killpg(first.proc.pid, signal.SIGSTOP)  # stalled mid-judging: it renews nothing now
        try:
            time.sleep(LEASE_S + 1.5)
            reconcile_sweep(sweep_id)  # a beat pass meanwhile, as `afpbench worker --beat` runs it
            armed["on"] = False
            second = score_cell(cell_id, "scorer-2")
            finished_by_second = cell_now(cell_id)
        finally:
            os.killpg(first.proc.pid, signal.SIGCONT)
        done = r"Task afpbench\.score\[\S+\] (succeeded|raised)"
        assert wait_until(lambda: re.search(done, fleet.tail(first, 20000)), 30), fleet.tail(first)
        time.sleep(3)  # a retry of scorer 1's task (1 s countdown here) would run in this time
        return cell_id, second, finished_by_second, fleet.tail(first, 20000)
    finally:
        producer.close()
        fleet.stop_all()
        gate.stop()


def test_a_stalled_scorer_whose_judge_failed_does_not_reopen_a_finished_cell(tmp_path, settings_env, fresh_redis,
                                                                             sim):
    """Rule: every write a scorer makes after its claim is fenced by the claim: a scorer that lost its
    lease cannot give the cell back (judges unavailable) once another scorer finished it, so no
    second scoring run and no second result."""
    from afpbench.workers.grading.scorer import Scored

    cell_id, second, finished, log = _scorer_stalled_past_its_lease(tmp_path, settings_env, fresh_redis, sim,
                                                                    judge_fails=True)
    now = cell_now(cell_id)
    assert isinstance(second, Scored) and (finished.phase, finished.results) == ("done", 1), (second, finished)
    # Scorer 1 met its failed judge and tried to give the cell back (its task retried), then found it done.
    assert "retry: Retry in" in log and "raised unexpected" not in log, log[-3000:]
    assert (now.phase, now.results) == ("done", 1), f"the stalled scorer reopened the cell: {now}"


def test_a_stalled_scorer_writes_no_second_result(tmp_path, settings_env, fresh_redis, sim):
    """Rule: the result write is fenced by the scoring claim: a scorer that lost its lease while its
    judge answered late writes nothing (and fails nothing) once another scorer wrote the cell's result."""
    from afpbench.workers.grading.scorer import Scored

    cell_id, second, finished, log = _scorer_stalled_past_its_lease(tmp_path, settings_env, fresh_redis, sim,
                                                                    judge_fails=False)
    now = cell_now(cell_id)
    assert isinstance(second, Scored) and (finished.phase, finished.results) == ("done", 1), (second, finished)
    assert "raised unexpected" not in log, log[-3000:]
    assert (now.phase, now.results) == ("done", 1), now
