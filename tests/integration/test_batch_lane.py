"""The batch lane on real services: Redis broker, PostgreSQL, real `afpbench worker` processes, the
simulator speaking OpenAI's batch API (files + batches).

Rules checked (docs/SPEC.md "Lanes", docs/PROTOCOL.md "The batch lane"):
- a sweep on `lane: batch` ends with the same states as the same sweep on the sync lane (P08, a tool
  conversation, on the sync lane in both);
- a worker SIGKILL and a broker restart (its queue keys gone) while batches are pending lose and
  duplicate nothing: every batch is submitted once, every cell has one attempt and one result;
- a batch is never submitted (and paid) twice (docs/PROTOCOL.md "The batch lane"): a worker SIGKILLed
  after the provider registered its batch but before the answer came back leaves the row `submitting`;
  the next worker finds that copy in the provider's list (label; Anthropic: time window, request count,
  custom ids) and adopts it, in each of the three shapes;
- an expired batch's unrun cells are sent again once (on the sync lane) and end as they would have.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, text

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.integration.workers_helper import running_workers, service_env

pytestmark = pytest.mark.integration

# Polls every half second; a killed poller's hold on its batch lasts 5 s (the sim answers in milliseconds).
FAST = {"AFP_BATCH_POLL_S": "0.5", "AFP_BATCH_HOLD_S": "5", "AFP_RECONCILE_INTERVAL_S": "2"}


def _spec(tmp_path: Path, lane: str, only: list[str] | None = None, provider: str = "sim") -> Path:
    fixtures = f"fixtures: {{only: [{', '.join(only)}]}}\n" if only else ""
    path = tmp_path / f"{lane}.yaml"
    path.write_text(
        f"name: lane {lane}\n"
        f"models:\n  - {{provider: {provider}, model: sim-1, label: 'sim (simulated)', lane: {lane}}}\n"
        "judges:\n  - {provider: sim, model: sim-1, label: 'sim-judge (simulated)'}\n"
        f"repeats: 2\n{fixtures}"
    )
    return path


def _run(env: dict, spec: Path, tmp_path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", str(spec), "--json"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + "".join(p.read_text() for p in tmp_path.glob("*.log"))
    return json.loads(proc.stdout)


def _states(url: str, name: str) -> dict[tuple, str]:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text(
            "select c.condition, c.fixture_id, c.repeat, c.state from cell c join sweep s on s.id = c.sweep_id "
            "where s.name = :name"), {"name": name}).all()
    engine.dispose()
    return {(c, f, r): s for c, f, r, s in rows}


def _one_of_each(url: str) -> tuple[list, list, list]:
    """Cells without exactly one attempt, cells without exactly one result, attempts never finished."""
    engine = create_engine(url)
    with engine.connect() as conn:
        attempts = conn.execute(text("select cell_id from attempt group by cell_id having count(*) <> 1")).all()
        results = conn.execute(text("select cell_id from result group by cell_id having count(*) <> 1")).all()
        open_ = conn.execute(text("select id from attempt where outcome in ('started', 'interrupted')")).all()
    engine.dispose()
    return attempts, results, open_


def _sweep_status(url: str, name: str = "lane batch") -> str | None:
    engine = create_engine(url)
    with engine.connect() as conn:
        status = conn.execute(text("select status from sweep where name = :name"), {"name": name}).scalar()
    engine.dispose()
    return status


def _batches(url: str, *more: str) -> list[tuple]:
    """Each batch row's status, provider status, entries, recorded, answered, and the `more` columns."""
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text(", ".join(["select status, provider_status, entries, recorded, answered", *more])
                                 + " from batch order by id")).all()
    engine.dispose()
    return [tuple(r) for r in rows]


ONE_ROUND = ["P01", "P02", "P03", "P04", "P05", "P06", "P07"]


@pytest.mark.parametrize(("provider", "only", "cells", "ended_as"), [
    ("sim", None, 76, "completed"),  # OpenAI's shape; P08 (tools) on the sync lane in both sweeps
    ("sim-anthropic", ONE_ROUND, 68, "ended"),  # the sim's Anthropic and Gemini shapes answer text only
    ("sim-gemini", ONE_ROUND, 68, "SUCCEEDED"),
])
def test_batch_lane_ends_with_the_sync_lanes_states(postgres_url, fresh_redis, tmp_path, provider, only, cells,
                                                    ended_as):
    with SimServer(SimConfig(faults=FaultConfig(batch_delay_s=1.0))).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url, **FAST)
        with running_workers(env, ["w1"], tmp_path):
            sync = _run(env, _spec(tmp_path, "sync", only, provider), tmp_path)
            batch = _run(env, _spec(tmp_path, "batch", only, provider), tmp_path)
    assert sync["done"] == batch["done"] == sync["cells"] == cells
    sync_states, batch_states = _states(postgres_url, "lane sync"), _states(postgres_url, "lane batch")
    assert len(batch_states) == cells and batch_states == sync_states
    assert len(set(batch_states.values())) > 1, "the sim draws several states: the comparison can fail"
    batches = _batches(postgres_url)
    assert batches and all(status == "ended" and said == ended_as for status, said, *_ in batches)
    assert sum(b[2] for b in batches) == 68, "P01-P07 ride in batches (P05-P07 three repeats); P08 (tools) stays sync"
    assert all(entries == recorded == answered for _, _, entries, recorded, answered in batches)
    assert _one_of_each(postgres_url) == ([], [], [])


def _wait_for(what, deadline_s: float = 120.0, every_s: float = 0.2):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(every_s)
    raise AssertionError("timed out waiting")


def test_worker_kill_and_broker_loss_while_batches_pend_lose_and_duplicate_nothing(postgres_url, fresh_redis,
                                                                                   tmp_path):
    only = ["P01", "P02", "P03"]  # one-round fixtures: every cell rides in a batch
    with SimServer(SimConfig(faults=FaultConfig(batch_delay_s=6.0))).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url, **FAST)
        subprocess.run([sys.executable, "-m", "afpbench.api.cli", "db", "upgrade"], cwd=REPO, env=env, check=True,
                       capture_output=True, timeout=120)
        # Detached: no `run` process tops anything up; after the kill only the beat polls the batch.
        detached = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run",
                                   str(_spec(tmp_path, "batch", only)), "--detach"], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=120)
        assert detached.returncode == 0, detached.stderr
        with running_workers(env, ["w1"], tmp_path) as (first,):
            _wait_for(lambda: any(b[0] == "submitted" for b in _batches(postgres_url)))
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
        redis.Redis.from_url(fresh_redis).flushdb()  # the broker restarted empty: every queued message lost
        assert all(b[0] == "submitted" for b in _batches(postgres_url)), "still pending at the provider"
        with running_workers(env, ["w2"], tmp_path, beat=True):
            _wait_for(lambda: _sweep_status(postgres_url) == "complete", deadline_s=240)
        submitted = sim.stats()
    assert _states(postgres_url, "lane batch").keys() and None not in _states(postgres_url, "lane batch").values()
    assert len(_states(postgres_url, "lane batch")) == 24
    batches = _batches(postgres_url)
    assert [b[:2] for b in batches] == [("ended", "completed")] and batches[0][2:] == (24, 24, 24)
    assert _one_of_each(postgres_url) == ([], [], [])
    assert submitted["batches"] == 1, "the batch was submitted once, before the kill"
    status = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "status"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=120)
    assert status.returncode == 0 and "Provider batches" in status.stdout and "completed" in status.stdout


def test_an_expired_batchs_unrun_cells_are_sent_again_once_and_end_right(postgres_url, fresh_redis, tmp_path):
    only = ["P01", "P02", "P03"]
    with SimServer(SimConfig(faults=FaultConfig(batch_delay_s=0.5, batch_expire_rate=1.0))).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url, **FAST)
        with running_workers(env, ["w1"], tmp_path):
            sync = _run(env, _spec(tmp_path, "sync", only), tmp_path)
            batch = _run(env, _spec(tmp_path, "batch", only), tmp_path)
    assert sync["done"] == batch["done"] == 24
    assert batch["attempts"] == 24 + 12, "half of the expired batch's 24 entries were sent again, once each"
    assert _states(postgres_url, "lane batch") == _states(postgres_url, "lane sync")
    assert [b[:2] for b in _batches(postgres_url)] == [("ended", "expired")]
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        resent = conn.execute(text(
            "select a1.error, a2.outcome from attempt a1 join attempt a2 on a2.cell_id = a1.cell_id and a2.number = 2 "
            "where a1.number = 1 and a1.worker like 'batch:%' and a1.outcome = 'infra_error'")).all()
    engine.dispose()
    assert len(resent) == 12
    assert all(error.startswith("batch entry expired") and outcome == "answer" for error, outcome in resent)


@pytest.mark.parametrize(("provider", "ended_as", "identified_by"), [
    ("sim", "completed", "its label"),  # OpenAI: metadata.afpbench
    ("sim-anthropic", "ended", "its results' custom ids"),  # no label: time window + request count, then custom ids
    ("sim-gemini", "SUCCEEDED", "its label"),  # Gemini: displayName
])
def test_a_worker_killed_before_the_create_answer_came_leaves_one_batch_at_the_provider(
        postgres_url, fresh_redis, tmp_path, provider, ended_as, identified_by):
    only = ["P01", "P02", "P03"]  # one-round fixtures: every batch-lane cell rides in the one batch
    # The sim registers each batch and holds the create answer until it stops: the client never hears of it.
    with SimServer(SimConfig(faults=FaultConfig(batch_delay_s=1.0, batch_create_hold_s=3600))).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url, **FAST)
        with running_workers(env, ["w0"], tmp_path):
            _run(env, _spec(tmp_path, "sync", only, provider), tmp_path)
        detached = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run",
                                   str(_spec(tmp_path, "batch", only, provider)), "--detach"], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=120)
        assert detached.returncode == 0, detached.stderr
        with running_workers(env, ["w1"], tmp_path) as (first,):  # no beat: only the release's message wakes it
            _wait_for(lambda: sim.stats()["batches"] == 1 and [b[0] for b in _batches(postgres_url)] == ["submitting"])
            os.killpg(first.pid, signal.SIGKILL)  # the provider holds the batch; the row does not know its id
            first.wait(30)
        with running_workers(env, ["w2"], tmp_path, beat=True):
            _wait_for(lambda: _sweep_status(postgres_url) == "complete", deadline_s=240)
        created = sim.stats()["batches"]
    batches = _batches(postgres_url, "details")
    assert created == len(batches) == 1, "one batch created at the provider per batch row: never sent twice"
    (status, said, entries, recorded, answered, details), = batches
    assert (status, said) == ("ended", ended_as) and entries == recorded == answered == 24
    details = details if isinstance(details, dict) else json.loads(details)
    assert details["identified"]["how"] == identified_by and details["submission"]["tries"] == 1
    assert _states(postgres_url, "lane batch") == _states(postgres_url, "lane sync")
    assert len(_states(postgres_url, "lane batch")) == 24
    assert _one_of_each(postgres_url) == ([], [], []), "every cell one attempt and one result, none left open"
