"""Run a sweep through the CLI in embedded mode (subprocess, SQLite in a temp dir) and read it back.

Shared by tests/faults and tests/security; SQL is read with sqlite3 directly, never through our code.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml

from tests.e2e.test_cli_errors import afpbench


@dataclass
class CellRow:
    id: int
    label: str
    fixture_id: str
    condition: str
    repeat: int
    phase: str
    state: str | None
    reason: str | None
    attempts: int


@dataclass
class AttemptRow:
    cell_id: int
    number: int
    outcome: str
    http_status: int | None
    error: str | None
    output_text: str | None
    started: datetime
    finished: datetime | None
    rounds: list[dict]
    provider_request_id: str | None
    served_model: str | None
    tool_calls: list[dict]


@dataclass
class SweepRun:
    proc: subprocess.CompletedProcess
    db: Path
    sweep_id: str | None
    cells: list[CellRow]
    attempts: list[AttemptRow]

    def cells_of(self, label: str) -> list[CellRow]:
        return [c for c in self.cells if c.label == label]

    def attempts_of(self, cell: CellRow) -> list[AttemptRow]:
        return sorted((a for a in self.attempts if a.cell_id == cell.id), key=lambda a: a.number)

    def notices(self) -> list[str]:
        return json.loads(query(self.db, "select notices from sweep")[0][0])


def query(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def _time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def run_sweep(tmp_path: Path, spec: dict, *, threads: int = 4, env: dict | None = None,
              timeout: float = 180) -> SweepRun:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    proc = afpbench(["run", str(spec_path), "--json", "--threads", str(threads)], tmp_path, env=env,
                    timeout=timeout)
    db = tmp_path / "afpbench.db"
    if proc.returncode not in (0, 3) or not db.exists():  # 3: finished, cells excluded
        return SweepRun(proc, db, None, [], [])
    cells = [CellRow(*r) for r in query(db, "select id, model_label, fixture_id, condition, repeat, phase, "
                                             "state, state_reason, attempts from cell order by id")]
    attempts = [
        AttemptRow(r[0], r[1], r[2], r[3], r[4], r[5], _time(r[6]), _time(r[7]), json.loads(r[8] or "[]"),
                   r[9], r[10], json.loads(r[11] or "[]"))
        for r in query(db, "select cell_id, number, outcome, http_status, error, output_text, started_at, "
                           "finished_at, rounds, provider_request_id, served_model, tool_calls from attempt")
    ]
    sweep_id = json.loads(proc.stdout)["sweep_id"]
    return SweepRun(proc, db, sweep_id, cells, attempts)


def http_model(label: str, base_url: str, **extra) -> dict:
    return {"provider": "openai-compatible", "model": f"m-{label}", "label": label, "base_url": base_url, **extra}


def sim_model(label: str, base_url: str, **extra) -> dict:
    return {"provider": "sim", "model": f"sim-{label}", "label": label, "base_url": base_url, **extra}
