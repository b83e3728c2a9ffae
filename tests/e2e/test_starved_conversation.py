"""Execution honesty: a tool conversation that cannot finish is never scored as the model's answer.

A sweep of P08 (calculator rounds) and P02 (one round) on two simulated models, each with
`limits.max_in_flight: 1`:

- "tight": the limiter allows one request every 0.5 s, and a later round may wait only 0.3 s for its
  rate slot (AFP_TOOL_ROUND_WAIT_S), so every P08 conversation is starved at round 2;
- "faulty": the sim injects latency, 5xx errors and 429s (its bucket slightly slower than the
  limiter's), so later rounds are lost now and then.

Protocol rules checked: only the model's behaviour is scored (INFRA_ERROR stays out of
PASS/(PASS+FAIL)); a cut conversation is retried, then INFRA_ERROR naming why; a later tool round
never waits for a second in-flight slot while its own cell holds the only one.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from sqlalchemy import create_engine, text

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench

MAX_ATTEMPTS = 3
ROUND_WAIT_S = 0.3
SCORED_STATES = {"MODEL_PASS", "MODEL_FAIL", "GRADER_DISPUTE"}
CANNED_TOOL_CALLS = {r["text"]: len(r["tool_calls"]) for r in yaml.safe_load(
    (REPO / "fixtures" / "pilot" / "simulated" / "P08.yaml").read_text(encoding="utf-8"))["responses"]}


def _spec(tight_url: str, faulty_url: str, judge_url: str) -> dict:
    return {
        "name": "starved conversations (simulated)",
        "models": [
            {"provider": "sim", "model": "sim-tight", "label": "tight", "base_url": tight_url,
             "limits": {"requests_per_min": 120, "burst": 1, "max_in_flight": 1}},
            {"provider": "sim", "model": "sim-faulty", "label": "faulty", "base_url": faulty_url,
             "limits": {"requests_per_min": 600, "burst": 2, "max_in_flight": 1}},
        ],
        "judges": [{"provider": "sim", "model": "sim-judge", "base_url": judge_url}],
        "fixtures": {"only": ["P08", "P02"]},
        "conditions": ["A", "B", "C", "D"],
        "repeats": 2,
    }


class Sims:
    def __init__(self):
        self.tight = SimServer(SimConfig(faults=FaultConfig()))
        self.faulty = SimServer(SimConfig(faults=FaultConfig(
            latency_ms=5, latency_jitter_ms=25, rate_per_min=570, burst=2, error_5xx_rate=0.12, seed=11)))
        self.judge = SimServer(SimConfig(faults=FaultConfig()))

    def __enter__(self):
        for s in (self.tight, self.faulty, self.judge):
            s.start()
        return self

    def __exit__(self, *exc):
        for s in (self.tight, self.faulty, self.judge):
            s.stop()

    def write_spec(self, path: Path) -> Path:
        path.write_text(yaml.safe_dump(_spec(self.tight.base_url, self.faulty.base_url, self.judge.base_url)))
        return path


CELLS_SQL = ("select c.id, c.model_label, c.fixture_id, c.state, c.state_reason, c.attempts, "
             "(select r.details from result r where r.cell_id = c.id order by r.scoring_run desc limit 1) "
             "from cell c order by c.id")
ATTEMPTS_SQL = "select cell_id, id, outcome, error, output_text, rounds, tool_calls from attempt order by id"


def _load(value):
    return json.loads(value) if isinstance(value, str) else value


def check_sweep(cells: list[tuple], attempts: list[tuple]) -> dict[str, int]:
    """The invariants of the acceptance test, on the rows of one finished sweep; returns a few counts."""
    by_cell: dict[int, list[tuple]] = {}
    for a in attempts:
        by_cell.setdefault(a[0], []).append(a)
    counts = {"scored_p08": 0, "lost_rounds": 0, "starved": 0}
    for cell_id, model, fixture, state, reason, n_attempts, details in cells:
        assert state is not None, f"cell {cell_id} unfinished"
        tries = by_cell.get(cell_id, [])
        assert len(tries) == n_attempts
        for _, _, outcome, error, _, rounds, _ in tries:
            rounds = _load(rounds)
            if len(rounds) > 1 and outcome != "answer":
                assert error and "tool conversation incomplete" in error, (cell_id, outcome, error)
                counts["lost_rounds"] += "lost" in error
        if fixture != "P08":
            continue
        if state in SCORED_STATES:
            counts["scored_p08"] += 1
            scored_id = _load(details)["attempt_id"]
            _, _, outcome, error, output, rounds, tool_calls = next(a for a in tries if a[1] == scored_id)
            rounds, tool_calls = _load(rounds), _load(tool_calls)
            # The full conversation: every calculator round answered, then the final answer.
            assert outcome == "answer" and error is None and output, (cell_id, outcome, error)
            assert [r["outcome"] for r in rounds] == ["tool_call"] * (len(rounds) - 1) + ["answer"], rounds
            assert all(r["http_status"] == 200 for r in rounds)
            assert len(tool_calls) == len(rounds) - 1 == CANNED_TOOL_CALLS[output], (cell_id, len(rounds))
            assert all("result" in t for t in tool_calls)
        else:
            assert state == "INFRA_ERROR", (cell_id, state, reason)
            # 429s retry on their own, larger budget, so a cell may have had more tries than that.
            assert n_attempts >= MAX_ATTEMPTS and f"after {n_attempts} attempts" in reason, (cell_id, reason)
        if model == "tight":
            # Starved at round 2 on every try: retried, then INFRA_ERROR naming why.
            assert state == "INFRA_ERROR" and n_attempts == MAX_ATTEMPTS, (cell_id, state, n_attempts)
            assert (f"tool conversation incomplete: no rate slot for round 2 within {ROUND_WAIT_S:g} s"
                    in reason), reason
            counts["starved"] += 1
    return counts


ENV = {"AFP_MAX_ATTEMPTS": str(MAX_ATTEMPTS), "AFP_TOOL_ROUND_WAIT_S": str(ROUND_WAIT_S)}


def test_starved_and_faulted_tool_conversations_are_never_scored_embedded(tmp_path):
    """Embedded mode (SQLite, in-memory broker and limiter)."""
    with Sims() as sims:
        proc = afpbench(["run", str(sims.write_spec(tmp_path / "s.yaml")), "--json"], tmp_path, env=ENV,
                        timeout=300)
    # The starved cells end INFRA_ERROR, a configuration reason: the run says so with exit status 3.
    assert proc.returncode == 3 and "INFRA_ERROR" in proc.stderr, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["done"] == summary["cells"] == 32
    con = sqlite3.connect(tmp_path / "afpbench.db")
    try:
        counts = check_sweep(con.execute(CELLS_SQL).fetchall(), con.execute(ATTEMPTS_SQL).fetchall())
    finally:
        con.close()
    print("starved-conversation sweep (embedded):", counts, summary["by_state"])
    assert counts["starved"] == 8
    assert counts["scored_p08"] >= 1, "the faulty model completes some P08 conversations in full"
    assert counts["lost_rounds"] >= 1, "the fault injection lost some later rounds"


@pytest.mark.integration
def test_starved_and_faulted_tool_conversations_are_never_scored_distributed(postgres_url, fresh_redis, tmp_path):
    """Distributed mode: Redis broker and limiter (the Lua script), PostgreSQL, two worker processes."""
    from tests.integration.workers_helper import running_workers, service_env

    with Sims() as sims:
        env = service_env(postgres_url, fresh_redis, **ENV)
        spec = sims.write_spec(tmp_path / "s.yaml")
        with running_workers(env, ["w1", "w2"], tmp_path):
            proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", str(spec), "--json"],
                                  cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    logs = "".join(p.read_text()[-3000:] for p in tmp_path.glob("*.log"))
    assert proc.returncode == 3 and "INFRA_ERROR" in proc.stderr, proc.stderr + logs
    assert json.loads(proc.stdout)["done"] == 32
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        cells = [tuple(r) for r in conn.execute(text(CELLS_SQL)).all()]
        attempts = [tuple(r) for r in conn.execute(text(ATTEMPTS_SQL)).all()]
    engine.dispose()
    counts = check_sweep(cells, attempts)
    assert counts["starved"] == 8 and counts["scored_p08"] >= 1
