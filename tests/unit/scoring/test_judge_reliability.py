"""A sweep's judge reliability from per-cell judgings (scoring/judge_reliability.py, issue 37): the usable
rate, swap consistency, agreement with humans and between judges, length bias, mean length by condition."""

from __future__ import annotations

import pytest

from afpbench.scoring.agreement import cohens_kappa
from afpbench.scoring.judge_reliability import CellJudging, Verdict, judge_reliability

PASSING, FAILING = Verdict((2, 2, 1, 2), True), Verdict((1, 0, 1, 1), False)


def _cells() -> list[CellJudging]:
    return [
        CellJudging("P01@1", "A", 100, {"j1": PASSING, "j2": PASSING}, {"j1": True}, human=True),
        CellJudging("P01@1", "D", 400, {"j1": FAILING, "j2": PASSING}, {"j1": True, "j2": True}),
        CellJudging("P02@1", "A", 120, {"j1": None, "j2": FAILING}, human=False),
        CellJudging("P02@1", "D", 480, {"j1": PASSING, "j2": FAILING}, {"j1": True, "j2": None}),
    ]


def test_per_judge_shares_count_what_the_rule_says():
    """Rules: usable rate over first-round judgings; swap consistency over usable swapped re-judges;
    agreement with human decisions over cells a human decided and the judge judged usably."""
    figures = {f.judge: f for f in judge_reliability(_cells(), ["j1", "j2"]).judges}
    j1, j2 = figures["j1"], figures["j2"]
    assert (j1.usable_rate.count, j1.usable_rate.total) == (3, 4) and j2.usable_rate.share == 1.0
    assert (j1.swap_consistency.count, j1.swap_consistency.total) == (2, 3)  # the D/P01 re-judge flipped
    assert (j2.swap_consistency.count, j2.swap_consistency.total) == (1, 1)  # the unusable re-judge is out
    assert (j1.human_agreement.agreement.count, j1.human_agreement.agreement.total) == (1, 1)
    assert (j2.human_agreement.agreement.count, j2.human_agreement.agreement.total) == (2, 2)
    assert j1.usable_rate.interval is not None and j1.usable_rate.interval[0] < 0.75 < j1.usable_rate.interval[1]


def test_agreement_between_judges_is_kappa_on_pass_fail_and_ordinal_alpha_on_dimensions():
    reliability = judge_reliability(_cells(), ["j1", "j2"], alpha_resamples=200)
    [pair] = reliability.pairs
    assert (pair.first, pair.second) == ("j1", "j2")
    assert pair.kappa == cohens_kappa([(True, True), (False, True), (True, False)])
    assert pair.alpha.units == 12 and pair.alpha.metric == "ordinal"  # 3 cells both judged x 4 dimensions
    assert reliability.alpha_all == pair.alpha


def test_mean_length_by_condition_and_one_judge_has_no_pairs():
    reliability = judge_reliability(_cells(), ["j1"])
    assert reliability.pairs == [] and reliability.alpha_all is None and reliability.cells == 4
    assert {m.condition: m.mean_length for m in reliability.mean_length} == pytest.approx({"A": 110, "D": 440})
    assert reliability.judges[0].length_bias.answers == 3
