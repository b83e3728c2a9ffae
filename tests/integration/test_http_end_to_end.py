"""The HTTP API end to end: `afpbench serve` (real uvicorn process) on PostgreSQL and a Redis broker,
two real `afpbench worker` processes, a simulated model. Everything goes through HTTP with the token.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests

from afpbench.api.http.app import create_app, route_table
from afpbench.api.http.door import PUBLIC_PATHS
from afpbench.workers.limits.base import Limits
from afpbench.workers.limits.in_redis import RedisLimiter
from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.integration.workers_helper import running_workers, service_env
from tests.serving import free_port, serve_process

pytestmark = pytest.mark.integration

# The demo sweep (every pilot fixture x A-D, simulated model and judge) posted as JSON; the sim models
# name no base_url, so workers reach the simulator at AFP_SIM_URL.
SIM = {"provider": "sim", "model": "sim-1", "label": "sim (simulated)"}
DEMO_LIKE = {"name": "demo over HTTP (simulated)", "models": [SIM],
             "judges": [{**SIM, "label": "sim-judge (simulated)"}]}


@contextmanager
def serving(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """`afpbench serve` on a free loopback port; yields its base URL."""
    with serve_process(env, log_path) as served:
        yield served.base


def wait_until_finished(api: requests.Session, base: str, sweep_id: str, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        detail = api.get(f"{base}/sweeps/{sweep_id}", timeout=10).json()
        if detail["finished"]:
            return detail
        assert time.monotonic() < deadline, f"sweep not finished in {timeout_s} s: {detail}"
        time.sleep(0.5)


def test_demo_sweep_through_the_http_api(postgres_url, fresh_redis, tmp_path):
    token = secrets.token_urlsafe(24)
    with SimServer(SimConfig(faults=FaultConfig())).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url, AFP_API_TOKEN=token)
        with running_workers(env, ["h1", "h2"], tmp_path), serving(env, tmp_path / "serve.log") as base:
            api = requests.Session()
            api.headers["Authorization"] = f"Bearer {token}"
            _check_every_route_needs_the_token(base)

            created = api.post(f"{base}/sweeps", json=DEMO_LIKE, timeout=60)
            assert created.status_code == 201, created.text
            sweep_id, seal = created.json()["id"], created.json()["seal"]
            assert re.fullmatch(r"[0-9a-f]{64}", seal) and created.json()["cells"] == 56

            detail = wait_until_finished(api, base, sweep_id)
            assert detail["total"] == detail["done"] == 56 and sum(detail["states"].values()) == 56
            assert detail["seal"] == seal and detail["simulated"] is True

            page = api.get(f"{base}/sweeps/{sweep_id}/cells?limit=20&offset=40", timeout=10).json()
            assert page["total"] == 56 and len(page["items"]) == 16
            only_c = api.get(f"{base}/sweeps/{sweep_id}/cells?condition=C&limit=500", timeout=10).json()
            assert only_c["total"] == 14 and {c["condition"] for c in only_c["items"]} == {"C"}

            cell_id = page["items"][0]["id"]
            record = api.get(f"{base}/cells/{cell_id}", timeout=10).json()
            assert record["cell_id"] == cell_id and record["seal_hash"] == seal
            assert record["simulated"]["model_output"] is True, "simulated output is labelled"

            disputes = api.get(f"{base}/adjudications", params={"sweep": sweep_id}, timeout=10).json()
            assert disputes["total"] == detail["states"].get("GRADER_DISPUTE", 0)
            # A dispute if the sim produced one; else a human override of a scored cell (the same path).
            passed = api.get(f"{base}/sweeps/{sweep_id}/cells?state=MODEL_PASS&limit=1", timeout=10).json()
            target = (disputes["items"] or passed["items"])[0]
            _decide(api, base, sweep_id, target.get("cell_id") or target["id"], disputed=bool(disputes["items"]))

            report = api.get(f"{base}/sweeps/{sweep_id}/report", params={"format": "json"}, timeout=60)
            assert report.status_code == 200, report.text
            summary = report.json()
            assert summary["sweep_id"] == sweep_id and summary["simulated"] is True and summary["cells"] == 56
            html = api.get(f"{base}/sweeps/{sweep_id}/report", params={"format": "html"}, timeout=60)
            assert html.headers["content-type"].startswith("text/html") and "simulated" in html.text.lower()

            # A lease held in the global limiter shows as in flight for its pool.
            RedisLimiter(fresh_redis).acquire("sim|http://e2e.invalid/v1|nokey", Limits(max_in_flight=2))
            metrics = api.get(f"{base}/metrics", timeout=10).text
            assert f'afpbench_cells{{sweep="{sweep_id}",phase="done"' in metrics
            assert 'afpbench_queue_depth{queue="exec.sim"}' in metrics
            assert 'afpbench_source_up{source="broker"} 1' in metrics
            assert 'afpbench_pool_in_flight{pool="sim|http://e2e.invalid/v1|nokey"} 1' in metrics

            # Values PostgreSQL cannot take (NUL) or hold (huge ints) are bad input, never a 500.
            for path in ("/sweeps/a%00b", f"/sweeps/{sweep_id}/cells?model=a%00b", "/cells/99999999999"):
                assert api.get(base + path, timeout=10).status_code in (404, 422), path
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert token not in logs, "the API token never reaches a log"


def _check_every_route_needs_the_token(base: str) -> None:
    """Auth: every route of create_app() but /healthz and the public docs answers 401 without the token or
    with a wrong one."""
    routes = route_table(create_app(runtime=False))
    assert len(routes) >= 14
    for path, methods in routes:
        if path.startswith("/view"):
            continue  # the viewer signs in with a cookie, not the header: tests/unit/api/viewer/test_viewer.py
        url = base + re.sub(r"\{[^}]+\}", "1", path)
        for method in methods - {"HEAD"}:
            for headers in ({}, {"Authorization": "Bearer not-the-token"}):
                response = requests.request(method, url, headers=headers, timeout=10)
                expected = 200 if path in PUBLIC_PATHS else 401
                assert response.status_code == expected, (method, path, response.status_code, response.text)


def _decide(api: requests.Session, base: str, sweep_id: str, cell_id: int, disputed: bool) -> None:
    """A human decision must resolve the cell; it is added as a row and the cell's state follows it.
    A cell that is not disputed is decided only as an explicit override with a reason."""
    before = api.get(f"{base}/sweeps/{sweep_id}", timeout=10).json()["states"]
    refused = api.post(f"{base}/adjudications/{cell_id}", timeout=30,
                       json={"reviewer": "e2e", "state": "GRADER_DISPUTE", "note": "cannot stay disputed",
                             "override": True, "reason": "test"})
    assert refused.status_code == 422 and "GRADER_DISPUTE" in refused.text, refused.text
    decision = {"reviewer": "e2e reviewer", "state": "MODEL_FAIL", "fatal_criterion": "fabricated_fact",
                "note": "end-to-end test decision on simulated output"}
    if not disputed:
        plain = api.post(f"{base}/adjudications/{cell_id}", json=decision, timeout=30)
        assert plain.status_code == 422 and "not GRADER_DISPUTE" in plain.text, plain.text
        decision |= {"override": True, "reason": "end-to-end override of a judged pass"}
    recorded = api.post(f"{base}/adjudications/{cell_id}", json=decision, timeout=60)
    assert recorded.status_code == 201, recorded.text
    assert recorded.json()["state"] == "MODEL_FAIL"
    left = api.get(f"{base}/adjudications", params={"sweep": sweep_id}, timeout=10).json()
    assert cell_id not in [d["cell_id"] for d in left["items"]]
    record = api.get(f"{base}/cells/{cell_id}", timeout=10).json()
    assert record["result_state"] == "MODEL_FAIL"
    assert [h["reviewer"] for h in record["human_review_outcome"]] == ["e2e reviewer"]
    assert len(record["results"]) >= 2, "the earlier result stays as history"
    after = api.get(f"{base}/sweeps/{sweep_id}", timeout=10).json()["states"]
    assert after["MODEL_FAIL"] == before["MODEL_FAIL"] + 1 and sum(after.values()) == sum(before.values())


def test_serve_refuses_a_public_address_without_a_token(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AFP_API_TOKEN"}
    env["AFP_DATABASE_URL"] = f"sqlite:///{tmp_path / 'unused.db'}"
    proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "serve", "--host", "0.0.0.0", "--port",
                           str(free_port())], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "AFP_API_TOKEN" in proc.stderr
