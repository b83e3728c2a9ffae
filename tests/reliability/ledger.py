"""What the database says about a sweep after a reliability run, and the small helpers to start one.

The ledger is read with plain SQL from the test process (no afpbench code path in between), so it is
an independent check of what the workers wrote.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from tests.conftest import REPO

# Tight timings for tests, keeping the order the settings require: hard limit < visibility < lease.
# The hard limit must leave room for one more round of a tool conversation (connect timeout 10 s + the
# model's timeout_s, 3 s in these specs), or the conversation stops early (workers/cells/conversation.py).
FAST_TIMING = {
    "AFP_TASK_HARD_TIME_LIMIT_S": "20",
    "AFP_VISIBILITY_TIMEOUT_S": "25",
    "AFP_LEASE_EXPIRY_S": "30",
    "AFP_RECONCILE_INTERVAL_S": "5",
    "AFP_RECONCILE_STALE_S": "60",
}
# For runs beside a CPU hog (tests/reliability/load.py): with every core taken a simulated round can take
# seconds, and FAST_TIMING's 3 s read timeout and 20 s hard limit would end tries that were only slow
# (a read timeout, or the guard refusing a tool round that could overrun the limit). Those are honest
# retries, not duplicates, but they would hide what a duplicates test measures, so it uses these: a
# round may take 20 s, a conversation may start rounds for 30 s (20 s + 10 s connect < 60 s).
LOADED_TIMING = {
    **FAST_TIMING,
    "AFP_TASK_HARD_TIME_LIMIT_S": "60",
    "AFP_VISIBILITY_TIMEOUT_S": "70",
    "AFP_LEASE_EXPIRY_S": "80",
}
LOADED_MODEL_TIMEOUT_S = 20


def sweep_spec(sim_url: str, poison_url: str | None, repeats: int, name: str = "reliability (simulated)",
               judged: bool = False, timeout_s: float = 3) -> dict:
    """2 simulated models x A-D x P01-P08 x repeats. Without judges scoring is deterministic, cheap and
    done by the executing task (every answered cell ends GRADER_DISPUTE for want of judges, which is
    still a final state); `judged` adds a simulated judge, so cells go through the `score` queue."""
    # A declared rate keeps each model's release window to about ten seconds of work (workers/dispatch.py),
    # well above what this machine executes, so queued cells never wait long enough to look lost.
    limits = {"requests_per_min": 1800, "burst": 30}
    models = [{"provider": "sim", "model": "sim-rel-a", "label": "sim-a (simulated)", "base_url": sim_url,
               "limits": limits, "timeout_s": timeout_s},
              {"provider": "sim", "model": "sim-rel-b", "label": "sim-b (simulated)",
               "base_url": poison_url or sim_url, "limits": limits, "timeout_s": timeout_s}]
    judges = [{"provider": "sim", "model": "sim-rel-judge", "label": "sim-judge (simulated)", "base_url": sim_url,
               "timeout_s": timeout_s}] if judged else []
    return {"name": name, "models": models, "judges": judges, "repeats": repeats, "high_risk_repeats": repeats}


def create_sweep(spec: dict, env: dict[str, str], work_dir: Path) -> str:
    """`afpbench run SPEC --detach`: the real front door seals, writes the cells and releases them."""
    path = work_dir / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", str(path), "--detach"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"afpbench run failed: {proc.stderr}")
    return proc.stdout.strip().splitlines()[-1]


def resume(sweep_id: str, env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "resume", sweep_id], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"afpbench resume failed: {proc.stderr}")
    return proc.stdout.strip()


@dataclass
class Ledger:
    cells: int
    done: int
    lost: int  # cells not in phase done
    results: int
    cells_with_result: int
    duplicated: int  # cells with more than one result row (no re-scoring happens in these runs)
    duplicated_per_run: int  # (cell, scoring_run) pairs with more than one row
    attempts: int  # attempt rows
    claims: int  # sum of the cells' attempt counters
    cells_missing_attempts: int  # cells whose attempt rows do not number 1..attempts
    attempts_unfinished: int  # rows still "started" once the sweep is done
    attempts_interrupted: int
    attempts_not_sent: int  # claims that made no request (their error says why)
    redelivered_cells: int  # cells with more than one attempt row
    by_state: dict[str, int]
    aggregate_rows: int
    aggregate_finished: int
    sweep_status: str

    def as_dict(self) -> dict:
        return asdict(self)


def read_ledger(database_url: str, sweep_id: str) -> Ledger:
    engine = create_engine(database_url)
    q = {
        "cells": "select count(*) from cell where sweep_id = :s",
        "done": "select count(*) from cell where sweep_id = :s and phase = 'done'",
        "results": "select count(*) from result where sweep_id = :s",
        "cells_with_result": "select count(distinct cell_id) from result where sweep_id = :s",
        "duplicated": "select count(*) from (select cell_id from result where sweep_id = :s "
                      "group by cell_id having count(*) > 1) d",
        "duplicated_per_run": "select count(*) from (select cell_id, scoring_run from result where sweep_id = :s "
                              "group by cell_id, scoring_run having count(*) > 1) d",
        "attempts": "select count(*) from attempt a join cell c on c.id = a.cell_id where c.sweep_id = :s",
        "claims": "select coalesce(sum(attempts), 0) from cell where sweep_id = :s",
        "cells_missing_attempts": (
            "select count(*) from cell c left join (select cell_id, count(*) n, count(distinct number) d, "
            "min(number) lo, max(number) hi from attempt group by cell_id) a on a.cell_id = c.id "
            "where c.sweep_id = :s and c.attempts > 0 and "
            "(a.n is null or a.n <> c.attempts or a.d <> a.n or a.lo <> 1 or a.hi <> c.attempts)"),
        "attempts_unfinished": "select count(*) from attempt a join cell c on c.id = a.cell_id "
                               "where c.sweep_id = :s and a.outcome = 'started'",
        "attempts_interrupted": "select count(*) from attempt a join cell c on c.id = a.cell_id "
                                "where c.sweep_id = :s and a.outcome = 'interrupted'",
        "attempts_not_sent": "select count(*) from attempt a join cell c on c.id = a.cell_id "
                             "where c.sweep_id = :s and a.outcome = 'not_sent'",
        "redelivered_cells": "select count(*) from (select a.cell_id from attempt a join cell c on c.id = a.cell_id "
                             "where c.sweep_id = :s group by a.cell_id having count(*) > 1) d",
        "aggregate_rows": "select count(*) from aggregate where sweep_id = :s",
        "aggregate_finished": "select count(*) from aggregate where sweep_id = :s and summary is not null",
    }
    try:
        with engine.connect() as conn:
            values = {k: int(conn.execute(text(sql), {"s": sweep_id}).scalar()) for k, sql in q.items()}
            by_state = dict(conn.execute(text(
                "select coalesce(state, '-'), count(*) from cell where sweep_id = :s group by state"), {"s": sweep_id}
            ).all())
            status = conn.execute(text("select status from sweep where id = :s"), {"s": sweep_id}).scalar()
    finally:
        engine.dispose()
    return Ledger(lost=values["cells"] - values["done"], by_state=by_state, sweep_status=status, **values)


def done_count(engine, sweep_id: str) -> int | None:
    """Cells done so far, or None while the database cannot be reached."""
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("select count(*) from cell where sweep_id = :s and phase = 'done'"),
                                    {"s": sweep_id}).scalar())
    except OperationalError:
        return None


def aggregate_finished(engine, sweep_id: str) -> bool:
    try:
        with engine.connect() as conn:
            return bool(conn.execute(text("select count(*) from aggregate where sweep_id = :s and summary is not null"),
                                     {"s": sweep_id}).scalar())
    except OperationalError:
        return False


def wait_until(predicate, timeout_s: float, poll_s: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()


def exactly_once_problems(ledger: Ledger) -> list[str]:
    """Every way the ledger breaks 'each cell done once, with one result and every attempt on record'."""
    problems = []
    if ledger.lost:
        problems.append(f"{ledger.lost} cells never reached done")
    if ledger.duplicated or ledger.duplicated_per_run:
        problems.append(f"{ledger.duplicated} cells with more than one result")
    if ledger.cells_with_result != ledger.cells or ledger.results != ledger.cells:
        problems.append(f"{ledger.results} results for {ledger.cells_with_result} of {ledger.cells} cells")
    if ledger.attempts != ledger.claims or ledger.cells_missing_attempts:
        problems.append(f"{ledger.attempts} attempt rows for {ledger.claims} claims; "
                        f"{ledger.cells_missing_attempts} cells with gaps in their attempt numbers")
    if ledger.attempts_unfinished:
        problems.append(f"{ledger.attempts_unfinished} attempts still 'started' after the sweep")
    if ledger.aggregate_rows != 1 or ledger.aggregate_finished != 1 or ledger.sweep_status != "complete":
        problems.append(f"aggregate rows {ledger.aggregate_rows} (finished {ledger.aggregate_finished}), "
                        f"sweep {ledger.sweep_status}")
    return problems


@dataclass
class CellHistory:
    state: str | None
    reason: str | None
    attempts: int
    outcomes: list[str]
    statuses: list[int | None]


def poison_history(database_url: str, sweep_id: str, condition: str, fixture_id: str, repeat: int,
                   model_label: str) -> CellHistory:
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            cell = conn.execute(text(
                "select id, state, state_reason, attempts from cell where sweep_id = :s and condition = :c "
                "and fixture_id = :f and repeat = :r and model_label = :m"),
                {"s": sweep_id, "c": condition, "f": fixture_id, "r": repeat, "m": model_label}).one()
            rows = conn.execute(text("select outcome, http_status from attempt where cell_id = :i order by number"),
                                {"i": cell.id}).all()
    finally:
        engine.dispose()
    return CellHistory(cell.state, cell.state_reason, cell.attempts, [r.outcome for r in rows],
                       [r.http_status for r in rows])


def repeated_attempts(database_url: str, sweep_id: str) -> list[dict]:
    """Every attempt row of the cells that were tried more than once, for a failure message that says
    which copy ran, when, and what it saw."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text(
                "select a.cell_id, a.number, a.worker, a.outcome, a.http_status, a.error, a.started_at, "
                "a.finished_at, c.lease_until from attempt a join cell c on c.id = a.cell_id "
                "where c.sweep_id = :s and a.cell_id in (select cell_id from attempt group by cell_id "
                "having count(*) > 1) order by a.cell_id, a.number"), {"s": sweep_id}).all()
    finally:
        engine.dispose()
    return [dict(r._mapping) for r in rows]


@dataclass
class CellRequests:
    attempts: int
    sent_rounds: int  # rounds the attempts recorded as sent: what the provider should have seen


def requests_on_record(database_url: str, sweep_id: str) -> dict[str, CellRequests]:
    """Per cell key (the X-Afpbench-Cell value): its attempt rows and the requests they say they sent."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            cells = conn.execute(text(
                "select id, sweep_id, model_hash, condition, fixture_id, fixture_version, repeat from cell "
                "where sweep_id = :s"), {"s": sweep_id}).all()
            attempts = conn.execute(text(
                "select a.cell_id, a.rounds from attempt a join cell c on c.id = a.cell_id where c.sweep_id = :s"),
                {"s": sweep_id}).all()
    finally:
        engine.dispose()
    by_id = {c.id: CellRequests(0, 0) for c in cells}
    for cell_id, rounds in attempts:
        rounds = json.loads(rounds) if isinstance(rounds, str) else rounds
        by_id[cell_id].attempts += 1
        by_id[cell_id].sent_rounds += sum(1 for r in rounds if r.get("sent", True))
    # The header's documented format (tests/reliability/poison.py), written out here, not imported.
    return {f"{c.sweep_id}|{c.model_hash}|{c.condition}|{c.fixture_id}@{c.fixture_version}|r{c.repeat}": by_id[c.id]
            for c in cells}
