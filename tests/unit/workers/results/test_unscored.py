"""A sweep with no scored cell says so, and why, at the top of its report (Markdown and HTML) and of the
terminal summary, and never calls its figures final. Built the way a real all-dispute sweep ends (every
cell GRADER_DISPUTE with the verdict's reason), over a real SQLite database. Output here is SIMULATED."""

from __future__ import annotations

from rich.console import Console

from afpbench.api.display import summary_table
from afpbench.api.report import render_report
from afpbench.api.run_overview import run_overview
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.results.unscored import why_unscored
from afpbench.workers.store.db import session_scope
from afpbench.workers.sweeps.progress import progress
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

UNPARSEABLE = "judgement unparseable after 2 tries (judge sim-judge: not a single JSON object)"
DISAGREE = "judges disagree on fatal criterion F2 (flagged by sim-judge only); swapped re-judge still disputed"


def _sweep(sweep_id: str, scored: bool) -> None:
    spec = parse_spec({"name": "all disputes", "judges": [{"provider": "sim", "model": "sim-judge"}],
                       "models": [{"provider": "sim", "model": "sim-1"}]})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, sweep_id, spec=spec), 0)
        for i, fixture in enumerate(["P01", "P04", "P06", "P08"]):
            for condition in ("A", "D"):
                cells.add(condition, fixture, "GRADER_DISPUTE", reason=UNPARSEABLE if i % 2 else DISAGREE)
        cells.add("A", "P02", "MODEL_PASS" if scored else "GRADER_DISPUTE", reason=DISAGREE)


def test_an_all_dispute_sweep_says_nothing_was_measured_and_why(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    _sweep("disputes", scored=False)
    summary = snapshot("disputes", interim=False)
    assert summary.no_scored_cell == (
        "no cell was scored: all 9 finished cells are outside the pass-rate denominator (9 GRADER_DISPUTE); "
        "why: GRADER_DISPUTE: judges disagree on fatal criterion F2 x5; "
        "GRADER_DISPUTE: judgement unparseable after 2 tries x4")
    md = render_report(summary, "md")
    lines = md.splitlines()
    top = lines[3]  # right under the SIMULATED banner line
    assert lines[2].startswith("> **SIMULATED"), md
    assert top.startswith("> **No cell was scored: all 9 finished cells") and "judgement unparseable" in top, md
    assert "final" not in md.split("\n## ")[0], "the headline never calls such figures final"
    assert "NOTHING MEASURED (no cell scored)" in md
    html = render_report(summary, "html")
    assert 'id="nothing-scored"' in html and html.index("nothing-scored") < html.index("<figure>")
    assert "Pass rate by condition with exact 95% interval" not in html, "no empty rate chart"
    console = Console(width=120, record=True, color_system=None)
    console.print(summary_table(run_overview("disputes", progress("disputes"), 9, "sqlite:///x.db")))
    text = console.export_text().splitlines()
    assert text[1].startswith("no cell was scored: all 9 finished cells"), text[:3]


def test_one_scored_cell_keeps_the_report_as_it_was(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    _sweep("one", scored=True)
    summary = snapshot("one", interim=False)
    assert summary.no_scored_cell is None
    assert "No cell was scored" not in render_report(summary, "md")


def test_the_reasons_are_read_only_while_no_scored_cell_is_met(sqlite_url, settings_env):
    """why_unscored streams the finished cells: a scored one among them ends the reading with None, and
    the session goes on to write in the same transaction (the aggregation stores its row after it)."""
    settings_env(AFP_DATABASE_URL=sqlite_url)
    _sweep("late", scored=True)
    with session_scope() as s:
        assert why_unscored(s, "late") is None
        cells = CellMaker(s, make_sweep(s, "after"), 0)
        cells.add("A", "P01", "GRADER_DISPUTE", reason=DISAGREE)
        s.flush()
        assert why_unscored(s, "after") == ("no cell was scored: all 1 finished cells are outside the pass-rate "
                                            "denominator (1 GRADER_DISPUTE); why: GRADER_DISPUTE: judges disagree "
                                            "on fatal criterion F2 x1")
