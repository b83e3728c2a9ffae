"""Fixtures for the reliability tests: private servers that may be killed, the simulator with latency
(so kills land mid-call), and a worker fleet that is always torn down."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer
from tests.conftest import need
from tests.reliability.fleet import WorkerFleet
from tests.reliability.services import PrivatePostgres, PrivateRedis, ServiceUnavailable

# 50-200 ms per simulated call: long enough that a SIGKILL usually finds calls in flight.
SIM_LATENCY = FaultConfig(latency_ms=50, latency_jitter_ms=150)


@pytest.fixture(scope="session")
def private_pg() -> Iterator[PrivatePostgres]:
    """One private PostgreSQL cluster for the session (fsync off: fast); tests make their own database."""
    try:
        server = PrivatePostgres().start()
    except ServiceUnavailable as exc:
        need("private PostgreSQL", str(exc))
    yield server
    server.__exit__()


def new_database(server: PrivatePostgres) -> str:
    name = f"afprel_{uuid.uuid4().hex[:10]}"
    admin = server.url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server.url.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
def reliability_db(private_pg: PrivatePostgres) -> str:
    return new_database(private_pg)


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    try:
        server = PrivateRedis(tmp_path).start()
    except ServiceUnavailable as exc:
        need("redis-server", str(exc))
    yield server
    server.kill()


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer(SimConfig(faults=SIM_LATENCY)).start() as server:
        yield server


@pytest.fixture
def fleet_factory(tmp_path: Path):
    fleets: list[WorkerFleet] = []

    def make(env: dict[str, str], concurrency: int = 8) -> WorkerFleet:
        fleet = WorkerFleet(env, tmp_path, concurrency=concurrency)
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.stop_all()
