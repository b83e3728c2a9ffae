"""Shared test plumbing: real services, each test run in its own PostgreSQL database and Redis db.

A test that needs a service skips with a visible reason when it is unreachable, and fails instead
when AFP_REQUIRE_SERVICES=1 (as .ci/run sets).
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest

from afpbench.workers.providers.key_policy import DEFAULT_KEY_VARIABLES

REPO = Path(__file__).resolve().parents[1]
PG_ADMIN_URL = os.environ.get("AFP_TEST_PG_ADMIN", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("AFP_TEST_REDIS", "redis://127.0.0.1:6379")
# The key variables the tests' specs name, allowed for the whole run (subprocesses inherit it) beside the
# defaults the example specs use: a spec may only name a variable on the AFP_KEY_VARS allow-list
# (workers/providers/key_policy.py).
TEST_KEY_VARIABLES = (*DEFAULT_KEY_VARIABLES, "AFP_TEST_KEY", "AFP_TEST_EXPORT_KEY", "AFP_CANARY_*", "AFP_UNIT_KEY",
                      "AFP_ABSENT_KEY", "AFP_REPLAY_TEST_KEY", "AFP_NOT_SET_ANYWHERE", "AFP_SEMANTICS_KEY",
                      "AFP_STRUCTURED_TEST_KEY", "AFP_T_KEY", "AFP_BUDGET_KEY")
os.environ.setdefault("AFP_KEY_VARS", ",".join(TEST_KEY_VARIABLES))
# Starlette's TestClient names its host "testserver": the HTTP server answers only the Host names it is
# configured for (api/http/hosts.py), like Django's test client's ALLOWED_HOSTS.
os.environ.setdefault("AFP_ALLOWED_HOSTS", "testserver")
# No prepared-fixture cache (workers/sweeps/prepared_cache.py) unless a test asks for one: tests that count
# parses or gate calls must see them, and no test may read what an earlier run (or the user) left in ~/.cache.
os.environ.setdefault("AFP_CACHE_DIR", "off")
# One Redis database per test process (1-15), so concurrent test runs on one machine never share queues.
REDIS_TEST_DB = int(os.environ.get("AFP_TEST_REDIS_DB", str(1 + os.getpid() % 15)))


def interruptible() -> None:
    """`preexec_fn` for a process a test sends Ctrl-C (SIGINT): it starts with SIGINT's default action, as
    from a terminal. A test run started in the background by a shell without job control (`pytest &`,
    `nohup`) has SIGINT ignored; every child would inherit that, and Python installs no KeyboardInterrupt
    handler for an ignored SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def need(service: str, reason: str) -> None:
    if os.environ.get("AFP_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{service} is required (AFP_REQUIRE_SERVICES=1) but unavailable: {reason}")
    pytest.skip(f"{service} unavailable: {reason}")


@pytest.fixture(scope="session")
def redis_url() -> str:
    import redis

    url = f"{REDIS_URL}/{REDIS_TEST_DB}"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        client.ping()
        client.flushdb()
    except Exception as exc:  # noqa: BLE001
        need("Redis", str(exc))
    return url


@pytest.fixture
def fresh_redis(redis_url: str) -> str:
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    return redis_url


@pytest.fixture
def postgres_url() -> str:
    """A brand-new PostgreSQL database for one test, dropped afterwards."""
    import psycopg

    name = f"afptest_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except Exception as exc:  # noqa: BLE001
        need("PostgreSQL", str(exc))
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    yield f"{base}/{name}"
    from afpbench.workers.store.db import dispose_engines

    dispose_engines()
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'afpbench.db'}"


@pytest.fixture
def settings_env(monkeypatch):
    """Point the process-wide settings at given URLs (clears caches before and after)."""
    from afpbench.workers import settings
    from afpbench.workers.limits import shared as limiter
    from afpbench.workers.store.db import dispose_engines

    def apply(**env: str):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        settings.get_settings.cache_clear()
        dispose_engines()
        limiter.reset_limiter()
        return settings.get_settings()

    yield apply
    settings.get_settings.cache_clear()
    dispose_engines()
    limiter.reset_limiter()
