"""Flower on the Redis broker, with basic auth, watching two real workers run a simulated sweep."""

from __future__ import annotations

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

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.integration.workers_helper import running_workers, service_env
from tests.serving import afpbench_http_process, free_port

pytestmark = pytest.mark.integration

SPEC = """\
name: flower check (simulated)
models: [{provider: sim, model: sim-1, label: "sim (simulated)"}]
judges: [{provider: sim, model: sim-1, label: "sim-judge (simulated)"}]
conditions: [A, B]
fixtures: {only: [P01, P02]}
"""


@contextmanager
def flower(env: dict[str, str], port: int, log_path: Path) -> Iterator[str]:
    with afpbench_http_process(["flower", f"--port={port}"], port, "/healthcheck", env, log_path,
                               ready_within_s=60, healthy_only=False) as served:
        yield served.base


def hears_flower(worker_log: Path) -> bool:
    """The worker obeyed Flower's enable_events broadcast (Celery logs it at INFO). Task events are off until
    asked for (workers/celery_app.py) and Flower asks every 5 s from its start: a sweep run before that shows
    its first tasks in Flower without names (on a fast day every execute task finished before it)."""
    return "Events of group {task} enabled by remote" in worker_log.read_text(errors="replace")


def poll(fetch, ok, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while True:
        value = fetch()
        if ok(value):
            return value
        assert time.monotonic() < deadline, f"gave up after {timeout_s} s; last answer: {value}"
        time.sleep(0.5)


def test_flower_sees_our_workers_and_execute_tasks(postgres_url, fresh_redis, tmp_path):
    user, password = "afp-ops", secrets.token_urlsafe(16)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    with SimServer(SimConfig(faults=FaultConfig())).start() as sim:
        env = service_env(postgres_url, fresh_redis, AFP_SIM_URL=sim.base_url,
                          AFP_FLOWER_USER=user, AFP_FLOWER_PASSWORD=password)
        with flower(env, free_port(), tmp_path / "flower.log") as base, \
                running_workers(env, ["fl1", "fl2"], tmp_path):
            auth = (user, password)
            assert requests.get(f"{base}/api/workers", timeout=10).status_code == 401, "basic auth is on"
            assert requests.get(f"{base}/api/workers", auth=(user, "wrong"), timeout=10).status_code == 401

            def names() -> set[str]:
                answer = requests.get(f"{base}/api/workers", params={"refresh": "1"}, auth=auth, timeout=20)
                assert answer.status_code == 200, answer.text
                return {n.split("@")[0] for n in answer.json()}

            poll(names, lambda seen: {"fl1", "fl2"} <= seen)

            poll(lambda: {n for n in ("fl1", "fl2") if hears_flower(tmp_path / f"{n}.log")},
                 lambda seen: seen == {"fl1", "fl2"})
            run = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", str(spec), "--json"], cwd=REPO,
                                 env=env, capture_output=True, text=True, timeout=300)
            assert run.returncode == 0, run.stderr

            def tasks() -> list[dict]:
                answer = requests.get(f"{base}/api/tasks", auth=auth, timeout=10)
                assert answer.status_code == 200, answer.text
                return list(answer.json().values())

            seen = poll(tasks, lambda ts: any(t.get("name") == "afpbench.execute" and t.get("worker") for t in ts))
            executed_on = {t["worker"].split("@")[0] for t in seen if t.get("name") == "afpbench.execute"}
            assert executed_on <= {"fl1", "fl2"} and executed_on
            # A task row names its cell (sweep/model/condition/fixture#repeat), not only the cell id.
            shown = [t.get("args") or "" for t in seen if t.get("name") == "afpbench.execute"]
            assert all(re.fullmatch(r"\(\d+,\) [0-9a-f]+/sim \(simulated\)/[AB]/P0[12]#r1", a) for a in shown), shown
    assert password not in (tmp_path / "flower.log").read_text(), "credentials stay out of the log"
