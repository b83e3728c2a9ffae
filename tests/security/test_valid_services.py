"""Our own broker and database are checked before anything is written or consumed (issue #15, item 8).

Replayed holes: `afpbench run` in distributed mode with an unreachable broker wrote the sweep and its
cells, exited 1, and the reconciler ran them later; with an unreachable database it failed with an
"unexpected" error after the broker check it never made; `afpbench worker` with a wrong database URL
or a dead broker started anyway (consuming messages it could not record, or retrying the broker for
ever); the HTTP API wrote the sweep and then failed on the broker. Everything runs as real
subprocesses (`afpbench run`, `afpbench worker`, `afpbench serve`) against the local Redis and
PostgreSQL.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import redis
import requests
import yaml

from afpbench.workers.celery_app import QUEUES
from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import REPO
from tests.e2e.test_cli_errors import afpbench, one_line_error, row_count
from tests.serving import serve_process

DEAD_BROKER = "redis://127.0.0.1:1/0"
SPEC = {"name": "services check", "models": [{"provider": "sim", "model": "sim-1"}], "judges": [],
        "conditions": ["A"], "fixtures": {"only": ["P01"]}}
WORKER_START_S = 30.0  # a refusal takes a few seconds of imports; a worker that starts never exits


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spec(tmp_path: Path) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    return path


def _pg_rows(url: str) -> int:
    """Rows in every table of the database (0 also when no table was created)."""
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        tables = [r[0] for r in conn.execute(
            "select table_name from information_schema.tables where table_schema = 'public'")]
        return sum(conn.execute(f'select count(*) from "{t}"').fetchone()[0] for t in tables)


def test_run_with_an_unreachable_broker_writes_nothing_to_sqlite(tmp_path):
    """Rule: an unreachable broker is found before anything is written: one line naming the broker,
    exit 2, zero rows (before: sweep and cells written, exit 1, run later by the reconciler)."""
    proc = afpbench(["run", str(_spec(tmp_path))], tmp_path, env={"AFP_BROKER_URL": DEAD_BROKER})
    line = one_line_error(proc)
    assert proc.returncode == 2, line
    assert "broker" in line and "127.0.0.1:1" in line and "AFP_BROKER_URL" in line, line
    assert row_count(tmp_path / "afpbench.db") == 0


def test_run_with_an_unreachable_broker_writes_nothing_to_postgresql(tmp_path, postgres_url):
    """Rule: the same on PostgreSQL: no sweep, no cell, no row of any table."""
    proc = afpbench(["run", str(_spec(tmp_path))], tmp_path,
                    env={"AFP_BROKER_URL": DEAD_BROKER, "AFP_DATABASE_URL": postgres_url})
    line = one_line_error(proc)
    assert proc.returncode == 2 and "broker" in line, line
    assert _pg_rows(postgres_url) == 0


def test_run_with_an_unreachable_database_sends_nothing_to_the_broker(tmp_path, fresh_redis):
    """Rule: an unreachable database is a one-line error naming it (exit 2, not an 'unexpected'
    exception), found before a message reaches the broker."""
    dead_db = f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/afpbench"
    proc = afpbench(["run", str(_spec(tmp_path))], tmp_path,
                    env={"AFP_BROKER_URL": fresh_redis, "AFP_DATABASE_URL": dead_db})
    line = one_line_error(proc)
    assert proc.returncode == 2, line
    assert "database" in line and "does not answer" in line and "unexpected" not in line, line
    client = redis.Redis.from_url(fresh_redis)
    assert sum(client.llen(queue) for queue in QUEUES) == 0, "a message reached the broker"


@pytest.mark.parametrize("command", [["status", "1"], ["show", "1"], ["report", "1"], ["verify", "1"],
                                     ["export", "1", "bundle"], ["db", "current"]])
def test_read_commands_with_an_unreachable_database_say_so_in_one_line(tmp_path, command):
    """Rule: `status` and the other read commands report a database that does not answer in one line
    naming it, exit 2 (README "Exit status"; before: "unexpected OperationalError", exit 1)."""
    dead_db = f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/afpbench"
    proc = afpbench(command, tmp_path, env={"AFP_DATABASE_URL": dead_db})
    line = one_line_error(proc)
    assert proc.returncode == 2, line
    assert "database" in line and "does not answer" in line and "AFP_DATABASE_URL" in line, line
    assert "unexpected" not in line and "Traceback" not in proc.stderr


def _env(broker: str, database: str, redis: str | None = None) -> dict[str, str]:
    env = {**os.environ, "AFP_BROKER_URL": broker, "AFP_DATABASE_URL": database, "AFP_LOG_LEVEL": "WARNING"}
    return {**env, "AFP_REDIS_URL": redis} if redis else env


SENTINEL = "afpbench-test-valid-services-sentinel"


def _queue_one_message(broker: str, database: str) -> redis.Redis:
    """A real task message on the control queue, sent the way afpbench sends them, beside a sentinel
    key that tells whether the Redis database stayed ours (test runs on one machine share the numbered
    databases, and another run's flush would look like a consumed message)."""
    code = "from afpbench.workers.celery_app import RECONCILE, send; send(RECONCILE, [], 'control')"
    subprocess.run([sys.executable, "-c", code], env=_env(broker, database), cwd=REPO, check=True, timeout=60)
    client = redis.Redis.from_url(broker)
    client.set(SENTINEL, "1")
    assert client.llen("control") == 1
    return client


def _queued(client: redis.Redis) -> int:
    if not client.exists(SENTINEL):
        pytest.skip("another test run flushed this Redis database meanwhile; the queue cannot be judged")
    return client.llen("control")


def _start_worker(broker: str, database: str, redis: str | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """`afpbench worker` as a subprocess; (its outcome, seconds until it exited). A worker that keeps
    running past WORKER_START_S is stopped and reported as still running (returncode None)."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "afpbench.api.cli", "worker", "--queues", "control",
                             "--concurrency", "1"], cwd=REPO, env=_env(broker, database, redis),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=WORKER_START_S)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        code = None
    return subprocess.CompletedProcess(proc.args, code, out, err), time.monotonic() - started


def test_a_worker_with_an_unreachable_database_refuses_to_start(fresh_redis):
    """Rule: a worker whose database does not answer refuses to start with one line naming the
    database and a non-zero exit, within seconds, and leaves the queued message alone (before: it
    started and consumed messages it could not record)."""
    dead_db = f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/afpbench"
    client = _queue_one_message(fresh_redis, dead_db)
    proc, took = _start_worker(fresh_redis, dead_db)
    assert proc.returncode is not None, f"the worker started: {proc.stderr[-2000:]}"
    line = one_line_error(proc)
    assert proc.returncode == 2 and "database" in line and "does not answer" in line, line
    assert took < WORKER_START_S
    assert _queued(client) == 1, "the worker took a message before refusing"


def test_a_worker_with_an_unreachable_broker_refuses_to_start(tmp_path):
    """Rule: a worker whose broker does not answer refuses to start (before: Celery retried the
    connection for ever)."""
    proc, _ = _start_worker(DEAD_BROKER, f"sqlite:///{tmp_path / 'afpbench.db'}")
    assert proc.returncode is not None, f"the worker kept running: {proc.stderr[-2000:]}"
    line = one_line_error(proc)
    assert proc.returncode == 2 and "broker" in line and "127.0.0.1:1" in line, line


@pytest.mark.parametrize("broker", ["kafka://127.0.0.1:9092", "foo://x", "127.0.0.1:6379"])
@pytest.mark.parametrize("command", [["worker", "--concurrency=1"], ["run"]])
def test_an_unsupported_broker_is_named_with_the_supported_ones(tmp_path, broker, command):
    """Rule: a broker scheme afpbench does not support is one line naming it and the supported schemes,
    exit 2, nothing written (before: "unexpected NameError / KeyError", exit 1)."""
    args = [*command, str(_spec(tmp_path))] if command == ["run"] else command
    proc = afpbench(args, tmp_path, env={"AFP_BROKER_URL": broker, "AFP_REDIS_URL": "redis://127.0.0.1:1/0"})
    line = one_line_error(proc)
    assert proc.returncode == 2, line
    assert "unsupported broker" in line and "redis://" in line and "amqp://" in line, line
    assert row_count(tmp_path / "afpbench.db") == 0


@pytest.mark.parametrize("vhost", ["", "afptest_no_such_vhost"])
def test_a_refused_rabbitmq_login_is_named(tmp_path, vhost):
    """Rule: RabbitMQ refusing the login (a wrong password, an unknown vhost) is one line saying the
    broker refused it, its password hidden, exit 2 (before: "unexpected AccessRefused", exit 1)."""
    broker = f"amqp://guest:wrong-password@127.0.0.1:5672/{vhost}" if not vhost else \
        f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    proc, _ = _start_worker(broker, f"sqlite:///{tmp_path / 'afpbench.db'}", redis="redis://127.0.0.1:1/0")
    line = one_line_error(proc)
    if "does not answer" in line:
        pytest.skip(f"RabbitMQ unavailable: {line}")
    assert proc.returncode == 2 and "refused the login" in line and "AFP_BROKER_URL" in line, line
    assert "wrong-password" not in proc.stdout + proc.stderr


def test_a_worker_whose_schema_is_behind_refuses_to_start(fresh_redis, postgres_url):
    """Rule: a worker on a database whose schema is behind the code refuses to start and says to run
    `afpbench db upgrade`; the queued message stays queued. (This one held before the change too; it
    guards the new start-up check against swallowing it.)"""
    from afpbench.workers.store.migrate import upgrade

    upgrade(postgres_url)
    with psycopg.connect(postgres_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        conn.execute("delete from alembic_version")  # tables present, no revision: behind the code
    client = _queue_one_message(fresh_redis, postgres_url)
    proc, _ = _start_worker(fresh_redis, postgres_url)
    assert proc.returncode is not None, f"the worker started: {proc.stderr[-2000:]}"
    line = one_line_error(proc)
    assert proc.returncode == 2 and "afpbench db upgrade" in line, line
    assert _queued(client) == 1


def test_the_api_refuses_a_sweep_while_the_broker_is_unreachable_and_writes_nothing(tmp_path):
    """Rule: over the HTTP API too (a real `afpbench serve`), an unreachable broker is found before the
    sweep is written: 503 naming the broker, no sweep and no cell row (before: the sweep and its cells
    were written and the request failed afterwards)."""
    token, db = "valid-services-token-5c2f", tmp_path / "afpbench.db"
    env = {**_env(DEAD_BROKER, f"sqlite:///{db}"), "AFP_API_TOKEN": token}
    with SimServer(SimConfig(faults=FaultConfig())).start(), \
            serve_process(env, tmp_path / "serve.log", cwd=tmp_path, ready_within_s=60, healthy_only=False) as served:
        # No base_url: the server's AFP_SIM_URL (an API spec may not name other addresses by default).
        body = {**SPEC, "models": [{"provider": "sim", "model": "sim-1"}]}
        response = requests.post(f"{served.base}/sweeps", json=body, timeout=30,
                                 headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 503, response.text
    assert "broker" in response.json()["detail"] and "127.0.0.1:1" in response.json()["detail"]
    con = sqlite3.connect(db)
    try:
        assert con.execute("select count(*) from sweep").fetchone()[0] == 0
        assert con.execute("select count(*) from cell").fetchone()[0] == 0
    finally:
        con.close()
