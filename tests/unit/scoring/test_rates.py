"""The summary's pure arithmetic (scoring/rates.py, scoring/measures.py), from counts alone: no database.

Each test names the protocol rule it checks (reference/protocol.yaml; PROVENANCE.md "Statistics").
"""

from __future__ import annotations

import ast
import random
from collections import Counter
from dataclasses import dataclass

import pytest

from afpbench.scoring.measures import MEANS, ScoredGroup, ScoreMeans, Sum, TokenCounts, score_summary, token_cost
from afpbench.scoring.rates import (
    EXCLUDED,
    FAIL,
    NOT_RUN,
    PASS,
    UNFINISHED,
    NoPairs,
    PairedTest,
    PairUnit,
    RateBlock,
    StateCounts,
    StateRow,
    compare,
    high_risk_readiness,
    pair_tables,
    pending_reading,
    rate_block,
    rate_blocks,
)
from afpbench.workers.sweeps.prices import Prices
from tests.conftest import REPO

SCORING = REPO / "scoring"


def _row(condition: str = "C", state: str | None = PASS, cells: int = 1, *, done: bool = True, fixture: str = "P01",
         high_risk: bool = False, model: str = "m1") -> StateRow:
    return StateRow(model_hash=model, condition=condition, fixture_id=fixture, fixture_version="1",
                    high_risk=high_risk, done=done, state=state, cells=cells)


# ---------------------------------------------------------------- pass rate and its denominator


def test_denominator_is_pass_plus_fail_and_every_other_state_is_counted_beside_it():
    """Rule (result_states): pass rate = MODEL_PASS / (MODEL_PASS + MODEL_FAIL); PROVIDER_BLOCK, INFRA_ERROR,
    INVALID_TEST, GRADER_DISPUTE and unfinished cells are shown beside the rate, never folded in."""
    counts = {PASS: 7, FAIL: 3, "PROVIDER_BLOCK": 1, "INFRA_ERROR": 2, "INVALID_TEST": 1, "GRADER_DISPUTE": 1,
              UNFINISHED: 4}
    block = rate_block(counts)
    assert (block.passed, block.failed, block.n) == (7, 3, 10)
    assert block.pass_rate == pytest.approx(0.7, abs=1e-12)
    assert block.excluded == {"PROVIDER_BLOCK": 1, "INFRA_ERROR": 2, "INVALID_TEST": 1, "GRADER_DISPUTE": 1}
    assert block.unfinished == 4 and block.cells == 19
    assert EXCLUDED == ("PROVIDER_BLOCK", "INFRA_ERROR", "INVALID_TEST", "GRADER_DISPUTE")


def test_nothing_scored_has_no_rate_not_zero():
    """Rule: with no MODEL_PASS or MODEL_FAIL there is no pass rate (never a made-up 0 or 1)."""
    block = rate_block({"INFRA_ERROR": 5})
    assert block.n == 0 and block.pass_rate is None and block.pass_rate_ci95 is None
    assert block.failures == "no scored runs"
    assert block.excluded["INFRA_ERROR"] == 5 and block.excluded["PROVIDER_BLOCK"] == 0  # zeros are listed


def test_a_cell_counts_by_its_final_state_only_once_done():
    """Rule: only a finished cell has a result state; a cell still in flight is UNFINISHED, outside the rate."""
    rows = [_row(state=PASS), _row(state=PASS, done=False), _row(state=None, done=False), _row(state=FAIL, cells=2)]
    assert StateCounts.of(rows).total == {PASS: 1, UNFINISHED: 2, FAIL: 2}
    assert _row(state=FAIL, done=False).outcome == UNFINISHED


def test_rate_blocks_give_one_rate_per_group_in_key_order():
    rows = [_row("C", PASS), _row("A", FAIL), _row("C", FAIL), _row("A", "INVALID_TEST")]
    blocks = rate_blocks(StateCounts.of(rows).by_condition)
    assert list(blocks) == ["A", "C"]
    assert (blocks["A"].n, blocks["A"].excluded["INVALID_TEST"]) == (1, 1)
    assert blocks["C"].pass_rate == 0.5


def test_groups_with_the_same_counts_share_one_block_with_exactly_their_rate():
    """Pass-rate rule per group: each group's block is the rate of its own counts, computed once for all
    groups with those counts (10,000 fixtures hold a handful of distinct counts)."""
    rows = [_row("A", PASS), _row("B", PASS), _row("C", PASS), _row("C", FAIL), _row("D", FAIL), _row("D", PASS)]
    blocks = rate_blocks(StateCounts.of(rows).by_condition)
    assert blocks["A"] is blocks["B"] and blocks["C"] is blocks["D"]  # D's rows came in the other order
    assert blocks["A"] is not blocks["C"]
    assert blocks["A"] == rate_block({PASS: 1}) and blocks["C"] == rate_block({PASS: 1, FAIL: 1})


def test_streamed_counts_equal_a_recount_of_the_rows_in_any_order():
    """Denominator rule per group: each grouping of the summary counts every cell once by its outcome, whatever
    the order the grouped rows arrive in (the fold never sees them all at once)."""
    rng = random.Random(7)
    states = [PASS, FAIL, *EXCLUDED, None]
    rows = [_row(rng.choice("ABCD"), rng.choice(states), rng.randint(1, 3), done=rng.random() < 0.8,
                 fixture=rng.choice(["P01", "P05", "P06"]), high_risk=False, model=rng.choice(["m1", "m2"]))
            for _ in range(300)]
    rows = [StateRow(r.model_hash, r.condition, r.fixture_id, r.fixture_version, r.fixture_id != "P01", r.done,
                     r.state, r.cells) for r in rows]
    rng.shuffle(rows)
    counts = StateCounts.of(rows)

    def recount(key) -> dict:
        out: dict = {}
        for r in rows:
            out.setdefault(key(r), Counter())[r.outcome] += r.cells
        return {k: dict(v) for k, v in out.items()}

    assert counts.by_condition == recount(lambda r: r.condition)
    assert counts.by_model_condition == recount(lambda r: (r.model_hash, r.condition))
    assert counts.by_fixture_condition == recount(
        lambda r: (r.fixture_id, r.fixture_version, r.condition))
    assert counts.total == Counter({o: n for c in recount(lambda r: 0).values() for o, n in c.items()})
    assert counts.cells == sum(r.cells for r in rows)
    finished = Counter()
    for r in (r for r in rows if r.high_risk):  # a group with only unfinished repeats is there, with 0
        ran = r.outcome not in (UNFINISHED, NOT_RUN)
        finished[(r.model_hash, r.fixture_id, r.fixture_version, r.condition)] += r.cells * ran
    assert counts.high_risk_finished == finished and counts.high_risk_fixtures == {("P05", "1"), ("P06", "1")}
    in_order = StateCounts.of(sorted(rows, key=lambda r: (r.fixture_id, r.fixture_version, r.condition)))
    assert in_order.by_fixture_condition == counts.by_fixture_condition
    # In fixture order, fixture groups with the same counts hold one object (what keeps 10,000 fixtures small).
    alike = StateCounts.of([_row("A", PASS, fixture="Q1", model="m1"), _row("A", FAIL, fixture="Q1", model="m2"),
                            _row("A", FAIL, fixture="Q2", model="m1"), _row("A", PASS, fixture="Q2", model="m2"),
                            _row("A", PASS, fixture="Q3", model="m1")]).by_fixture_condition
    assert alike[("Q1", "1", "A")] is alike[("Q2", "1", "A")] == {PASS: 1, FAIL: 1}
    assert alike[("Q3", "1", "A")] == {PASS: 1}


def test_rate_block_json_keys_are_the_stored_contract():
    """The stored summary's keys ('pass', 'fail', ...) are the contract; the JSON validates back to the block."""
    block = rate_block({PASS: 2, FAIL: 1})
    dumped = block.model_dump(mode="json")
    assert set(dumped) == {"pass", "fail", "n", "pass_rate", "pass_rate_ci95", "failures", "excluded", "unfinished",
                           "not_run", "cells"}
    assert isinstance(dumped["pass_rate_ci95"], list)
    assert RateBlock.model_validate(dumped) == block


# ---------------------------------------------------------------- failure readings


def test_zero_failures_read_as_the_exact_upper_bound():
    """Rule: zero failures are an estimate: '0/n; upper bound x%' with x = 1 - 0.05^(1/n), never certainty."""
    block = rate_block({PASS: 5})
    assert block.failures == f"0/5; upper bound {(1 - 0.05 ** (1 / 5)) * 100:.1f}%" == "0/5; upper bound 45.1%"
    # k = n = 5: the lower bound solves p^5 = 0.025 (the Beta(5, 1) quantile)
    assert block.pass_rate == 1.0 and block.pass_rate_ci95 == (pytest.approx(0.025 ** (1 / 5), rel=1e-12), 1.0)


def test_rule_of_three_is_shown_only_from_n30():
    """Rule: 3/n is the large-sample approximation of the zero-failure bound and appears only for n >= 30."""
    assert rate_block({PASS: 29}).failures == "0/29; upper bound 9.8%"
    assert rate_block({PASS: 30}).failures == "0/30; upper bound 9.5%; 3/n 10.0%"


def test_k_failures_read_with_the_exact_clopper_pearson_interval():
    """Rule: k failures in n get the exact Clopper-Pearson interval (Beta quantiles), not a normal approximation."""
    beta = pytest.importorskip("scipy.stats").beta
    block = rate_block({PASS: 7, FAIL: 3})
    low, high = block.pass_rate_ci95 or (None, None)
    assert low == pytest.approx(beta.ppf(0.025, 7, 4), abs=1e-12)
    assert high == pytest.approx(beta.ppf(0.975, 8, 3), abs=1e-12)
    f_low, f_high = beta.ppf(0.025, 3, 8), beta.ppf(0.975, 4, 7)
    assert block.failures == f"3/10 failures (30.0%, 95% CI {f_low * 100:.1f}%-{f_high * 100:.1f}%)"


# ---------------------------------------------------------------- high-risk readiness and comparisons


def test_comparisons_are_pending_until_every_high_risk_group_has_its_finished_repeats():
    """Rule (reruns): no comparative result while a high-risk fixture lacks >=3 finished repeats per model and
    condition; a queued repeat does not count."""
    labels = {"m1": "model one"}
    two = [_row("B", PASS, 2, fixture="P05", high_risk=True), _row("C", FAIL, 2, fixture="P05", high_risk=True),
           _row("C", None, 1, done=False, fixture="P05", high_risk=True), _row("C", PASS, 9)]
    readiness = high_risk_readiness(StateCounts.of(two), labels, required=3)
    assert readiness.ready is False and readiness.lacking_count == 2
    assert readiness.fixtures == ["P05@1"] and readiness.required_repeats == 3
    assert [(g.condition, g.finished_repeats) for g in readiness.lacking] == [("B", 2), ("C", 2)]
    three = [*two, _row("B", "INFRA_ERROR", 1, fixture="P05", high_risk=True),
             _row("C", PASS, 1, fixture="P05", high_risk=True)]
    # any terminal state is a finished repeat
    assert high_risk_readiness(StateCounts.of(three), labels, required=3).ready is True
    assert pending_reading(3) == "pending: high-risk fixtures need >=3 repeats per condition"


def test_a_sweep_without_high_risk_fixtures_is_ready():
    readiness = high_risk_readiness(StateCounts.of([_row("C", PASS)]), {"m1": "m"}, required=3)
    assert readiness.ready is True and readiness.fixtures == [] and readiness.lacking == []


def test_pairs_are_units_scored_under_both_conditions():
    """Rule: conditions compare on the same model, fixture and repeat, both MODEL_PASS or MODEL_FAIL."""
    units = [PairUnit("m1", {"C": PASS, "B": FAIL}, 10), PairUnit("m1", {"C": FAIL, "B": PASS}, 2),
             PairUnit("m1", {"C": PASS, "B": None}, 7), PairUnit("m2", {"C": PASS, "B": PASS}, 1)]
    tables = pair_tables(units, "C", "B")
    assert tables["m1"] == {(True, False): 10, (False, True): 2}
    assert tables["m2"] == {(True, True): 1}


def test_exact_mcnemar_on_discordant_pairs():
    """Rule: exact McNemar (two-sided binomial on b and c) and the paired difference, first minus second."""
    test = compare("C", "B", {(True, False): 10, (False, True): 2, (True, True): 5, (False, False): 3})
    assert isinstance(test, PairedTest) and test.status == "ok"
    assert (test.b, test.c, test.n_pairs, test.both_pass, test.both_fail) == (10, 2, 20, 5, 3)
    assert test.p_value == pytest.approx(158 / 4096, abs=1e-12)  # 2 * P(X <= 2), X ~ Bin(12, 1/2)
    assert test.difference == pytest.approx(0.4)
    low, high = test.difference_ci95
    assert -1 <= low < 0.4 < high <= 1
    assert test.reading.startswith("C vs B: pass rate difference +40.0 pts") and "p = 0.03857" in test.reading


def test_no_matched_pairs_reads_so_and_carries_no_p_value():
    test = compare("D", "C", {})
    assert isinstance(test, NoPairs)
    assert test.model_dump() == {"n_pairs": 0, "both_pass": 0, "b": 0, "c": 0, "both_fail": 0,
                                 "status": "no matched pairs", "reading": "D vs C: no matched pairs"}


# ---------------------------------------------------------------- scores, fatal criteria, tokens, cost


def _group(condition: str, state: str, cells: int, fatal: str | None = None, score: int = 2,
           model: str = "m1") -> ScoredGroup:
    return ScoredGroup(model_hash=model, condition=condition, state=state, fatal_criterion=fatal, cells=cells,
                       scores={n: Sum(score * cells * (4 if n == "total" else 1), cells) for n in MEANS},
                       output_tokens=Sum(100 * cells, cells))


def test_means_fatal_criteria_and_output_tokens():
    """Mean rubric score per dimension over scored cells; fatal failures counted by criterion, a FAIL without
    one counted as below the pass rule; mean output tokens of the scored answer."""
    groups = [_group("C", PASS, 7, score=2), _group("C", FAIL, 2, "fabricated_fact", score=1),
              _group("C", FAIL, 1, None, score=1), _group("A", PASS, 1, model="m2")]
    dims, tokens, fatal = score_summary(groups, {"m1": "b-model", "m2": "a-model"})
    c = next(r for r in dims.by_condition if r.condition == "C")
    assert c.task_correctness == pytest.approx((7 * 2 + 3 * 1) / 10) and c.total == pytest.approx((7 * 8 + 3 * 4) / 10)
    assert c.n_scored == 10
    assert [(r.model, r.condition) for r in dims.by_model_condition] == [("a-model", "A"), ("b-model", "C")]
    assert fatal.by_condition == {"C": {"fabricated_fact": 2}} and fatal.fail_without_fatal == {"C": 1}
    assert [(r.condition, r.mean_output_tokens, r.n) for r in tokens.by_condition] == [("A", 100.0, 1),
                                                                                          ("C", 100.0, 10)]


def test_nothing_scored_has_no_mean():
    dims, tokens, _ = score_summary([ScoredGroup("m1", "A", PASS, None, 1, {}, Sum())], {})
    assert dims.by_condition[0].total is None and dims.by_condition[0].n_scored == 0
    assert tokens.by_condition[0].mean_output_tokens is None


def test_score_means_fields_are_the_rubric_dimensions_and_total():
    assert list(ScoreMeans.model_fields) == [*MEANS, "n_scored"]


@dataclass(frozen=True)
class Counting:  # scoring.measures.TokenCounting, as each provider family's adapter declares it
    cached_inside_input: bool
    reasoning_inside_output: bool


def test_cost_follows_the_counting_rule_it_is_given():
    """Cost rule: cached input priced at the cached rate and taken out of the input where the provider's
    usage counts it inside (the adapter's usage_counting); reasoning likewise out of output; an undeclared
    (0) cached or reasoning price falls back to the input or output rate."""
    prices = Prices(input_per_mtok=2, output_per_mtok=8, cached_per_mtok=0.5)
    tokens = TokenCounts(input=1_000_000, output=500_000, cached=200_000, reasoning=100_000)
    # Both inside (OpenAI-compatible): 800k fresh x 2 + 200k cached x 0.5 + 400k visible x 8 + 100k reasoning x 8
    assert token_cost(Counting(True, True), prices, tokens) == pytest.approx(1.6 + 0.1 + 3.2 + 0.8)
    # Both beside (Anthropic): 1M x 2 + 200k x 0.5 + 500k x 8 + 100k x 8
    assert token_cost(Counting(False, False), prices, tokens) == pytest.approx(2.0 + 0.1 + 4.0 + 0.8)
    # Cached inside input, reasoning beside output (Gemini)
    assert token_cost(Counting(True, False), prices, tokens) == pytest.approx(1.6 + 0.1 + 4.0 + 0.8)
    assert token_cost(Counting(True, True), Prices(), tokens) == 0.0


# ---------------------------------------------------------------- purity


@pytest.mark.parametrize("module", ["rates.py", "measures.py"])
def test_the_arithmetic_is_pure(module):
    """Layering: scoring does no I/O: no SQL, no Celery, no runtime (workers) or front-door (api) imports."""
    tree = ast.parse((SCORING / module).read_text(encoding="utf-8"))
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    forbidden = ("sqlalchemy", "sqlmodel", "celery", "redis", "requests", "afpbench.workers", "afpbench.api", "os")
    assert not [n for n in names if n.split(".")[0] in forbidden or n.startswith(forbidden)]


def test_a_cell_never_sent_for_the_budget_is_not_run_outside_every_denominator():
    """Budget rule (docs/PROTOCOL.md): a finished cell with no result state was never sent; it is counted
    NOT_RUN, never in PASS/(PASS+FAIL), never an excluded state such as INFRA_ERROR."""
    row = _row("A", None, 4, done=True, fixture="P01", high_risk=False, model="m1")
    assert row.outcome == NOT_RUN
    block = rate_block({PASS: 1, FAIL: 1, NOT_RUN: 4})
    assert block.n == 2 and block.not_run == 4 and block.cells == 6 and block.unfinished == 0
    assert all(v == 0 for v in block.excluded.values())
