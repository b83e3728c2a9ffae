"""The progress the viewer polls (api/viewer/pages_sweeps.py, static/viewer.js): revalidated by ETag, so an
unchanged progress is a 304 without a body; a change gives a new ETag."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlmodel import update

from afpbench.api.http.app import create_app
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Cell, Phase
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep


def test_progress_is_revalidated_by_etag(settings_env, sqlite_url):
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN="")
    spec = parse_spec({"name": "polled (simulated)", "models": [{"provider": "sim", "model": "sim-1"}], "judges": []})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "pg1", spec=spec, status="running"))
        cells.add("A", "P01", "MODEL_PASS")
        open_cell = cells.add("B", "P01", None)
    client = TestClient(create_app(runtime=False))
    first = client.get("/view/sweeps/pg1/progress.json")
    etag = first.headers["etag"]
    assert first.json()["done"] == 1 and first.headers["cache-control"] == "no-cache"
    unchanged = client.get("/view/sweeps/pg1/progress.json", headers={"If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.content == b""
    with session_scope() as s:
        s.execute(update(Cell).where(Cell.id == open_cell).values(phase=Phase.done, state="MODEL_FAIL"))
    moved = client.get("/view/sweeps/pg1/progress.json", headers={"If-None-Match": etag})
    assert moved.status_code == 200 and moved.json()["finished"] is True and moved.headers["etag"] != etag


def test_progress_names_the_stages_in_the_viewer_and_the_api(settings_env, sqlite_url):
    """Live progress by stage: an answer awaiting its judge, a cell being judged and a decided one are
    told apart on the sweep page, in the JSON it polls (its line is the page's own words) and in
    GET /sweeps/{id}."""
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN="")
    spec = parse_spec({"name": "staged (simulated)", "models": [{"provider": "sim", "model": "sim-1"}], "judges": []})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "st1", spec=spec, status="running"))
        cells.add("A", "P01", "MODEL_PASS")
        answered, judging = cells.add("B", "P01", None), cells.add("C", "P01", None)
        cells.add("D", "P01", None)
        s.execute(update(Cell).where(Cell.id == answered).values(phase=Phase.awaiting_score))
        s.execute(update(Cell).where(Cell.id == judging).values(phase=Phase.scoring))
    client = TestClient(create_app(runtime=False))
    polled = client.get("/view/sweeps/st1/progress.json").json()
    assert polled["stages"] == {"waiting": 1, "answering": 0, "answered": 1, "judging": 1, "decided": 1}
    assert polled["line"].startswith("1/4 cells decided; waiting 1, answering 0, answered 1, judging 1, decided 1")
    assert polled["line"] in client.get("/view/sweeps/st1").text
    detail = client.get("/sweeps/st1").json()
    assert detail["stages"] == polled["stages"] and detail["phases"]["scoring"] == 1
