"""Aggregation over a sweep with KNOWN states in SQLite: exact rates, intervals, exclusions, comparisons, cost."""

from __future__ import annotations

import pytest
from sqlmodel import func, select

from afpbench.workers.cells.finish import aggregate_now
from afpbench.workers.results import aggregation
from afpbench.workers.results.comparison_rows import PENDING_READING
from afpbench.workers.store.db import session_scope
from afpbench.workers.store.models import Aggregate, Attempt, Result, SweepStatus
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

PASS, FAIL = "MODEL_PASS", "MODEL_FAIL"


def aggregate_sweep(sweep_id: str) -> dict:
    """The summary as stored (SweepSummary.model_dump(mode="json")): the shape every assertion reads."""
    return aggregation.aggregate_sweep(sweep_id).model_dump(mode="json")


def snapshot(sweep_id: str, interim: bool | None = True) -> dict:
    return aggregation.snapshot(sweep_id, interim=interim).model_dump(mode="json")


@pytest.fixture
def db(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    return sqlite_url


def _row(rows: list[dict], **match) -> dict:
    hits = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(hits) == 1, (match, rows)
    return hits[0]


def _build_mixed(sweep_id: str = "sw1", status: str = SweepStatus.complete) -> None:
    """Condition C: 7 PASS, 3 FAIL, one of each excluded state, one INFRA_ERROR more, one unfinished.
    Condition A: 5 PASS, 0 FAIL."""
    with session_scope() as s:
        sweep = make_sweep(s, sweep_id, status=status)
        cells = CellMaker(s, sweep)
        for _ in range(7):
            cells.add("C", "P01", PASS)
        for fatal in ("fabricated_fact", "fabricated_fact", None):
            cells.add("C", "P01", FAIL, fatal=fatal)
        for state in ("PROVIDER_BLOCK", "INFRA_ERROR", "INFRA_ERROR", "INVALID_TEST", "GRADER_DISPUTE"):
            cells.add("C", "P02", state, reason=f"because {state}")
        cells.add("C", "P02", None)
        for _ in range(5):
            cells.add("A", "P01", PASS)


def test_pass_rate_counts_only_pass_and_fail_and_shows_every_excluded_state(db):
    """Protocol: pass rate = PASS/(PASS+FAIL); block, infra, invalid, dispute and unfinished stay visible."""
    _build_mixed()
    summary = aggregate_sweep("sw1")
    c = _row(summary["by_model_condition"], condition="C")
    assert (c["pass"], c["fail"], c["n"]) == (7, 3, 10)
    assert c["pass_rate"] == pytest.approx(0.7, abs=1e-12)
    assert c["excluded"] == {"PROVIDER_BLOCK": 1, "INFRA_ERROR": 2, "INVALID_TEST": 1, "GRADER_DISPUTE": 1}
    assert c["unfinished"] == 1
    assert c["cells"] == 16
    assert summary["unfinished"] == 1 and summary["cells"] == 21


def test_clopper_pearson_interval_is_exact_beta_quantiles(db):
    """Protocol (AP-1 statistics): k in n gets the exact Clopper-Pearson interval, not a normal approximation."""
    beta = pytest.importorskip("scipy.stats").beta
    _build_mixed()
    c = _row(snapshot("sw1")["by_model_condition"], condition="C")
    low, high = c["pass_rate_ci95"]
    assert low == pytest.approx(beta.ppf(0.025, 7, 4), abs=1e-12)
    assert high == pytest.approx(beta.ppf(0.975, 8, 3), abs=1e-12)
    assert c["failures"].startswith("3/10 failures (30.0%, 95% CI")
    a = _row(snapshot("sw1")["by_model_condition"], condition="A")
    assert a["pass_rate_ci95"] == [pytest.approx(beta.ppf(0.025, 5, 1), abs=1e-12), 1.0]  # k = n: upper is 1


def test_zero_failures_read_as_bound_not_certainty(db):
    """Protocol: 0 failures read '0/n; upper bound x%' with 1-0.05^(1/n); 3/n only from n = 30."""
    _build_mixed()
    a = _row(snapshot("sw1")["by_model_condition"], condition="A")
    assert a["failures"] == f"0/5; upper bound {(1 - 0.05 ** (1 / 5)) * 100:.1f}%"
    assert a["failures"] == "0/5; upper bound 45.1%"
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "sw30"))
        for _ in range(30):
            cells.add("B", "P01", PASS)
    b = _row(snapshot("sw30")["by_model_condition"], condition="B")
    assert b["failures"] == "0/30; upper bound 9.5%; 3/n 10.0%"


def test_per_fixture_dimensions_fatal_and_output_tokens(db):
    """Rubric means per dimension per condition, fatal failures by criterion, mean output tokens of the
    scored attempt (not a later unscored one)."""
    _build_mixed()
    with session_scope() as s:
        # A later attempt on a scored cell that the latest result does not name: it must not count.
        first_pass = s.exec(select(Result).where(Result.state == PASS)).first()
        s.add(Attempt(cell_id=first_pass.cell_id, number=2, outcome="answer", output_tokens=99999))
    summary = snapshot("sw1")
    fx = _row(summary["by_fixture_condition"], fixture_id="P02", condition="C")
    assert fx["n"] == 0 and fx["pass_rate"] is None and fx["failures"] == "no scored runs"
    assert fx["excluded"]["INFRA_ERROR"] == 2 and fx["unfinished"] == 1
    dims = _row(summary["dimensions"]["by_condition"], condition="C")
    assert dims["task_correctness"] == pytest.approx((7 * 2 + 3 * 1) / 10)
    assert dims["evidence_discipline"] == pytest.approx(7 * 2 / 10)
    assert dims["total"] == pytest.approx((7 * 7 + 3 * 3) / 10)
    assert dims["n_scored"] == 10
    assert summary["fatal_by_criterion"]["by_condition"]["C"] == {"fabricated_fact": 2}
    assert summary["fatal_by_criterion"]["fail_without_fatal"] == {"C": 1}
    tokens = _row(summary["output_tokens"]["by_condition"], condition="C")
    assert tokens["mean_output_tokens"] == pytest.approx(100.0) and tokens["n"] == 10


def _build_pairs(sweep_id: str, b: int, c: int, both_pass: int, both_fail: int, hr_repeats: int | None = None):
    """Matched C/B pairs of one model on distinct repeats of P01; b = C pass & B fail, c = C fail & B pass."""
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, sweep_id))
        plan = [(PASS, FAIL)] * b + [(FAIL, PASS)] * c + [(PASS, PASS)] * both_pass + [(FAIL, FAIL)] * both_fail
        for r, (in_c, in_b) in enumerate(plan, start=1):
            cells.add("C", "P01", in_c, repeat=r)
            cells.add("B", "P01", in_b, repeat=r)
        # Unmatched: C scored but B blocked on the same repeat -> not a pair.
        cells.add("C", "P01", PASS, repeat=len(plan) + 1)
        cells.add("B", "P01", "PROVIDER_BLOCK", repeat=len(plan) + 1)
        if hr_repeats is not None:
            for cond in ("B", "C"):
                for _ in range(hr_repeats):
                    cells.add(cond, "P05", PASS, high_risk=True)


def test_mcnemar_exact_on_matched_pairs(db):
    """Protocol: conditions compare on the same model, fixture and repeat; exact McNemar on discordant pairs."""
    _build_pairs("mc", b=10, c=2, both_pass=5, both_fail=3)
    cmp_ = _row(aggregate_sweep("mc")["comparisons"], comparison="C vs B")
    assert cmp_["status"] == "ok"
    assert (cmp_["b"], cmp_["c"], cmp_["n_pairs"]) == (10, 2, 20)
    assert cmp_["p_value"] == pytest.approx(158 / 4096, abs=1e-12)  # 2 * P(X <= 2), X ~ Bin(12, 1/2)
    assert round(cmp_["p_value"], 5) == 0.03857
    assert cmp_["difference"] == pytest.approx((10 - 2) / 20)
    low, high = cmp_["difference_ci95"]
    assert low < 0.4 < high and -1 <= low and high <= 1
    assert "p = 0.03857" in cmp_["reading"]


def test_comparisons_pending_until_high_risk_fixture_has_three_repeats(db):
    """Protocol: no comparative result while a high-risk fixture lacks >=3 finished repeats per condition."""
    _build_pairs("hr2", b=10, c=2, both_pass=0, both_fail=0, hr_repeats=2)
    summary = aggregate_sweep("hr2")
    assert summary["high_risk"]["ready"] is False
    assert summary["comparisons"] and all(c["status"] == "pending" for c in summary["comparisons"])
    assert all(c["reading"] == "pending: high-risk fixtures need >=3 repeats per condition"
               for c in summary["comparisons"])
    assert PENDING_READING == "pending: high-risk fixtures need >=3 repeats per condition"
    assert "p_value" not in summary["comparisons"][0]
    _build_pairs("hr3", b=10, c=2, both_pass=0, both_fail=0, hr_repeats=3)
    ready = aggregate_sweep("hr3")
    assert ready["high_risk"]["ready"] is True
    assert _row(ready["comparisons"], comparison="C vs B")["status"] == "ok"


def test_unfinished_high_risk_repeat_keeps_comparisons_pending(db):
    """A queued (not yet terminal) repeat does not count towards the three high-risk repeats."""
    _build_pairs("hrq", b=1, c=1, both_pass=0, both_fail=0, hr_repeats=2)
    with session_scope() as s:
        from afpbench.workers.store.models import Sweep

        cells = CellMaker(s, s.get(Sweep, "hrq"))
        for cond in ("B", "C"):
            cells.add(cond, "P05", None, repeat=3, high_risk=True)
    assert all(c["status"] == "pending" for c in snapshot("hrq")["comparisons"])


def test_cost_from_declared_prices(db):
    """Cost = token usage x declared prices, cached and reasoning tokens priced once, per model and sweep."""
    spec = parse_spec({"name": "priced", "judges": [], "models": [
        {"provider": "openai", "model": "gpt-x",
         "prices": {"input_per_mtok": 2, "output_per_mtok": 8, "cached_per_mtok": 0.5}},
        {"provider": "anthropic", "model": "claude-x",
         "prices": {"input_per_mtok": 3, "output_per_mtok": 15, "cached_per_mtok": 0.3}},
    ]})
    with session_scope() as s:
        sweep = make_sweep(s, "cost", spec=spec)
        openai, anthropic = CellMaker(s, sweep, 0), CellMaker(s, sweep, 1)
        for _ in range(2):  # OpenAI counts cached inside input and reasoning inside output
            openai.add("A", "P01", PASS, output_tokens=250_000,
                       tokens={"input": 500_000, "cached": 100_000, "reasoning": 50_000})
        anthropic.add("A", "P01", FAIL, output_tokens=100_000, tokens={"input": 1_000_000, "cached": 500_000})
    summary = aggregate_sweep("cost")
    by_model = {r["model"]: r for r in summary["cost"]["by_model"]}
    # 800k fresh x 2 + 200k cached x 0.5 + 400k visible x 8 + 100k reasoning x 8 (no reasoning price declared)
    assert by_model["openai/gpt-x"]["usd"] == pytest.approx(1.6 + 0.1 + 3.2 + 0.8)
    # Anthropic reports cache reads beside the input count: 1M x 3 + 500k x 0.3 + 100k x 15
    assert by_model["anthropic/claude-x"]["usd"] == pytest.approx(3.0 + 0.15 + 1.5)
    assert summary["cost"]["sweep_usd"] == pytest.approx(5.7 + 4.65)
    assert by_model["openai/gpt-x"]["attempts"] == 2
    assert summary["simulated"] is False


def test_aggregate_row_is_one_row_overwritten_and_simulated_flagged(db):
    """Re-running aggregation recomputes the same Aggregate row; a sim sweep is labelled simulated."""
    _build_mixed()
    with session_scope() as s:
        s.add(Aggregate(sweep_id="sw1", claimed_by="worker-that-finished-last"))
    first = aggregate_sweep("sw1")
    with session_scope() as s:
        s.add(Result(cell_id=1, sweep_id="sw1", scoring_run=2, state=FAIL, total=0, scorer_version="t"))
        from afpbench.workers.store.models import Cell

        cell = s.get(Cell, 1)
        cell.state = FAIL
        s.add(cell)
    second = aggregate_sweep("sw1")
    with session_scope() as s:
        assert s.exec(select(func.count()).select_from(Aggregate)).one() == 1
        stored = s.get(Aggregate, "sw1")
        assert stored.summary["by_model_condition"] == second["by_model_condition"]
        assert stored.finished_at is not None and stored.claimed_by == "worker-that-finished-last"
    assert _row(first["by_model_condition"], condition="C")["pass"] == 7
    assert _row(second["by_model_condition"], condition="C")["pass"] == 6
    assert first["simulated"] is True and first["simulated_parts"] == ["models", "judges"]
    assert first["interim"] is True  # one cell is still unfinished


def test_running_sweep_is_not_claimed_and_snapshot_is_interim(db):
    """An unfinished sweep never gets its Aggregate row from aggregation (that row is the completion claim)."""
    _build_mixed("run1", status=SweepStatus.running)
    assert snapshot("run1", interim=True)["interim"] is True
    summary = aggregate_sweep("run1")
    assert summary["interim"] is True and summary["complete"] is False
    with session_scope() as s:
        assert s.get(Aggregate, "run1") is None


def test_finished_sweep_without_claim_is_claimed_and_stored(db):
    """A sweep whose cells are all done gets its one Aggregate row and reads complete, not interim.
    aggregate_now (the `aggregate` command, the report route) claims it first, then stores the summary."""
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, "fin", status=SweepStatus.running))
        cells.add("A", "P01", PASS)
        cells.add("A", "P01", FAIL)
    summary = aggregate_now("fin", "test").model_dump(mode="json")
    assert summary["complete"] is True and summary["interim"] is False
    with session_scope() as s:
        assert s.get(Aggregate, "fin").summary["totals"]["n"] == 2


def test_postgresql_gives_the_same_summary_as_sqlite(sqlite_url, postgres_url, settings_env):
    """One code path, two databases: JSON extraction, CASE pivots and anti-joins agree (skips without PG)."""
    summaries = []
    for url in (sqlite_url, postgres_url):
        settings_env(AFP_DATABASE_URL=url)
        _build_mixed("both")
        _build_pairs("pairs", b=4, c=1, both_pass=2, both_fail=1, hr_repeats=3)
        summaries.append([snapshot("both"), snapshot("pairs")])
    for lite, pg in zip(*summaries, strict=True):
        for key in ("by_model_condition", "by_fixture_condition", "dimensions", "fatal_by_criterion",
                    "output_tokens", "cost", "comparisons", "high_risk", "totals"):
            assert lite[key] == pg[key], key


def _written(*calls: tuple[str, bool], whole: bool = True) -> dict:
    """A scoring run's details recording tool calls written as text (scoring/written_tool_call.py)."""
    return {"written_tool_call": {"calls": [{"name": n, "arguments": {}, "offered": o, "written": f"{n}()"}
                                            for n, o in calls], "whole_answer": whole}}


def test_the_summary_lists_each_cell_whose_latest_scoring_run_recorded_a_written_tool_call(db):
    """Rule (a written tool call is scored as the text it is, and the reader is told): one entry per cell,
    from its latest scoring run only, tools not offered named so, in cell id order."""
    with session_scope() as session:
        sweep = make_sweep(session)
        cells = CellMaker(session, sweep)
        written_now = cells.add("A", "P01", PASS)
        written_before = cells.add("B", "P01", FAIL)
        never = cells.add("C", "P01", PASS)
        also_now = cells.add("D", "P01", FAIL)
        for cell_id, run, details in ((written_now, 2, _written(("calculator", True), ("shell", False))),
                                      (written_before, 1, _written(("calculator", True))),
                                      (written_before, 2, {}),
                                      (also_now, 2, _written(("calculator", True), whole=False))):
            if run == 1:
                row = session.exec(select(Result).where(Result.cell_id == cell_id)).one()
                row.details = {**row.details, **details}
                session.add(row)
            else:
                session.add(Result(cell_id=cell_id, sweep_id=sweep.id, scoring_run=run, state=PASS,
                                   details=details, scorer_version="test", rationale="SIMULATED rescoring"))
        session.flush()
    listed = aggregate_sweep("sw1")["written_tool_calls"]
    assert [e["cell_id"] for e in listed] == [written_now, also_now]
    assert listed[0]["tools"] == ["calculator", "shell (not offered)"] and listed[0]["whole_answer"] is True
    assert listed[1]["tools"] == ["calculator"] and listed[1]["whole_answer"] is False
    assert listed[0]["condition"] == "A" and listed[0]["fixture"] == "P01@1" and listed[0]["repeat"] == 1
    assert never not in [e["cell_id"] for e in listed]
