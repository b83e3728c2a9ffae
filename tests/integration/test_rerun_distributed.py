"""`afpbench rerun` in distributed mode: PostgreSQL, Redis, a real `afpbench worker` process.

Protocol rule checked (AFP v0.1): INFRA_ERROR cells are rerun once the environment is fixed; every earlier
attempt stays on record; the reopened cells go through the same claim (one statement on PostgreSQL) and
attempt budget as any cell, and the sweep completes again with one aggregate.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, text

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.integration.workers_helper import running_workers, service_env

pytestmark = pytest.mark.integration


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "afpbench.api.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_rerun_on_postgres_and_redis_with_a_worker(postgres_url, fresh_redis, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"name: rerun-distributed\nfixtures: {{only: [P01, P02]}}\nconditions: [A, B]\njudges: []\n"
                    f"models:\n  - {{provider: sim, model: sim-d, label: d, base_url: 'http://127.0.0.1:{port}/v1'}}\n")
    env = service_env(postgres_url, fresh_redis, AFP_MAX_ATTEMPTS="2")
    engine = create_engine(postgres_url)
    try:
        with running_workers(env, ["rr1"], tmp_path):
            with SimServer(SimConfig(faults=FaultConfig(error_5xx_rate=1.0)), port=port).start():
                ran = _cli(env, "run", str(spec), "--json")
            assert ran.returncode == 3, ran.stderr + "".join(p.read_text() for p in tmp_path.glob("*.log"))
            with engine.connect() as conn:
                sweep, seal = conn.execute(text("select id, seal_hash from sweep")).one()
                assert conn.execute(text("select distinct state, attempts from cell")).all() == [("INFRA_ERROR", 2)]
            with SimServer(SimConfig(faults=FaultConfig()), port=port).start():
                rerun = _cli(env, "rerun", sweep, "--note", "sim back")
                assert rerun.returncode == 0 and "4 cells reopened" in rerun.stdout, rerun.stderr
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline:  # the worker finishes the cells and claims the aggregate
                    with engine.connect() as conn:
                        if conn.execute(text("select count(*) from aggregate where summary is not null")).scalar():
                            break
                    time.sleep(0.5)
        with engine.connect() as conn:
            states = conn.execute(text("select state, attempts, attempt_base from cell")).all()
            per_cell = conn.execute(text("select cell_id, count(*) from attempt group by cell_id")).all()
            status = conn.execute(text("select status, seal_hash from sweep")).one()
            results = conn.execute(text("select scoring_run, state from result order by cell_id, scoring_run")).all()
            tries = conn.execute(text(
                "select cell_id, number, outcome, error, worker from attempt order by 1,2")).all()
    finally:
        engine.dispose()
    # The worker's pooled connection to the stopped sim may fail once (a stale keep-alive): a retry inside
    # the rerun's own budget of AFP_MAX_ATTEMPTS=2, counted from the two attempts before the rerun.
    assert {(state, base) for state, _, base in states} == {("GRADER_DISPUTE", 2)}, states
    assert all(3 <= attempts <= 4 for _, attempts, _ in states), "\n".join(map(str, [states, *tries]))
    last = {cell: outcome for cell, _, outcome, _, _ in tries}
    assert set(last.values()) == {"answer"} and len(last) == 4
    assert sorted(n for _, n in per_cell) == sorted(attempts for _, attempts, _ in states), "one row per attempt"
    assert tuple(status) == ("complete", seal)
    assert results == [(0, "INFRA_ERROR"), (2, "GRADER_DISPUTE")] * 4, "the first results kept, the new above them"
    verified = _cli(env, "verify", sweep)
    assert verified.returncode == 0, verified.stdout + verified.stderr
