"""The terminal summary answers the question: per model and condition PASS/(PASS+FAIL) with n and the
exact interval, the excluded counts beside it, and the paired comparisons with their interval; at 80
and 120 columns every number is on screen whole (text folds, numbers never wrap or get cut).

The summary is built the way `afpbench run` and `status` build it (run_overview over a real SQLite
sweep with known states), then rendered by rich to a string. All model output here is SIMULATED.
"""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from afpbench.api.display import NO_JUDGES_NOTE, summary_table
from afpbench.api.run_overview import RunOverview, run_overview
from afpbench.workers.results.tables import EXCLUDED_ABBREVIATIONS
from afpbench.workers.store.db import session_scope
from afpbench.workers.sweeps.progress import progress
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

LONG_LABEL = "claude-haiku-4-5-20251001 via a corporate proxy (simulated)"
EXCLUDED = ("PROVIDER_BLOCK", "INFRA_ERROR", "INVALID_TEST", "GRADER_DISPUTE")


def _build(sweep_id: str, judges: list[dict]) -> RunOverview:
    spec = parse_spec({"name": "summary layout", "judges": judges, "models": [
        {"provider": "sim", "model": "sim-1", "label": "sim-short"},
        {"provider": "sim", "model": "sim-2", "label": LONG_LABEL}]})
    with session_scope() as s:
        sweep = make_sweep(s, sweep_id, spec=spec)
        first, second = CellMaker(s, sweep, 0), CellMaker(s, sweep, 1)
        # Same fixture and repeat under every condition: paired units for C vs B, D vs C, C vs A, B vs A.
        for i in range(12):
            fixture, repeat = f"P0{1 + i % 4}", 1 + i // 4
            for condition, passes in (("A", i < 3), ("B", i < 5), ("C", i < 10), ("D", i < 11)):
                first.add(condition, fixture, "MODEL_PASS" if passes else "MODEL_FAIL", repeat=repeat)
                second.add(condition, fixture, "MODEL_PASS" if passes and i % 2 else "MODEL_FAIL", repeat=repeat)
        second.add("A", "P05", "INFRA_ERROR", reason="x")
        second.add("B", "P05", "GRADER_DISPUTE", reason="x")
        second.add("C", "P05", "PROVIDER_BLOCK", reason="x")
        second.add("D", "P05", "INVALID_TEST", reason="x")
        second.add("D", "P06", None)  # unfinished
    return run_overview(sweep_id, progress(sweep_id), 200, "sqlite:///x.db")


@pytest.fixture
def summary(sqlite_url, settings_env) -> RunOverview:
    settings_env(AFP_DATABASE_URL=sqlite_url)
    return _build("layout", [{"provider": "sim", "model": "judge"}])


def render(summary: RunOverview, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(summary_table(summary))
    return console.export_text()


def _pct(x: float) -> str:
    return f"{x:.0%}"


def _pts(x: float) -> str:
    return f"{x * 100:+.0f}"


@pytest.mark.parametrize("width", [80, 120])
def test_every_rate_its_interval_and_the_excluded_counts_are_whole_on_one_line(summary, width):
    """Rule: per model and condition PASS/n, rate, exact 95% interval and each excluded count, uncut."""
    text = render(summary, width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width, "the summary fits the terminal"
    rows = summary.model_dump(mode="json")["by_model_condition"]
    assert len(rows) == 8 and {r["model"] for r in rows} == {"sim-short", LONG_LABEL}
    for row in rows:
        low, high = row["pass_rate_ci95"]
        counts = [row["excluded"][s] for s in EXCLUDED] + [row["unfinished"]]
        pattern = (rf"\b{row['condition']}\s+{row['pass']}/{row['n']}\s+{_pct(row['pass_rate'])}\s+"
                   rf"{_pct(low)}-{_pct(high)}\s+" + r"\s+".join(str(c) for c in counts) + r"\s*$")
        assert any(re.search(pattern, line) for line in lines), (row, text)
    assert sum(r["excluded"]["GRADER_DISPUTE"] for r in rows) == 1 and sum(r["unfinished"] for r in rows) == 1


@pytest.mark.parametrize("width", [80, 120])
def test_paired_comparisons_show_difference_interval_and_p_whole(summary, width):
    """Rule: every paired comparison of the family (all six pairs of A-D) with its pairs, difference and
    Newcombe interval in percentage points, exact McNemar p, the fixture-clustered interval, the
    Holm-adjusted p and the minimum detectable difference, on one line."""
    text = render(summary, width)
    lines = text.splitlines()
    ok = [c for c in summary.model_dump(mode="json")["comparisons"] if c["status"] == "ok"]
    assert len(ok) == 12, summary.comparisons

    def interval(pair: list[float] | None) -> str:
        return "-" if pair is None else f"{re.escape(_pts(pair[0]))} to {re.escape(_pts(pair[1]))}"

    def p(value: float | None) -> str:
        return "-" if value is None else re.escape(format(value, ".2g"))

    for c in ok:
        mdd = "-" if c["min_detectable_difference"] is None else f"{c['min_detectable_difference'] * 100:.0f} pts"
        pattern = (rf"{c['comparison']}\s+{c['n_pairs']}\s+{re.escape(_pts(c['difference']))} pts\s+"
                   rf"{interval(c['difference_ci95'])}\s+{p(c['p_value'])}\s+{interval(c['clustered']['interval'])}"
                   rf"\s+{p(c['holm_p_value'])}\s+{mdd}\s*$")
        assert any(re.search(pattern, line) for line in lines), (c, text)


@pytest.mark.parametrize("width", [80, 120])
def test_nothing_is_cut_labels_fold_and_the_legend_names_every_abbreviation(summary, width):
    """Rule: abbreviate with a legend, never cut: no ellipsis but the seal's, the long label folds whole."""
    text = render(summary, width)
    assert text.count("…") == 1 and f"seal {summary.seal[:16]}…" in text
    for state, short in EXCLUDED_ABBREVIATIONS.items():
        assert f"{short} {state}" in " ".join(text.split()), f"legend lacks {short}"
    folded = "".join(text.split())
    assert "".join(LONG_LABEL.split()) in folded or all(part in text for part in LONG_LABEL.split())
    assert "SIMULATED" in text and "200 attempts" in text


def test_a_sweep_without_judges_says_why_every_cell_is_grader_dispute(sqlite_url, settings_env):
    """Rule: with `judges: []` the summary says why every answered cell ends GRADER_DISPUTE."""
    settings_env(AFP_DATABASE_URL=sqlite_url)
    without = _build("nojudge", [])
    assert without.judges == []
    text = " ".join(render(without, 80).split())
    assert " ".join(NO_JUDGES_NOTE.split()) in text
    with_judge = _build("judged", [{"provider": "sim", "model": "judge", "label": "the judge"}])
    assert with_judge.judges == ["the judge"]
    assert "no judges" not in render(with_judge, 80)


def test_json_keeps_its_keys_and_adds_the_per_model_reading(summary):
    """Rule: --json content unchanged (same keys as before), with the per-model rows, comparisons, the
    no-scored-cell line (None here: cells were scored), the cost beside the plan's estimate and the budget added."""
    summary = summary.model_dump(mode="json")
    before = {"sweep_id", "name", "simulated", "status", "seal", "cells", "done", "by_phase", "by_state",
              "by_condition", "pass_rate_by_condition", "attempts", "exclusion_balance", "notices", "database"}
    assert before <= set(summary)
    added = {"judges", "by_model_condition", "comparisons", "no_scored_cell", "cost", "budget", "waiting_for_slot",
             "stages", "human_decisions", "batches"}
    assert set(summary) - before == added
    assert summary["no_scored_cell"] is None
    assert summary["pass_rate_by_condition"]["C"]["n"] == 24 and summary["by_condition"]["D"]["(queued)"] == 1


def test_the_progress_bar_counts_decided_cells_and_says_where_the_others_stand():
    """Live progress by stage in the bar: decided M/N, then answering, answered (awaiting a judge) and
    judging, redrawn from each reading of the sweep's progress."""
    from io import StringIO

    from afpbench.api.display import progress_bar
    from afpbench.workers.sweeps.progress import Progress

    out = StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    with progress_bar(console) as update:
        update(Progress("s1", 10, 2, {"done": 2, "executing": 1, "awaiting_score": 3, "scoring": 4}, {}, "running"))
    text = out.getvalue()
    assert "decided" in text and "2/10" in text
    assert "answering 1 · answered 3 · judging 4" in text
