"""Distributed mode on real services: Redis broker, PostgreSQL, two `afpbench worker` processes.

The demo sweep completes with the same counts as embedded mode and one attempt per cell (no faults).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.integration.workers_helper import running_workers, service_env

pytestmark = pytest.mark.integration


def test_demo_sweep_on_redis_and_postgres_with_two_workers(postgres_url, fresh_redis, tmp_path):
    with SimServer(SimConfig(faults=FaultConfig())).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url)
        with running_workers(env, ["w1", "w2"], tmp_path):
            proc = subprocess.run(
                [sys.executable, "-m", "afpbench.api.cli", "run", "--json"],
                cwd=REPO,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
        assert proc.returncode == 0, proc.stderr + "".join(p.read_text() for p in tmp_path.glob("*.log"))
        summary = json.loads(proc.stdout)
    assert summary["cells"] == 56 and summary["done"] == 56
    assert summary["attempts"] == 56, "one attempt per cell when no fault is injected"
    assert sum(summary["by_state"].values()) == 56
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log")).splitlines()
    aggregate_runs = [line for line in logs if "Task afpbench.aggregate[" in line and "succeeded" in line]
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        per_cell = conn.execute(
            text("select count(*) from attempt group by cell_id having count(*) <> 1")
        ).all()
        workers = conn.execute(
            text("select count(distinct split_part(worker, '@', 1)) from attempt")
        ).scalar()
        results = conn.execute(text("select count(distinct cell_id), count(*) from result")).one()
        claims = conn.execute(text("select claimed_by, summary is not null from aggregate")).all()
    engine.dispose()
    assert per_cell == []
    assert workers == 2, "both worker processes executed cells"
    assert results[0] == 56
    # Completion is a database fact: exactly one claim, whether a worker or the runner finished last.
    assert len(claims) == 1 and claims[0][1], claims
    expected_worker_runs = 0 if claims[0][0] == "runner" else 1
    assert len(aggregate_runs) == expected_worker_runs, aggregate_runs


def test_one_worker_command_with_two_processes_runs_the_sweep_and_stops_both(postgres_url, fresh_redis, tmp_path):
    """`afpbench worker --processes 2`: two named workers from one command share the sweep; SIGTERM to
    the command stops both (warm) and the command exits 0."""
    import os
    import signal

    with SimServer(SimConfig(faults=FaultConfig())).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url)
        subprocess.run([sys.executable, "-m", "afpbench.api.cli", "db", "upgrade"], cwd=REPO, env=env,
                       check=True, capture_output=True, timeout=120)
        log = open(tmp_path / "pair.log", "w")  # noqa: SIM115 - closed below
        group = subprocess.Popen(
            [sys.executable, "-m", "afpbench.api.cli", "worker", "--processes=2", "--concurrency=4",
             "--hostname=pair@%h", "--loglevel=INFO"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", "--json"], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=300)
        finally:
            group.send_signal(signal.SIGTERM)
            try:
                status = group.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(group.pid, signal.SIGKILL)
                raise
            log.close()
    output = (tmp_path / "pair.log").read_text()
    assert proc.returncode == 0, proc.stderr + output
    assert status == 0, output
    summary = json.loads(proc.stdout)
    assert summary["cells"] == 56 and summary["done"] == 56 and summary["attempts"] == 56
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        nodes = {row[0] for row in conn.execute(text("select distinct split_part(worker, '@', 1) from attempt"))}
    engine.dispose()
    assert nodes <= {"pair-1", "pair-2"} and nodes, nodes
    assert "pair-1@" in output and "pair-2@" in output, "both processes started under their own names"
    assert subprocess.run(["pgrep", "-f", "hostname=pair-"], capture_output=True).stdout == b"", \
        "no worker process outlived the command"
