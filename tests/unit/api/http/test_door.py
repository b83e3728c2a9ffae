"""The door under load and from other sites (api/http/door.py): the in-flight bound answers 503 with
Retry-After before any work, /healthz is never refused, a wrong Host or a foreign Origin is refused before
the app sees the request; a pool timeout is a 503, never a 500 (api/http/app.py)."""

from __future__ import annotations

import asyncio

from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from afpbench.api.http.app import create_app
from afpbench.api.http.door import Door
from afpbench.api.http.hosts import HostPolicy
from afpbench.workers.store import db

TOKEN = "door-unit-token"


class _Held:
    """A downstream app that keeps each request until released, and counts what reached it."""

    def __init__(self) -> None:
        self.entered = 0
        self.release = asyncio.Event()

    async def __call__(self, scope, receive, send) -> None:
        self.entered += 1
        if scope["path"] != "/healthz":
            await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def _scope(path: str, host: bytes = b"127.0.0.1:8000", method: str = "GET", **headers: bytes) -> dict:
    pairs = [(b"host", host), *[(k.replace("_", "-").encode(), v) for k, v in headers.items()]]
    return {"type": "http", "method": method, "path": path, "query_string": b"", "headers": pairs}


async def _call(door: Door, scope: dict) -> tuple[int, dict[bytes, bytes]]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await door(scope, receive, send)
    start = sent[0]
    return start["status"], dict(start["headers"])


def test_beyond_the_bound_a_request_is_503_with_retry_after_and_healthz_still_answers():
    """Acceptance (issue 38): the excess is refused 503 + Retry-After at once; liveness answers throughout."""
    async def scenario() -> None:
        app = _Held()
        door = Door(app, token=None, max_body_bytes=1024, hosts=HostPolicy.build(None), max_in_flight=2)
        held = [asyncio.create_task(_call(door, _scope("/sweeps"))) for _ in range(2)]
        while app.entered < 2:
            await asyncio.sleep(0)
        status, headers = await _call(door, _scope("/sweeps"))
        assert status == 503 and headers[b"retry-after"].isdigit() and app.entered == 2, "refused before the app"
        assert (await _call(door, _scope("/healthz")))[0] == 200
        app.release.set()
        assert [(await t)[0] for t in held] == [200, 200]
        assert (await _call(door, _scope("/sweeps")))[0] == 200, "room again once the held requests ended"
        assert door.in_flight == 0

    asyncio.run(scenario())


def test_a_wrong_host_is_refused_before_the_app_with_or_without_a_token():
    async def scenario() -> None:
        for token in (None, TOKEN.encode()):
            app = _Held()
            app.release.set()
            door = Door(app, token=token, max_body_bytes=1024, hosts=HostPolicy.build(None), max_in_flight=4)
            status, _ = await _call(door, _scope("/sweeps", host=b"evil.test:8000",
                                                 authorization=b"Bearer " + TOKEN.encode()))
            assert status == 400 and app.entered == 0
            assert (await _call(door, _scope("/readyz", host=b"10.1.2.3:8000")))[0] == 200, "probes: any Host"
            status, _ = await _call(door, _scope("/sweeps", method="POST", origin=b"http://evil.test",
                                                 authorization=b"Bearer " + TOKEN.encode()))
            assert status == 403 and app.entered == 1, "a cross-site write never reaches the app"

    asyncio.run(scenario())


def test_the_app_refuses_another_host_and_a_cross_site_decision(settings_env, sqlite_url):
    """Through the whole app: a rebound page's Host gets no data; a foreign Origin decides nothing."""
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN="")
    client = TestClient(create_app(runtime=False), base_url="http://127.0.0.1:8000")
    assert client.get("/sweeps").status_code == 200
    refused = client.get("/sweeps", headers={"Host": "evil.test:8000"})
    assert refused.status_code == 400 and "AFP_ALLOWED_HOSTS" in refused.json()["detail"]
    assert client.get("/view/", headers={"Host": "evil.test:8000"}).status_code == 400
    decision = {"reviewer": "x", "state": "MODEL_PASS", "note": "n"}
    cross = client.post("/adjudications/1", json=decision, headers={"Origin": "http://evil.test:8000"})
    assert cross.status_code == 403
    assert client.post("/adjudications/1", json=decision, headers={"Origin": "http://127.0.0.1:8000"}
                       ).status_code == 404, "same origin passes the door (and finds no such cell)"


def test_a_pool_timeout_is_503_with_retry_after_never_500(settings_env, sqlite_url):
    """No connection free within the pool timeout: the client is told to come back (a real QueuePool)."""
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN="")
    db.get_engine(sqlite_url)  # the schema, by the project's own engine
    tight = create_engine(sqlite_url, pool_size=1, max_overflow=0, pool_timeout=0.1)
    db._engines[sqlite_url] = tight  # the same database behind a pool of one
    try:
        with tight.connect():  # the only connection, taken
            response = TestClient(create_app(runtime=False)).get("/sweeps")
        assert response.status_code == 503 and response.headers["retry-after"].isdigit()
        assert "AFP_HTTP_POOL_TIMEOUT_S" in response.json()["detail"]
    finally:
        db.dispose_engines()
