"""The summary's judge_reliability read from SQL (workers/results/reliability_queries.py, issue 37): each
cell's latest scoring run, a failed call left out, an unusable reply counted, the swapped re-judge, the
human decision; and the reliability tables in the report JSON, the viewer and the export alike.
All model and judge output here is SIMULATED."""

from __future__ import annotations

import csv
import json

import pytest
from fastapi.testclient import TestClient

from afpbench.api.http.app import create_app
from afpbench.api.report import render_report
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.results.export import export_bundle
from afpbench.workers.results.reliability_tables import RELIABILITY_TABLES
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import CALL_FAILED, Adjudication, JudgementRow
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

TOKEN = "reliability-unit-token-5d1c"
J1, J2 = "judge-one", "judge-two"
GOOD = {"task_correctness": 2, "evidence_discipline": 2, "uncertainty_handling": 1, "failure_control": 2}
BAD = {"task_correctness": 1, "evidence_discipline": 0, "uncertainty_handling": 1, "failure_control": 1}


def _judgement(cell_id: int, judge: str, scores: dict | None, round_: int = 1, run: int = 1,
               error: str | None = None) -> JudgementRow:
    parsed = None if scores is None else {"scores": scores, "fatal_flags": {"fabricated_fact": False},
                                          "rationales": {}, "quotes": {}, "total": sum(scores.values())}
    return JudgementRow(cell_id=cell_id, scoring_run=run, judge_label=judge, judge_round=round_, prompt_sha256="x",
                     parsed=parsed, parse_error=error if scores is None else None, simulated=True)


@pytest.fixture
def sweep(sqlite_url, settings_env) -> str:
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN=TOKEN)
    spec = parse_spec({"name": "rel", "models": [{"provider": "sim", "model": "sim-1"}],
                       "judges": [{"provider": "sim", "model": "j1", "label": "judge-one"},
                                  {"provider": "sim", "model": "j2", "label": "judge-two"}]})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "rel", spec=spec))
        a = cells.add("A", "P01", "MODEL_PASS", output_text="x" * 100)
        d = cells.add("D", "P01", "MODEL_FAIL", output_text="y" * 400)
        b = cells.add("B", "P02", "MODEL_PASS", output_text="z" * 200)
        s.add_all([
            _judgement(a, J1, GOOD), _judgement(a, J2, GOOD),
            _judgement(d, J1, BAD), _judgement(d, J2, GOOD),  # they disagree: a swapped re-judge ran
            _judgement(d, J1, BAD, round_=2), _judgement(d, J2, BAD, round_=2),  # judge two flipped
            _judgement(b, J1, None, error=f"{CALL_FAILED}: timeout"),  # no answer: left out
            _judgement(b, J1, None, error="not JSON"), _judgement(b, J2, GOOD),
            _judgement(a, J1, BAD, run=0),  # an older scoring run: not counted
        ])
        s.add(Adjudication(cell_id=d, reviewer="rev", state="MODEL_FAIL", note="SIMULATED decision"))
    return "rel"


def test_the_summary_measures_each_judge_from_its_latest_judgings(sweep):
    reliability = snapshot(sweep, interim=None).judge_reliability
    assert reliability is not None and reliability.cells == 3
    one, two = reliability.judges
    assert (one.judge, two.judge) == (J1, J2)
    assert (one.usable_rate.count, one.usable_rate.total) == (2, 3)  # the unusable reply counts, the failed call not
    assert (two.usable_rate.count, two.usable_rate.total) == (3, 3)
    assert (one.swap_consistency.count, one.swap_consistency.total) == (1, 1)
    assert (two.swap_consistency.count, two.swap_consistency.total) == (0, 1)
    assert (one.human_agreement.agreement.count, one.human_agreement.agreement.total) == (1, 1)
    assert (two.human_agreement.agreement.count, two.human_agreement.agreement.total) == (0, 1)
    [pair] = reliability.pairs
    assert pair.kappa.n == 2 and pair.kappa.base_rates == (0.5, 1.0)
    assert {m.condition: m.mean_length for m in reliability.mean_length} == {"A": 100, "B": 200, "D": 400}


def test_the_reliability_tables_read_the_same_in_report_json_viewer_and_export(sweep, tmp_path):
    summary = snapshot(sweep, interim=None)
    report = json.loads(render_report(summary, "json"))
    assert report["judge_reliability"] == summary.model_dump(mode="json")["judge_reliability"]
    client = TestClient(create_app(runtime=False))
    login = client.post("/view/login", data={"token": TOKEN, "next": "/view/"}, follow_redirects=False)
    assert login.status_code == 303
    page = client.get(f"/view/sweeps/{sweep}").text
    export_bundle(sweep, tmp_path / "b", renderer=render_report)
    for table in RELIABILITY_TABLES:
        rendered = table.render(summary)
        assert rendered.rows, table.id
        [json_table] = [t for t in report["tables"] if t["id"] == table.id]
        csv_rows = list(csv.DictReader((tmp_path / "b" / "tables" / f"{table.id}.csv").open(encoding="utf-8")))
        keys = [c.key for c in rendered.columns]
        assert [[r[k] for k in keys] for r in json_table["rows"]] == rendered.rows
        assert [[r[k] for k in keys] for r in csv_rows] == rendered.rows
        viewer = page.split(f'id="{table.id}"', 1)[1].split("</table>", 1)[0]
        assert all(f">{cell}</td>" in viewer for row in rendered.rows for cell in row)
    assert "2/3 = 66.7% (" in page  # judge one's usable judgements, with the interval
