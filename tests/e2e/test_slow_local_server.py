"""A slow local server with a few slots, as a CPU model on llama.cpp is: judges on the same server share
the tested model's slots, and `afpbench cancel` stops a running `afpbench run` and its judging.

The server is a real HTTP proxy in front of the simulator (labelled simulated), slow on purpose, that
counts the requests it has in flight at once and when each one started. `afpbench run` and
`afpbench cancel` are real processes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

from afpbench.workers.sim.server import SimConfig, SimServer
from tests.e2e.test_cli_errors import afpbench


class SlotCountingServer:
    """Forwards every request to `upstream` after `delay_s` (or the delay for the model it names), and
    records how many were in flight at once and when each started."""

    def __init__(self, upstream: str, delay_s: float, delays: dict[str, float] | None = None):
        self.upstream = upstream.rstrip("/")
        self.delay_s = delay_s
        self.delays = delays or {}
        self.lock = threading.Lock()
        self.in_flight = 0
        self.most = 0
        self.started: list[tuple[float, str]] = []  # (time.time(), model asked for)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # noqa: A002 - stdlib signature
                pass

            def do_GET(self):
                self._forward(None)

            def do_POST(self):
                self._forward(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

            def _forward(self, body: bytes | None):
                model = json.loads(body).get("model", "") if body else ""
                with outer.lock:
                    outer.in_flight += 1
                    outer.most = max(outer.most, outer.in_flight)
                    outer.started.append((time.time(), model))
                try:
                    time.sleep(outer.delays.get(model, outer.delay_s))
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                    request = urllib.request.Request(outer.upstream + self.path.removeprefix("/v1"), data=body,
                                                     headers=headers, method=self.command)
                    try:
                        with urllib.request.urlopen(request, timeout=30) as answer:
                            status, payload, answer_headers = answer.status, answer.read(), answer.headers
                    except urllib.error.HTTPError as exc:
                        status, payload, answer_headers = exc.code, exc.read(), exc.headers
                finally:
                    with outer.lock:
                        outer.in_flight -= 1
                self.send_response(status)
                for k, v in answer_headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _spec(base_url: str, max_in_flight: int, fixtures: list[str], repeats: int = 1) -> dict:
    # The judge is served by the same server and declares no limits of its own: the tested model's
    # entry is the only place the server's slot count is written.
    return {
        "name": "slow local server (simulated)",
        "models": [{"provider": "sim", "model": "sim-slow", "base_url": base_url,
                    "limits": {"max_in_flight": max_in_flight}}],
        "judges": [{"provider": "sim", "model": "sim-judge", "base_url": base_url}],
        "fixtures": {"only": fixtures},
        "conditions": ["A", "B", "C", "D"],
        "repeats": repeats,
    }


def test_judges_on_the_tested_models_server_share_its_slots(tmp_path):
    """Two slots, max_in_flight 2: never a third request in flight, judge calls included; a P08 tool
    conversation keeps its slot for every round, so none is cut for want of one."""
    with SimServer(SimConfig()).start() as sim, SlotCountingServer(sim.base_url, delay_s=0.3) as server:
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump(_spec(server.base_url, 2, ["P02", "P03", "P04", "P08"])))
        proc = afpbench(["run", str(spec), "--json", "--threads", "8"], tmp_path, timeout=300)
    assert proc.returncode in (0, 3), proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["done"] == summary["cells"] == 16
    con = sqlite3.connect(tmp_path / "afpbench.db")
    try:
        p08 = con.execute("select a.outcome, a.error, a.rounds from attempt a join cell c on c.id = a.cell_id "
                          "where c.fixture_id = 'P08'").fetchall()
    finally:
        con.close()
    assert len(p08) == 4 and all(outcome == "answer" and error is None for outcome, error, _ in p08), p08
    assert all(len(json.loads(rounds)) >= 2 for _, _, rounds in p08), "calculator rounds, then the answer"
    judge_calls = sum(1 for _, model in server.started if model == "sim-judge")
    assert judge_calls >= 12, "every scored cell was judged through the same server"
    assert server.most <= 2, f"{server.most} requests in flight on a server with 2 slots"
    assert server.most == 2, "both slots were used"


def _sweep_id(db: Path, wait_s: float = 60) -> str:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if db.exists():
            con = sqlite3.connect(db)
            try:
                row = con.execute("select id from sweep").fetchone()
            except sqlite3.OperationalError:
                row = None
            finally:
                con.close()
            if row:
                return row[0]
        time.sleep(0.2)
    raise AssertionError("the run wrote no sweep")


def test_cancel_stops_a_running_run_and_its_judging(tmp_path):
    """`afpbench cancel` from a second process while a slow judge call is in flight: the run exits 4
    without waiting for it, nothing is sent after the cancel (execution nor judge), and every try that
    was sent is on record."""
    env = {**os.environ, "AFP_DATABASE_URL": f"sqlite:///{tmp_path / 'afpbench.db'}", "AFP_BROKER_URL": "memory://"}
    slow_judge_s = 40.0
    with SimServer(SimConfig()).start() as sim, \
            SlotCountingServer(sim.base_url, delay_s=0.3, delays={"sim-judge": slow_judge_s}) as server:
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump(_spec(server.base_url, 1, ["P02", "P08"], repeats=2)))
        run = subprocess.Popen([sys.executable, "-m", "afpbench.api.cli", "run", str(spec), "--threads", "4"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            sweep = _sweep_id(tmp_path / "afpbench.db")
            deadline = time.monotonic() + 60
            while not any(m == "sim-judge" for _, m in server.started) and time.monotonic() < deadline:
                time.sleep(0.1)  # cancel once judging has begun: a slow judge call is in flight
            assert run.poll() is None, run.communicate()
            cancel = afpbench(["cancel", sweep], tmp_path)
            cancelled_at = time.time()
            assert cancel.returncode == 0 and "cancelled" in cancel.stdout, cancel.stderr
            _, stderr = run.communicate(timeout=60)
            exited_after = time.time() - cancelled_at
        finally:
            if run.poll() is None:
                run.kill()
        late = [(round(t - cancelled_at, 2), m) for t, m in server.started if t > cancelled_at]
    assert run.returncode == 4, stderr
    assert f"sweep {sweep} was cancelled" in stderr and f"afpbench resume {sweep}" in stderr, stderr
    assert exited_after < slow_judge_s / 2, f"run took {exited_after:.1f} s to stop after the cancel"
    assert late == [], f"requests started after the cancel: {late}"
    con = sqlite3.connect(tmp_path / "afpbench.db")
    try:
        status = con.execute("select status from sweep").fetchone()[0]
        attempts = con.execute("select outcome, error from attempt").fetchall()
        phases = dict(con.execute("select phase, count(*) from cell group by phase").fetchall())
        owners = con.execute("select lease_owner from cell where lease_owner is not null").fetchall()
    finally:
        con.close()
    assert status == "cancelled" and sum(n for p, n in phases.items() if p != "done") > 0, phases
    assert "scoring" not in phases and "executing" not in phases, f"cells left held: {phases} {owners}"
    # No try is left "started": each was answered, not sent (with the reason), or abandoned in flight.
    assert attempts and all(outcome != "started" for outcome, _ in attempts), attempts
    for outcome, error in attempts:
        if outcome in ("interrupted", "not_sent"):
            assert "cancel" in (error or ""), (outcome, error)


def test_a_server_slower_than_timeout_s_is_infra_error_with_the_reason_never_a_model_failure(tmp_path):
    """A long prompt read slowly by the server is a timeout: INFRA_ERROR naming it, out of the denominator."""
    with SimServer(SimConfig()).start() as sim, SlotCountingServer(sim.base_url, delay_s=2.5) as server:
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump({
            "name": "slower than its timeout (simulated)", "judges": [], "fixtures": {"only": ["P02"]},
            "conditions": ["D"], "models": [{"provider": "sim", "model": "sim-slow", "base_url": server.base_url,
                                             "timeout_s": 1, "limits": {"max_in_flight": 1}}]}))
        proc = afpbench(["run", str(spec), "--json"], tmp_path, env={"AFP_MAX_ATTEMPTS": "2"}, timeout=120)
    assert proc.returncode == 3 and "INFRA_ERROR" in proc.stderr, proc.stderr
    con = sqlite3.connect(tmp_path / "afpbench.db")
    try:
        state, reason = con.execute("select state, state_reason from cell").fetchone()
        errors = [e for (e,) in con.execute("select error from attempt order by id")]
    finally:
        con.close()
    assert state == "INFRA_ERROR" and "read timeout after 1s" in reason, reason
    assert len(errors) == 2 and all("read timeout after 1s" in e for e in errors), errors
    assert json.loads(proc.stdout)["pass_rate_by_condition"]["D"]["n"] == 0


def test_a_wait_for_the_shared_slot_is_never_a_failed_scoring_try(tmp_path):
    """Rule: the shipped local-model example's shape (a slow server, one slot, the judge sharing it): a
    judge call that waits past AFP_SLOT_WAIT_S for the slot gives its thread back and waits again; the
    wait is not a failed try (before: each such wait was a "judge unavailable" try, and a cell with its
    scoring tries spent that way ended INFRA_ERROR with no judge call made)."""
    # Each call holds the one slot for 1 s and a waiting call gives up after 0.1 s: any two calls that meet
    # make a wait, however busy the machine is (at 0.3 s against 0.2 s a busy machine could show none).
    env = {"AFP_SLOT_WAIT_S": "0.1", "AFP_MAX_ATTEMPTS": "2", "AFP_LOG_LEVEL": "INFO"}
    with SimServer(SimConfig()).start() as sim, SlotCountingServer(sim.base_url, delay_s=1.0) as server:
        spec = tmp_path / "s.yaml"
        spec.write_text(yaml.safe_dump(_spec(server.base_url, 1, ["P02", "P03", "P04"])))
        proc = afpbench(["run", str(spec), "--json", "--threads", "6"], tmp_path, env=env, timeout=300)
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["done"] == summary["cells"] == 12
    con = sqlite3.connect(tmp_path / "afpbench.db")
    try:
        unavailable = con.execute("select count(*) from judgement where parse_error like 'judge unavailable%'")
        unavailable = unavailable.fetchone()[0]
        infra = con.execute("select state_reason from cell where state = 'INFRA_ERROR'").fetchall()
        judged = con.execute("select count(distinct cell_id) from judgement where parsed is not null").fetchone()[0]
        attempts = con.execute("select count(*) from attempt").fetchone()[0]
    finally:
        con.close()
    assert unavailable == 0 and infra == [], (unavailable, infra)
    waits = proc.stderr.count("scoring waits again (not a failed try)")
    assert waits > 0, "judges waited past AFP_SLOT_WAIT_S for the one slot (else this test shows nothing)"
    assert judged == 12 and attempts == 12, "every cell judged, one execution try each"
    assert server.most <= 1, f"{server.most} requests in flight on a server with 1 slot"
