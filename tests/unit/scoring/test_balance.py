"""Exclusion balance: the share of cells outside PASS/(PASS+FAIL) per model and condition, and a flag
when two compared conditions lose markedly different shares (two-sided Fisher exact, p < 0.05).

Protocol rule: the pass rate uses only MODEL_PASS and MODEL_FAIL and every other state stays visible;
an exclusion that depends on the condition biases the comparison, so it is tested and shown.
"""

from __future__ import annotations

import io
import math

import pytest
from rich.console import Console

from afpbench.api.display import summary_table
from afpbench.api.report import render_report
from afpbench.api.run_overview import run_overview
from afpbench.scoring.balance import ALPHA, balance_test, exclusion_balance, share_of
from afpbench.scoring.rates import EXCLUDED, UNFINISHED
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.runs import progress
from afpbench.workers.store.db import session_scope
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep


def fisher_two_sided(a: int, b: int, c: int, d: int) -> float:
    """Independent of scipy: sum the hypergeometric probabilities of every table with the same margins
    that is no more likely than the observed one."""
    row, col, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return math.comb(col, x) * math.comb(n - col, row - x) / math.comb(n, row)

    observed = prob(a)
    support = range(max(0, row + col - n), min(row, col) + 1)
    return sum(p for p in map(prob, support) if p <= observed * (1 + 1e-7))


def share(condition: str, model: str = "m", **counts: int):
    return share_of("h-" + model, model, condition, counts)


@pytest.mark.parametrize(("first_excluded", "flagged"), [(6, True), (5, True), (4, False), (3, False)])
def test_fisher_exact_on_excluded_vs_scored_flags_at_five_percent(first_excluded, flagged):
    first = share("C", GRADER_DISPUTE=first_excluded, MODEL_PASS=10 - first_excluded)
    second = share("B", MODEL_PASS=7, MODEL_FAIL=3)
    test = balance_test(first, second)
    expected = fisher_two_sided(first_excluded, 10 - first_excluded, 0, 10)
    assert test.p_value == pytest.approx(expected, rel=1e-9)
    assert test.flagged is flagged and (expected < ALPHA) is flagged
    assert (test.first_excluded, test.first_scored, test.second_excluded, test.second_scored) == (
        first_excluded, 10 - first_excluded, 0, 10)
    assert ("FLAGGED" in test.reading) is flagged and "Fisher exact p =" in test.reading


def test_the_test_is_symmetric_in_the_two_conditions():
    a, b = share("D", INFRA_ERROR=2, PROVIDER_BLOCK=3, MODEL_FAIL=5), share("C", MODEL_PASS=9, INVALID_TEST=1)
    assert balance_test(a, b).p_value == pytest.approx(balance_test(b, a).p_value)


def test_each_excluded_state_has_its_share_of_finished_cells_and_unfinished_are_apart():
    s = share("C", MODEL_PASS=4, MODEL_FAIL=2, GRADER_DISPUTE=2, INFRA_ERROR=1, PROVIDER_BLOCK=1, **{UNFINISHED: 5})
    assert (s.finished, s.scored, s.excluded, s.unfinished) == (10, 6, 4, 5)
    assert s.excluded_share == pytest.approx(0.4)
    assert s.share_by_state == {"PROVIDER_BLOCK": 0.1, "INFRA_ERROR": 0.1, "INVALID_TEST": 0.0,
                                "GRADER_DISPUTE": 0.2}
    assert set(s.by_state) == set(EXCLUDED)


def test_a_condition_without_finished_cells_is_not_tested_nor_flagged():
    test = balance_test(share("C", **{UNFINISHED: 3}), share("B", MODEL_PASS=5))
    assert test.p_value is None and not test.flagged and "not tested" in test.reading


def test_comparisons_are_per_model_and_only_for_conditions_present():
    counts = {("h1", "C"): {"GRADER_DISPUTE": 6, "MODEL_PASS": 4}, ("h1", "B"): {"MODEL_PASS": 10},
              ("h2", "C"): {"MODEL_PASS": 10}, ("h2", "B"): {"MODEL_PASS": 10}, ("h2", "A"): {"MODEL_FAIL": 1}}
    balance = exclusion_balance(counts, {"h1": "alpha", "h2": "beta"}, (("C", "B"), ("D", "C"), ("B", "A")))
    assert [(t.model, t.comparison, t.flagged) for t in balance.comparisons] == [
        ("alpha", "C vs B", True), ("beta", "C vs B", False), ("beta", "B vs A", False)]
    assert balance.flagged == 1 and "Fisher exact" in balance.test and "p < 0.05" in balance.test
    assert [(s.model, s.condition) for s in balance.shares] == [
        ("alpha", "B"), ("alpha", "C"), ("beta", "A"), ("beta", "B"), ("beta", "C")]


# ---------------------------------------------------------------- through the summary, report and terminal


@pytest.fixture
def unbalanced(sqlite_url, settings_env) -> str:
    """Model sim: condition C loses 6 of 10 cells to GRADER_DISPUTE, B loses none (flagged); the second
    model loses 1 of 10 under C (not flagged)."""
    settings_env(AFP_DATABASE_URL=sqlite_url)
    spec = parse_spec({"judges": [], "models": [{"provider": "sim", "model": "sim-1", "label": "first"},
                                  {"provider": "sim", "model": "sim-2", "label": "second"}]})
    with session_scope() as s:
        sweep = make_sweep(s, "bal", spec=spec)
        first, second = CellMaker(s, sweep, 0), CellMaker(s, sweep, 1)
        for i in range(10):
            first.add("B", "P01", "MODEL_PASS")
            first.add("C", "P01", "GRADER_DISPUTE" if i < 6 else "MODEL_PASS", reason="fatal assertion hit")
            second.add("B", "P01", "MODEL_FAIL")
            second.add("C", "P01", "INFRA_ERROR" if i < 1 else "MODEL_PASS", reason="x")
    return "bal"


def test_the_summary_and_every_report_format_show_and_flag_it(unbalanced):
    summary = snapshot(unbalanced)
    balance = summary.exclusion_balance
    [flagged] = [t for t in balance.comparisons if t.flagged]
    assert (flagged.model, flagged.comparison) == ("first", "C vs B")
    assert flagged.p_value == pytest.approx(fisher_two_sided(6, 4, 0, 10))
    c_share = next(s for s in balance.shares if s.model == "first" and s.condition == "C")
    assert c_share.share_by_state["GRADER_DISPUTE"] == pytest.approx(0.6)

    md = render_report(summary, "md")
    assert "## Exclusion balance: excluded share of finished cells by model and condition" in md
    assert "| first | C | 10 | 4 | 6 (60.0%) |" in md
    comparisons = md.split("## Exclusion balance: comparisons", 1)[1].split("## ", 1)[0]
    assert "two-sided Fisher exact test" in comparisons and "p < 0.05" in comparisons
    assert "| first | C vs B | 6/10 | 0/10 |" in comparisons and "| FLAGGED |" in comparisons
    assert "| second | C vs B | 1/10 | 0/10 | 1 | ok |" in comparisons
    assert "exclusion balance: first C vs B flagged" in md, "the headline warns before any table"
    assert "FLAGGED" in render_report(summary, "html")
    assert '"flagged": true' in render_report(summary, "json")


def test_the_terminal_summary_and_json_carry_it_briefly(unbalanced):
    data = run_overview(unbalanced, progress(unbalanced), 40, "sqlite:///x")
    assert data.exclusion_balance == snapshot(unbalanced).exclusion_balance, \
        "run --json and the report give the same reading"
    out = io.StringIO()
    Console(file=out, width=200).print(summary_table(data))
    assert "exclusion balance: first C vs B FLAGGED (Fisher exact p = 0.0108)" in out.getvalue()
