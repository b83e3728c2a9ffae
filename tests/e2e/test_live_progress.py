"""Live progress by stage while `afpbench run` waits on a slow model and slow judges.

A real embedded run (the CLI process) against a model server and two judge servers on 127.0.0.1 that
each hold their reply until the test lets it go; `afpbench status` (another process, reading the same
SQLite file) is read between the events. Rules checked:
- `status` shows where the cells stand (waiting / answering / answered / judging / decided) and the
  counts move with each event: the answer held -> answering 1; the answer given -> judging 1; the
  verdict -> decided 1. No timing threshold: each reading waits for its event (a deadline only ends a
  test that would otherwise hang);
- a judgement row is recorded as its judge call ends: with the first judge answered and the second still
  held, the cell is judging and its first judgement row is already stored.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench
from tests.e2e.test_fixtures_check import judgement
from tests.e2e.test_scoring_pipeline import completion_body, replaying_server, rows

STAGES = re.compile(r"cells: waiting (\d+), answering (\d+), answered (\d+), judging (\d+), decided (\d+)")
DEADLINE_S = 120  # only ends a hung test; nothing is asserted about how long a step takes


def _answer() -> str:
    canned = yaml.safe_load((REPO / "fixtures" / "pilot" / "simulated" / "P02.yaml").read_text(encoding="utf-8"))
    return next(r["text"] for r in canned["responses"] if r["id"] == "P02-pass-plain")


def held_server(reply):
    """A server whose replies wait for `server.release` (set once: every later call passes)."""
    gate = threading.Event()

    def body(request: dict) -> str:
        gate.wait(DEADLINE_S)
        return reply(request)

    server = replaying_server(body)
    server.release = gate  # type: ignore[attr-defined]
    return server


def stages(work: Path) -> dict[str, int] | None:
    proc = afpbench(["status"], work, env={"COLUMNS": "200"})
    found = STAGES.search(proc.stdout)
    if not found:
        return None  # no sweep yet
    return dict(zip(("waiting", "answering", "answered", "judging", "decided"), map(int, found.groups()),
                    strict=True))


def wait_for(work: Path, what: str, condition) -> dict[str, int]:
    end = time.monotonic() + DEADLINE_S
    seen = None
    while time.monotonic() < end:
        seen = stages(work)
        if seen is not None and condition(seen):
            return seen
        time.sleep(0.2)
    raise AssertionError(f"status never showed {what}; last: {seen}")


def test_status_follows_each_event_and_judgement_rows_appear_as_each_call_ends(tmp_path):
    model = held_server(lambda request: completion_body(_answer()))
    judges = [held_server(lambda request: completion_body(judgement(request["messages"][-1]["content"])))
              for _ in range(2)]
    spec = tmp_path / "slow.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "slow model, slow judges",
        "models": [{"provider": "openai-compatible", "model": "slow-model",
                    "base_url": f"http://127.0.0.1:{model.server_port}/v1"}],
        "judges": [{"provider": "openai-compatible", "model": f"slow-judge-{i}", "label": f"judge {i}",
                    "base_url": f"http://127.0.0.1:{j.server_port}/v1"} for i, j in enumerate(judges, 1)],
        "fixtures": {"only": ["P02"]}, "conditions": ["A"],
    }))
    env = {"AFP_DATABASE_URL": f"sqlite:///{tmp_path / 'afpbench.db'}", "AFP_BROKER_URL": "memory://"}
    run = subprocess.Popen([sys.executable, "-m", "afpbench.api.cli", "run", str(spec), "--json", "--no-judge-check"],
                           cwd=tmp_path,
                           env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = tmp_path / "afpbench.db"
    try:
        held = wait_for(tmp_path, "the answer in flight", lambda s: s["answering"] == 1)
        assert held["decided"] == 0 and held["judging"] == 0

        model.release.set()
        judging = wait_for(tmp_path, "the answer in and a judge asked", lambda s: s["judging"] == 1)
        assert judging["answering"] == 0 and judging["decided"] == 0
        assert rows(db, "select count(*) from judgement") == [(0,)]

        judges[0].release.set()
        end = time.monotonic() + DEADLINE_S
        while rows(db, "select count(*) from judgement") == [(0,)] and time.monotonic() < end:
            time.sleep(0.1)
        first = rows(db, "select judge_label, parsed is not null from judgement")
        assert first == [("judge 1", 1)], first
        still = stages(tmp_path)
        assert still is not None and still["judging"] == 1 and still["decided"] == 0, still

        judges[1].release.set()
        decided = wait_for(tmp_path, "the cell decided", lambda s: s["decided"] == 1)
        assert decided["judging"] == 0 and decided["answering"] == 0
        out, err = run.communicate(timeout=DEADLINE_S)
        assert run.returncode == 0, err
    finally:
        for server in (model, *judges):
            server.release.set()
            server.shutdown()
        if run.poll() is None:
            run.kill()
    labels = [label for (label,) in rows(db, "select judge_label from judgement order by id")]
    assert labels[:2] == ["judge 1", "judge 2"]
