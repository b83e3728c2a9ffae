"""One definition per results table (workers/results/tables.py), rendered by every medium.

Acceptance (issue 36, build item 3): a column added to the comparisons table in that one place shows in
the terminal summary, the md/html/json report, the HTTP API's report, the viewer's sweep page and the
export bundle (summary.md and tables/comparisons.csv), with nothing else edited. The units are the same
everywhere: rates in %, differences in percentage points ("+25.0 pts"; "+25 pts" at 80 columns), and the
condition letters are spelled out from reference/protocol.yaml wherever a result by condition is shown.
All model output here is SIMULATED.
"""

from __future__ import annotations

import csv
import json

import pytest
from fastapi.testclient import TestClient
from rich.console import Console

from afpbench.api.display import summary_table
from afpbench.api.http.app import create_app
from afpbench.api.report import render_report
from afpbench.api.run_overview import run_overview
from afpbench.reference.loader import protocol
from afpbench.workers.results import tables
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.results.export import export_bundle
from afpbench.workers.results.summary import PairedComparison
from afpbench.workers.results.table_spec import LABEL, Column, condition_legend
from afpbench.workers.store.db import session_scope
from afpbench.workers.sweeps.progress import progress
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

TOKEN = "tables-unit-token-7f3a"
SWEEP = "tbl"


@pytest.fixture
def sweep(sqlite_url, settings_env) -> str:
    """Two models under A-D, paired on fixture and repeat: every comparison has matched pairs."""
    settings_env(AFP_DATABASE_URL=sqlite_url, AFP_API_TOKEN=TOKEN)
    spec = parse_spec({"name": "tables", "judges": [], "models": [
        {"provider": "sim", "model": "sim-1", "label": "sim-one"}, {"provider": "sim", "model": "sim-2"}]})
    with session_scope() as s:
        row = make_sweep(s, SWEEP, spec=spec)
        first, second = CellMaker(s, row, 0), CellMaker(s, row, 1)
        for i in range(8):
            for condition, passes in (("A", i < 2), ("B", i < 4), ("C", i < 6), ("D", i < 7)):
                first.add(condition, f"P0{1 + i % 4}", "MODEL_PASS" if passes else "MODEL_FAIL", repeat=1 + i // 4)
                second.add(condition, f"P0{1 + i % 4}", "MODEL_FAIL" if passes else "MODEL_PASS", repeat=1 + i // 4)
        second.add("B", "P05", "GRADER_DISPUTE", reason="judges disagree")
    return SWEEP


def _dummy(c) -> str:
    """A value no renderer could write unless it read the column: the comparison, tagged."""
    return f"dummy:{c.comparison.replace(' ', '')}"


def _terminal(sweep_id: str, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(summary_table(run_overview(sweep_id, progress(sweep_id), 1, "sqlite:///x.db")))
    return console.export_text()


def _viewer_page(sweep_id: str, below: str = "") -> str:
    client = TestClient(create_app(runtime=False))
    assert client.post("/view/login", data={"token": TOKEN, "next": "/view/"},
                       follow_redirects=False).status_code == 303
    page = client.get(f"/view/sweeps/{sweep_id}{below}")
    assert page.status_code == 200, page.text
    return page.text


def _api_report(sweep_id: str) -> dict:
    client = TestClient(create_app(runtime=False))
    response = client.get(f"/sweeps/{sweep_id}/report?format=json", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200, response.text
    return response.json()


def _json_table(report: dict, table_id: str) -> dict:
    [table] = [t for t in report["tables"] if t["id"] == table_id]
    return table


def test_a_column_added_in_the_one_definition_shows_in_every_medium(sweep, tmp_path, monkeypatch):
    """Issue 36 acceptance: the dummy column reaches terminal, md/html/json report, API, viewer and export."""
    summary = snapshot(sweep, interim=None)
    paired = [c for c in summary.comparisons if isinstance(c, PairedComparison)]
    assert len(paired) == 12, summary.comparisons  # 2 models x the 6 pairs of A-D, every one with pairs
    values = sorted({_dummy(c) for c in paired})
    before = render_report(summary, "md") + _terminal(sweep, 120) + _viewer_page(sweep)
    assert not any(v in before for v in values), "the control: no medium writes the value before the column exists"

    column = Column("dummy_check", "dummy check", _dummy, LABEL, short="dummy")
    monkeypatch.setattr(tables.COMPARISONS, "columns", (*tables.COMPARISONS.columns, column))

    terminal = _terminal(sweep, 120)
    assert " dummy" in terminal and all(v in terminal for v in values), terminal
    md = render_report(summary, "md")
    comparisons_md = md.split(f"## {tables.COMPARISONS.title}", 1)[1].split("\n## ", 1)[0]
    assert "| dummy check |" in comparisons_md and all(f"| {v} |" in comparisons_md for v in values)
    html = render_report(summary, "html")
    assert "<th>dummy check</th>" in html and all(f"<td>{v}</td>" in html for v in values)
    for report in (json.loads(render_report(summary, "json")), _api_report(sweep)):
        table = _json_table(report, "comparisons")
        assert {"key": "dummy_check", "header": "dummy check"} in table["columns"]
        assert sorted({row["dummy_check"] for row in table["rows"]}) == values
    page = _viewer_page(sweep)
    viewer_table = page.split('id="comparisons"', 1)[1].split("</table>", 1)[0]
    assert "<th>dummy check</th>" in viewer_table and all(f"<td>{v}</td>" in viewer_table for v in values)

    bundle = tmp_path / "bundle"
    export_bundle(sweep, bundle, renderer=render_report)
    assert "| dummy check |" in (bundle / "summary.md").read_text(encoding="utf-8")
    rows = list(csv.DictReader((bundle / "tables" / "comparisons.csv").open(encoding="utf-8")))
    assert sorted({r["dummy_check"] for r in rows}) == values
    plain = tmp_path / "plain"  # the bundle without the report renderer writes the same tables
    export_bundle(sweep, plain)
    assert all(v in (plain / "summary.md").read_text(encoding="utf-8") for v in values)


def test_a_difference_reads_in_percentage_points_in_every_medium(sweep, tmp_path):
    """One unit for a difference of two rates: "+25.0 pts" in full, "+25 pts" at 80 columns; never "%"."""
    summary = snapshot(sweep, interim=None)
    c = next(c for c in summary.comparisons if isinstance(c, PairedComparison) and c.model == "sim-one"
             and c.comparison == "C vs A")
    assert c.difference == pytest.approx(0.5)
    low, high = c.difference_ci95
    full = f"{low * 100:+.1f} to {high * 100:+.1f} pts"
    assert "+50.0 pts" in c.reading and full in c.reading
    assert "| sim-one | C vs A | 8 | +50.0 pts | " + full in render_report(summary, "md")
    row = next(r for r in _json_table(json.loads(render_report(summary, "json")), "comparisons")["rows"]
               if r["model"] == "sim-one" and r["comparison"] == "C vs A")
    assert (row["difference"], row["difference_ci95"]) == ("+50.0 pts", full)
    assert f"<td class=\"n\">+50.0 pts</td><td class=\"n\">{full}</td>" in _viewer_page(sweep)
    narrow = f"{low * 100:+.0f} to {high * 100:+.0f}"  # at 80 columns an interval's unit is the difference's
    assert any(line.split()[:7] == ["C", "vs", "A", "8", "+50", "pts", *narrow.split()[:1]] and narrow in line
               for line in _terminal(sweep, 80).splitlines())
    export_bundle(sweep, tmp_path / "b", renderer=render_report)
    exported = next(r for r in csv.DictReader((tmp_path / "b" / "tables" / "comparisons.csv").open())
                    if r["model"] == "sim-one" and r["comparison"] == "C vs A")
    assert exported["difference"] == "+50.0 pts"


def test_the_condition_letters_are_spelled_out_wherever_a_result_is_shown(sweep, tmp_path):
    """Every place that shows a result by condition names A-D with the protocol's condition names."""
    names = protocol()["conditions"]
    legend = condition_legend("ABCD")
    assert legend == "conditions: " + "; ".join(f"{c} = {names[c]['name']}" for c in "ABCD")
    summary = snapshot(sweep, interim=None)
    assert legend in " ".join(_terminal(sweep, 80).split())
    assert legend in render_report(summary, "md") and legend in render_report(summary, "html")
    assert legend in _viewer_page(sweep) and legend in _viewer_page(sweep, "/fixtures/P01?repeat=1")
    export_bundle(sweep, tmp_path / "b", renderer=render_report)
    export_bundle(sweep, tmp_path / "plain")
    assert all(legend in (tmp_path / bundle / "summary.md").read_text() for bundle in ("b", "plain"))


def test_every_table_renders_every_row_in_full_and_narrow(sweep):
    """A table's rows render in both forms with one text per column; a wide column is left out when narrow."""
    summary = snapshot(sweep, interim=None)
    for table in tables.REPORT_TABLES:
        full, narrow = table.render(summary), table.render(summary, narrow=True)
        assert len(full.rows) == len(narrow.rows) == len(list(table.rows(summary))), table.id
        assert all(len(row) == len(full.columns) for row in full.rows), table.id
        assert [c.key for c in narrow.columns] == [c.key for c in table.columns if not c.wide], table.id
    rates = tables.RATES.render(summary, narrow=True)
    assert "PB PROVIDER_BLOCK" in rates.legend and "UF unfinished" in rates.legend


def test_the_comparisons_carry_the_same_numbers_in_terminal_report_json_viewer_and_export(sweep, tmp_path):
    """Acceptance (issue 37): each comparison's pairs, difference, both intervals, McNemar and Holm p and
    MDD read the same in the terminal (80 columns: no decimals), the JSON report, the viewer and the export."""
    summary = snapshot(sweep, interim=None)
    full = tables.COMPARISONS.render(summary)
    narrow = tables.COMPARISONS.render(summary, narrow=True)
    keys = ["n_pairs", "difference", "difference_ci95", "p_value", "clustered_ci95", "holm_p_value",
            "min_detectable_difference"]
    json_rows = _json_table(json.loads(render_report(summary, "json")), "comparisons")["rows"]
    export_bundle(sweep, tmp_path / "b", renderer=render_report)
    csv_rows = list(csv.DictReader((tmp_path / "b" / "tables" / "comparisons.csv").open(encoding="utf-8")))
    page = _viewer_page(sweep).split('id="comparisons"', 1)[1].split("</table>", 1)[0]
    terminal = _terminal(sweep, 80).splitlines()
    assert len(json_rows) == len(csv_rows) == 12
    assert sum(isinstance(c, PairedComparison) and c.clustered_ci95 is not None for c in summary.comparisons) >= 6
    for c, j, e in zip(summary.comparisons, json_rows, csv_rows, strict=True):
        assert isinstance(c, PairedComparison) and j["comparison"] == e["comparison"] == c.comparison
        assert [j[k] for k in keys] == [e[k] for k in keys]
        assert j["holm_p_value"] == (f"{c.holm_p_value:.4g}" if c.holm_p_value is not None else "-")
        interval = c.clustered_ci95
        assert j["clustered_ci95"] == (f"{interval[0] * 100:+.1f} to {interval[1] * 100:+.1f} pts"
                                       if interval is not None else "-")
        assert "".join(f'<td class="n">{j[k]}</td>' for k in keys) in page
    key_at = [col.key for col in narrow.columns]
    for row in narrow.rows:
        shown = " ".join(row[key_at.index(k)] for k in keys)
        assert any(" ".join(shown.split()) in " ".join(line.split()) for line in terminal), (shown, terminal)
    assert [r[0] for r in full.rows] == [r[0] for r in narrow.rows]
