"""RabbitMQ as the broker, with the shared Redis limiter (issue #38, item 4 and its acceptance).

A distributed sweep on amqp:// with two real `afpbench worker` processes and a declared rate keeps the
declared rate at the model, not twice it: every request's arrival time is taken at the test's model
server, and no window holds more requests than the rate and the burst allow (with slack for clock
edges). Without AFP_REDIS_URL, a worker on RabbitMQ refuses to start (each would count the limits alone).
Each test gets a RabbitMQ vhost of its own (other test runs share the broker), deleted afterwards.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest
import yaml
from sqlalchemy import create_engine, text

from tests.conftest import REPO, need
from tests.e2e.test_cli_errors import one_line_error, row_count
from tests.faults import fault_server as fs
from tests.faults.harness import http_model
from tests.integration.workers_helper import running_workers, service_env

pytestmark = pytest.mark.integration

RATE_PER_MIN = 120  # two requests a second across the whole pool
BURST = 2
WINDOW_S = 4.0


def _rabbitmqctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["rabbitmqctl", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture
def amqp_url():
    """amqp:// on a vhost of this test's own (guest may use it), deleted afterwards."""
    vhost = f"afptest_{uuid.uuid4().hex[:10]}"
    try:
        made = _rabbitmqctl("add_vhost", vhost)
    except (OSError, subprocess.TimeoutExpired) as exc:
        need("RabbitMQ (rabbitmqctl)", str(exc))
    if made.returncode != 0:
        need("RabbitMQ (rabbitmqctl)", made.stderr.strip()[-300:])
    try:
        _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*").check_returncode()
        yield f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    finally:
        _rabbitmqctl("delete_vhost", vhost)


def _busiest_window(times: list[float], window_s: float) -> int:
    """The most arrivals in any window of `window_s` seconds that starts at an arrival."""
    times = sorted(times)
    return max(sum(1 for t in times[i:] if t < start + window_s) for i, start in enumerate(times))


def test_two_workers_on_rabbitmq_keep_the_declared_rate(amqp_url, fresh_redis, postgres_url, tmp_path):
    """Rule: with a RabbitMQ broker and AFP_REDIS_URL, N workers share one limiter: the model sees the
    declared rate, not N times it (before: each worker kept its own limiter, and 2 workers sent 2x)."""
    with fs.FaultServer({"limited": fs.answer()}) as server:
        model = http_model("limited", server.base_url("limited"),
                           limits={"requests_per_min": RATE_PER_MIN, "burst": BURST})
        spec = {"name": "rabbitmq rate", "models": [model], "judges": [], "repeats": 2,
                "fixtures": {"only": ["P01", "P02", "P03", "P04"]}, "conditions": ["A", "B", "C", "D"]}
        (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
        env = service_env(postgres_url, amqp_url, AFP_REDIS_URL=fresh_redis)
        with running_workers(env, ["rmq1", "rmq2"], tmp_path, concurrency=4):
            proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", str(tmp_path / "spec.yaml"),
                                   "--json"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
        assert proc.returncode == 0, proc.stderr[-2000:] + logs[-3000:]
        arrivals = [s.at for s in server.requests_for("limited")]
    summary = json.loads(proc.stdout)
    assert summary["done"] == summary["cells"] == 32 and len(arrivals) >= 32
    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        workers = conn.execute(text("select count(distinct split_part(worker, '@', 1)) from attempt")).scalar()
    engine.dispose()
    assert workers == 2, "both worker processes called the model"
    allowed = RATE_PER_MIN / 60 * WINDOW_S + BURST
    busiest = _busiest_window(arrivals, WINDOW_S)
    # 2x the rate would put ~16 requests in a 4 s window; the declared rate allows 8 + the burst of 2.
    assert busiest <= allowed + 1, f"{busiest} requests in {WINDOW_S} s; the declared rate allows {allowed}"


def test_a_worker_on_rabbitmq_without_a_shared_limiter_refuses_to_start(amqp_url, tmp_path):
    """Rule: on a non-Redis broker a worker needs AFP_REDIS_URL: without it, one line naming the setting,
    exit 2, before it connects (it would count the declared limits on its own)."""
    env = service_env(f"sqlite:///{tmp_path / 'afpbench.db'}", amqp_url)
    env.pop("AFP_REDIS_URL", None)
    proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "worker", "--concurrency=1"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=60)
    line = one_line_error(proc)
    assert proc.returncode == 2 and "AFP_REDIS_URL" in line and "amqp://" in line, line


def test_a_sweep_declaring_limits_on_rabbitmq_without_a_shared_limiter_is_refused(amqp_url, tmp_path):
    """Rule: `afpbench run` of a sweep whose model declares limits, on RabbitMQ without AFP_REDIS_URL, is
    refused before anything is written: one line naming the model and AFP_REDIS_URL, exit 2."""
    spec = {"name": "limited", "models": [{"provider": "sim", "model": "sim-1", "label": "capped",
                                           "limits": {"max_in_flight": 1}}], "judges": []}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    env = service_env(f"sqlite:///{tmp_path / 'afpbench.db'}", amqp_url)
    env.pop("AFP_REDIS_URL", None)
    proc = subprocess.run([sys.executable, "-m", "afpbench.api.cli", "run", str(tmp_path / "spec.yaml")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    line = one_line_error(proc)
    assert proc.returncode == 2 and "AFP_REDIS_URL" in line and "capped" in line, line
    assert row_count(tmp_path / "afpbench.db") == 0
