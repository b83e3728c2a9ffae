"""The HTTP API on SQLite through FastAPI's TestClient: auth, error shapes, paging, the embedded runtime.

Sweeps are created for real (validation, preflight against an in-process simulated model, seal, cell
rows, messages on the in-memory broker); only the last test runs a worker (the app's own lifespan).
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest
import typer
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from afpbench.api.cli_results import CommandError
from afpbench.api.cli_serve import flower_basic_auth, is_loopback, register
from afpbench.api.http.app import create_app, route_table
from afpbench.api.http.door import PUBLIC_PATHS
from afpbench.workers.sim.server import FaultConfig, SimConfig, SimServer

TOKEN = "unit-test-token-7f3a9c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SAMPLE_LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_]+="([^"\\]|\\.)*",?)*\})? -?[0-9.e+]+$')


@pytest.fixture(scope="module")
def sim():
    with SimServer(SimConfig(faults=FaultConfig())).start() as server:
        yield server


def _purge_memory_queues() -> None:
    from afpbench.workers.celery_app import QUEUES, app

    with app.connection_for_write() as conn:
        for queue in QUEUES:
            conn.default_channel.queue_purge(queue)


@pytest.fixture
def env(settings_env, sqlite_url, sim):
    settings = settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN=TOKEN, AFP_SIM_URL=sim.base_url)
    yield settings
    _purge_memory_queues()  # no worker here: drop the messages these tests enqueued


@pytest.fixture
def client(env):
    return TestClient(create_app(runtime=False))


def spec(sim_url: str, **overrides) -> dict:
    """P01 (one repeat) and high-risk P05 (three repeats) x conditions A, B: 8 cells, simulated model."""
    model = {"provider": "sim", "model": "sim-1", "label": "sim (simulated)", "base_url": sim_url}
    return {
        "name": "http unit (simulated)",
        "models": [model],
        "judges": [{**model, "label": "sim-judge (simulated)"}],
        "conditions": ["A", "B"],
        "fixtures": {"only": ["P01", "P05"]},
        **overrides,
    }


def create(client: TestClient, sim_url: str, **overrides) -> dict:
    response = client.post("/sweeps", json=spec(sim_url, **overrides), headers=AUTH)
    assert response.status_code == 201, response.text
    return response.json()


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "1", path)


def test_every_route_but_healthz_requires_the_bearer_token(client):
    """Auth: no token or a wrong one -> 401 on every route except /healthz and the public API description
    (/docs, /openapi.json: not secret); the token is never echoed."""
    routes = route_table(client.app)
    assert {"/sweeps", "/cells/{cell_id}", "/metrics", "/docs", "/openapi.json"} <= {p for p, _ in routes}
    for path, methods in routes:
        if path.startswith("/view"):
            continue  # the viewer signs in with a cookie, not the header: tests/unit/api/viewer/test_viewer.py
        for method in methods - {"HEAD"}:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}):
                response = client.request(method, _concrete(path), headers=headers)
                expected = 200 if path in PUBLIC_PATHS else 401
                assert response.status_code == expected, (method, path, headers, response.text)
                assert TOKEN not in response.text
    assert client.get("/openapi.json", headers=AUTH).json()["paths"]["/sweeps"]["post"]


def test_create_sweep_returns_id_and_seal_and_progress(client, sim):
    created = create(client, sim.base_url)
    assert re.fullmatch(r"[0-9a-f]{64}", created["seal"]) and created["cells"] == 8
    assert created["simulated"] is True
    detail = client.get(f"/sweeps/{created['id']}", headers=AUTH).json()
    assert detail["seal"] == created["seal"] and detail["total"] == 8 and detail["done"] == 0
    assert detail["phases"] == {"queued": 8} and detail["states"] == {} and detail["finished"] is False
    assert detail["status"] == "running" and detail["attempts"] == 0


def test_invalid_spec_is_422_with_field_level_messages_and_no_echo(client, sim):
    """Bad input -> 422 naming the field; a pasted key is refused and never sent back."""
    bad_provider = spec(sim.base_url, models=[{"provider": "nope", "model": "x"}])
    detail = client.post("/sweeps", json=bad_provider, headers=AUTH).json()["detail"]
    assert detail[0]["loc"] == ["body", "models", 0, "provider"] and "unknown provider" in detail[0]["msg"]
    with_key = spec(sim.base_url, models=[{"provider": "openai", "model": "x", "api_key": "sk-secret-123"}])
    response = client.post("/sweeps", json=with_key, headers=AUTH)
    assert response.status_code == 422 and "api_key_env" in response.text
    assert "sk-secret-123" not in response.text
    for body, loc in ((spec(sim.base_url, repeats=0), ["body", "repeats"]),
                      (spec(sim.base_url, conditions=["A", "E"]), ["body", "conditions", 1]),
                      (spec(sim.base_url, surprise=1), ["body", "surprise"])):
        response = client.post("/sweeps", json=body, headers=AUTH)
        assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc, response.text
    for raw in ("[1, 2]", "{not json", ""):
        response = client.post("/sweeps", content=raw, headers={**AUTH, "Content-Type": "application/json"})
        assert response.status_code == 422, (raw, response.text)
    unknown_fixture = client.post("/sweeps", json=spec(sim.base_url, fixtures={"only": ["P99"]}), headers=AUTH)
    assert unknown_fixture.status_code == 422 and "P99" in unknown_fixture.json()["detail"][0]["msg"]
    assert client.get("/sweeps", headers=AUTH).json()["total"] == 0, "nothing written for a refused spec"


def test_unreachable_endpoint_is_424_and_writes_nothing(client, sim, settings_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    settings_env(AFP_ALLOWED_BASE_URLS=f"http://127.0.0.1:{closed}/v1")  # posted base URLs need the operator's yes
    body = spec(sim.base_url)
    body["models"][0]["base_url"] = f"http://127.0.0.1:{closed}/v1"
    response = client.post("/sweeps", json=body, headers=AUTH)
    assert response.status_code == 424 and "sim (simulated)" in response.json()["detail"]
    assert client.get("/sweeps", headers=AUTH).json()["total"] == 0


def test_unknown_ids_are_404(client):
    for method, path in (("GET", "/sweeps/nope"), ("GET", "/sweeps/nope/cells"), ("GET", "/cells/999999"),
                         ("POST", "/sweeps/nope/cancel"), ("POST", "/sweeps/nope/resume"),
                         ("GET", "/sweeps/nope/report"), ("GET", "/adjudications?sweep=nope")):
        response = client.request(method, path, headers=AUTH)
        assert response.status_code == 404, (path, response.text)
    decision = {"reviewer": "r", "state": "MODEL_FAIL", "fatal_criterion": "fabricated_fact", "note": "n"}
    assert client.post("/adjudications/999999", json=decision, headers=AUTH).status_code == 404
    huge = 10**20  # beyond any integer column: refused as input, never a database error
    for path in (f"/cells/{huge}", "/cells/0", "/cells/x", f"/sweeps?offset={huge}", f"/adjudications?offset={huge}"):
        response = client.get(path, headers=AUTH)
        assert response.status_code == 422, (path, response.text)


def test_sweeps_and_cells_page_and_filter(client, sim):
    first, second = create(client, sim.base_url), create(client, sim.base_url, name="second (simulated)")
    sweeps = client.get("/sweeps?limit=1", headers=AUTH).json()
    assert sweeps["total"] == 2 and [s["id"] for s in sweeps["items"]] == [second["id"]], "newest first"
    assert [s["id"] for s in client.get("/sweeps?limit=1&offset=1", headers=AUTH).json()["items"]] == [first["id"]]
    base = f"/sweeps/{first['id']}/cells"
    pages = [client.get(f"{base}?limit=3&offset={o}", headers=AUTH).json() for o in (0, 3, 6)]
    ids = [c["id"] for p in pages for c in p["items"]]
    assert [len(p["items"]) for p in pages] == [3, 3, 2] and len(set(ids)) == 8 and ids == sorted(ids)
    assert all(p["total"] == 8 for p in pages)

    def count(query: str) -> int:
        response = client.get(f"{base}?{query}", headers=AUTH)
        assert response.status_code == 200, response.text
        return response.json()["total"]

    assert count("condition=A") == 4 and count("fixture=P05") == 6 and count("fixture=P01@nope") == 0
    assert count("phase=queued") == 8 and count("state=MODEL_PASS") == 0
    assert count("model=sim%20(simulated)") == 8 and count("model=other") == 0
    for query, loc in (("limit=501", ["query", "limit"]), ("limit=0", ["query", "limit"]),
                       ("offset=-1", ["query", "offset"]), ("condition=E", ["query", "condition"]),
                       ("state=PASSED", ["query", "state"]), ("phase=later", ["query", "phase"])):
        response = client.get(f"{base}?{query}", headers=AUTH)
        assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc, query


def test_cancel_then_resume(client, sim):
    sweep_id = create(client, sim.base_url)["id"]
    cancelled = client.post(f"/sweeps/{sweep_id}/cancel", headers=AUTH).json()
    assert cancelled == {"id": sweep_id, "status": "cancelled", "unfinished": 8}
    assert client.get(f"/sweeps/{sweep_id}", headers=AUTH).json()["status"] == "cancelled"
    resumed = client.post(f"/sweeps/{sweep_id}/resume", headers=AUTH).json()
    assert resumed == {"id": sweep_id, "resent": 8}
    assert client.get(f"/sweeps/{sweep_id}", headers=AUTH).json()["status"] == "running"


def test_resume_refuses_changed_inputs_with_409_naming_them(client, sim, tmp_path: Path, settings_env):
    """Seal: a catalogue fixture edited after the sweep began stops a resume, naming the changed file."""
    from afpbench.fixtures.loader import read_fixture_files

    folder = tmp_path / "catalogue" / "fixtures" / "pair"
    folder.mkdir(parents=True)
    for f in read_fixture_files(None):
        if f.name in ("P01.yaml", "P05.yaml"):
            (folder / f.name).write_text(f.text, encoding="utf-8")
    settings_env(AFP_CATALOGUE_DIR=str(tmp_path / "catalogue"))  # an API spec names fixtures, never a path
    sweep_id = create(client, sim.base_url, fixtures={"name": "pair"})["id"]
    p01 = folder / "P01.yaml"
    p01.write_text(p01.read_text(encoding="utf-8") + "\n# edited after sealing\n", encoding="utf-8")
    response = client.post(f"/sweeps/{sweep_id}/resume", headers=AUTH)
    assert response.status_code == 409 and "P01.yaml" in response.json()["detail"], response.text


def test_adjudication_input_errors_are_422(client, sim):
    sweep_id = create(client, sim.base_url)["id"]
    cell_id = client.get(f"/sweeps/{sweep_id}/cells?limit=1", headers=AUTH).json()["items"][0]["id"]
    good = {"reviewer": "rev", "state": "MODEL_FAIL", "fatal_criterion": "fabricated_fact", "note": "why"}
    for change, loc in (({"state": "MAYBE"}, ["body", "state"]),
                        ({"scores": {"task_correctness": 5}}, ["body", "scores", "task_correctness"]),
                        ({"fatal_criterion": "rudeness"}, ["body", "fatal_criterion"]),
                        ({"reviewer": ""}, ["body", "reviewer"]), ({"extra": 1}, ["body", "extra"])):
        response = client.post(f"/adjudications/{cell_id}", json={**good, **change}, headers=AUTH)
        assert response.status_code == 422 and response.json()["detail"][0]["loc"] == loc, response.text
    not_scored = client.post(f"/adjudications/{cell_id}", json=good, headers=AUTH)
    assert not_scored.status_code == 422 and "adjudicate once it is scored" in not_scored.text
    assert client.get(f"/adjudications?sweep={sweep_id}", headers=AUTH).json() == {
        "total": 0, "limit": 100, "offset": 0, "items": []}


def test_metrics_are_prometheus_text(client, sim):
    sweep_id = create(client, sim.base_url)["id"]
    response = client.get("/metrics", headers=AUTH)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = response.text.splitlines()
    assert f'afpbench_cells{{sweep="{sweep_id}",phase="queued",state="none"}} 8' in lines
    assert 'afpbench_source_up{source="database"} 1' in lines
    for line in lines:
        assert line.startswith("# HELP ") or line.startswith("# TYPE ") or SAMPLE_LINE.match(line), line


def test_readyz_reports_an_unreachable_database(settings_env, tmp_path):
    """Readiness checks the database; liveness (/healthz) does not, and says ok."""
    settings_env(AFP_DATABASE_URL=f"sqlite:///{tmp_path}/missing/dir/x.db", AFP_API_TOKEN=TOKEN)
    client = TestClient(create_app(runtime=False))
    response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["database"] == "unreachable"
    assert response.headers["retry-after"].isdigit()
    assert client.get("/healthz").json() == {"status": "ok", "mode": "embedded"}
    assert "missing" not in response.text, "no URL in the answer"


def test_serve_and_flower_refuse_non_loopback_without_credentials(settings_env, monkeypatch):
    """No token -> no listening beyond loopback; Flower likewise without basic-auth credentials."""
    assert all(map(is_loopback, ("127.0.0.1", "127.5.0.1", "::1", "[::1]", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "10.0.0.1", "example.com", "")))
    monkeypatch.delenv("AFP_API_TOKEN", raising=False)
    settings_env(AFP_BROKER_URL="redis://127.0.0.1:1/0")
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0", "--port", "8123"])
    assert isinstance(result.exception, CommandError) and "AFP_API_TOKEN" in str(result.exception)
    assert flower_basic_auth("127.0.0.1", {}) is None
    assert flower_basic_auth("0.0.0.0", {"AFP_FLOWER_USER": "u", "AFP_FLOWER_PASSWORD": "p"}) == "u:p"
    for environ in ({}, {"AFP_FLOWER_USER": "u"}, {"AFP_FLOWER_USER": "u:x", "AFP_FLOWER_PASSWORD": "p"}):
        with pytest.raises(CommandError):
            flower_basic_auth("0.0.0.0", environ)


def test_embedded_serve_runs_a_sweep_to_its_report(env, sim):
    """Embedded mode: the app's lifespan runs the worker; a one-cell sweep finishes and reports."""
    body = spec(sim.base_url, conditions=["A"], fixtures={"only": ["P01"]})
    with TestClient(create_app()) as client:
        created = client.post("/sweeps", json=body, headers=AUTH)
        assert created.status_code == 201, created.text
        sweep_id = created.json()["id"]
        deadline = time.monotonic() + 60
        while not (detail := client.get(f"/sweeps/{sweep_id}", headers=AUTH).json())["finished"]:
            assert time.monotonic() < deadline, detail
            time.sleep(0.1)
        assert detail["total"] == 1 and detail["attempts"] >= 1
        cell = client.get(f"/sweeps/{sweep_id}/cells", headers=AUTH).json()["items"][0]
        record = client.get(f"/cells/{cell['id']}", headers=AUTH)
        assert record.status_code == 200 and TOKEN not in record.text
        report = client.get(f"/sweeps/{sweep_id}/report?format=md", headers=AUTH)
        assert report.status_code == 200 and report.headers["content-type"].startswith("text/markdown")
        assert "simulated" in report.text.lower()
        assert client.get(f"/sweeps/{sweep_id}/report?format=pdf", headers=AUTH).status_code == 422


def test_rerun_route_refuses_other_states_and_says_when_there_is_nothing_to_rerun(client, sim):
    """The protocol's rerun (workers/cells/rerun.py) through the API: only INFRA_ERROR / PROVIDER_BLOCK,
    an unknown sweep is 404, and a sweep without such a finished cell answers that nothing was reopened."""
    sweep_id = create(client, sim.base_url)["id"]
    bad = client.post(f"/sweeps/{sweep_id}/rerun", json={"states": ["MODEL_FAIL"]}, headers=AUTH)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][:2] == ["body", "states"], bad.text
    unknown_model = client.post(f"/sweeps/{sweep_id}/rerun", json={"model": "nope"}, headers=AUTH)
    assert unknown_model.status_code == 422 and "--model 'nope'" in unknown_model.text
    assert client.post("/sweeps/nope/rerun", headers=AUTH).status_code == 404
    nothing = client.post(f"/sweeps/{sweep_id}/rerun", json={"note": "n"}, headers=AUTH)
    assert nothing.status_code == 200 and nothing.json()["cells"] == 0 and nothing.json()["rerun"] is None
    assert "nothing to rerun" in nothing.json()["message"]
