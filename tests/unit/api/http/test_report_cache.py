"""Finished sweeps' reports, cached by version (api/http/report_cache.py): rendered once per version of the
stored summary, with an ETag (304 when the client has it); a human decision and a rescore each give a new
version, so the report counts them; an unfinished sweep's report is interim and never cached."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select, update

from afpbench.api.http.app import create_app
from afpbench.scoring.states import ResultState
from afpbench.scoring.verdict import Verdict
from afpbench.workers.cells.finish import aggregate_now
from afpbench.workers.grading.scorer import next_scoring_run, write_result
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Aggregate
from afpbench.workers.sweeps.inputs import load_inputs
from afpbench.workers.sweeps.spec_loading import demo_spec, parse_spec
from tests.unit.sweep_builder import SCORES_PASS, CellMaker, make_sweep

SPEC = {"name": "cached report (simulated)", "models": [{"provider": "sim", "model": "sim-1"}], "judges": []}
ZEROS = {"task_correctness": 0, "evidence_discipline": 0, "uncertainty_handling": 0, "failure_control": 0}


@pytest.fixture(scope="module")
def demo_inputs() -> dict:
    return load_inputs(demo_spec()).to_json()  # the sealed pass rule a decision is checked against


@pytest.fixture
def sweep(settings_env, sqlite_url, demo_inputs) -> dict[str, int]:
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN="")
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "rc1", spec=parse_spec(SPEC), inputs=demo_inputs))
        ids = {"pass": cells.add("A", "P01", "MODEL_PASS"), "fail": cells.add("B", "P01", "MODEL_FAIL"),
               "dispute": cells.add("D", "P01", "GRADER_DISPUTE")}
        cells_open = CellMaker(s, make_sweep(s, "rc2", spec=parse_spec(SPEC), status="running"))
        cells_open.add("A", "P01", "MODEL_PASS")
        cells_open.add("B", "P01", None)
    aggregate_now("rc1", "test")  # the finished sweep's summary, stored as the worker would
    return ids


def _states(client: TestClient, sweep_id: str = "rc1") -> dict[str, int]:
    rows = client.get(f"/sweeps/{sweep_id}/report?format=json").json()["by_model_condition"]
    return {row["condition"]: row["pass"] for row in rows}


def test_a_finished_report_has_an_etag_and_is_not_sent_again(sweep):
    client = TestClient(create_app(runtime=False))
    first = client.get("/sweeps/rc1/report?format=md")
    etag = first.headers["etag"]
    assert first.status_code == 200 and first.headers["cache-control"] == "private, no-cache"
    assert client.get("/sweeps/rc1/report?format=md").headers["etag"] == etag
    assert client.get("/sweeps/rc1/report?format=html").headers["etag"] != etag, "one version per format"
    again = client.get("/sweeps/rc1/report?format=md", headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b""
    assert client.get("/view/sweeps/rc1/report", headers={"If-None-Match": client.get(
        "/view/sweeps/rc1/report").headers["etag"]}).status_code == 304, "the viewer's report page too"


def test_the_report_is_rendered_once_per_version(sweep):
    """Cached: a summary changed behind the stored stamp (no code does this) is not seen; the version is."""
    client = TestClient(create_app(runtime=False))
    before = client.get("/sweeps/rc1/report?format=json").json()
    with session_scope() as s:
        row = s.exec(select(Aggregate).where(Aggregate.sweep_id == "rc1")).one()
        s.execute(update(Aggregate).where(Aggregate.sweep_id == "rc1")
                  .values(summary={**row.summary, "name": "changed behind the cache's back"}))
    assert client.get("/sweeps/rc1/report?format=json").json() == before


def test_a_human_decision_gives_a_new_version_that_counts_it(sweep):
    """Adjudication adds a result and re-stores the summary: the next report names the decision."""
    client = TestClient(create_app(runtime=False))
    etag = client.get("/sweeps/rc1/report?format=json").headers["etag"]
    decided = client.post(f"/adjudications/{sweep['dispute']}",
                          json={"reviewer": "ana", "state": "MODEL_PASS", "note": "reads right", "scores": SCORES_PASS})
    assert decided.status_code == 201, decided.text
    after = client.get("/sweeps/rc1/report?format=json")
    assert after.headers["etag"] != etag and _states(client)["D"] == 1
    assert client.get("/sweeps/rc1/report?format=json", headers={"If-None-Match": etag}).status_code == 200


def test_a_rescore_gives_a_new_version_and_the_summary_is_stored_again(sweep):
    """A rescore adds a scoring run without storing the summary: the report stores it again first."""
    client = TestClient(create_app(runtime=False))
    etag = client.get("/sweeps/rc1/report?format=json").headers["etag"]
    assert _states(client)["A"] == 1
    with session_scope() as s:
        stamp = s.exec(select(Aggregate.finished_at).where(Aggregate.sweep_id == "rc1")).one()
    time.sleep(0.01)  # the new result is younger than the stored summary, as a rescore's always is
    with session_scope() as s:  # what adjudication.rescore_cell writes: a new scoring run
        run = next_scoring_run(s, sweep["pass"])
        write_result(s, sweep["pass"], run, Verdict(ResultState.MODEL_FAIL, ZEROS, 0, rationale="rescored"),
                     {"rescore": True})
    after = client.get("/sweeps/rc1/report?format=json")
    assert after.headers["etag"] != etag and _states(client)["A"] == 0
    with session_scope() as s:
        assert s.exec(select(Aggregate.finished_at).where(Aggregate.sweep_id == "rc1")).one() > stamp


def test_an_unfinished_sweep_is_interim_and_never_cached(sweep):
    client = TestClient(create_app(runtime=False))
    report = client.get("/sweeps/rc2/report?format=json")
    assert report.status_code == 200 and report.json()["interim"] is True and "etag" not in report.headers
    assert client.get("/sweeps/nope/report").status_code == 404
