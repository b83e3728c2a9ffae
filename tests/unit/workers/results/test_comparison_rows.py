"""The summary's comparisons (workers/results/comparison_rows.py, issue 37): every pair of the conditions run
(or the spec's declared list), each with pairs, difference, the exact and the fixture-clustered interval,
McNemar p, Holm across the model's family and the reading against the minimum detectable difference.
All model output here is SIMULATED."""

from __future__ import annotations

import pytest

from afpbench.scoring.multiplicity import holm
from afpbench.workers.results.aggregation import snapshot
from afpbench.workers.results.comparison_rows import planned_effect, planned_variance
from afpbench.workers.results.summary import PairedComparison
from afpbench.workers.store.db import session_scope
from afpbench.workers.sweeps.spec_loading import parse_spec
from tests.unit.sweep_builder import CellMaker, make_sweep

PASS, FAIL = "MODEL_PASS", "MODEL_FAIL"
SIM = {"provider": "sim", "model": "sim-1", "label": "sim-one"}


@pytest.fixture
def db(sqlite_url, settings_env):
    settings_env(AFP_DATABASE_URL=sqlite_url)
    return sqlite_url


def _sweep(sweep_id: str, conditions: list[str], passes: dict[str, int], fixtures: int = 4, repeats: int = 2,
           **spec: object) -> None:
    """`fixtures` fixtures x `repeats` repeats per condition; condition c passes its first passes[c] units."""
    parsed = parse_spec({"name": sweep_id, "judges": [], "models": [SIM], "conditions": conditions, **spec})
    with session_scope() as s:
        cells = CellMaker(s, make_sweep(s, sweep_id, spec=parsed))
        for i in range(fixtures * repeats):
            for c in conditions:
                cells.add(c, f"F{1 + i % fixtures:02d}", PASS if i < passes[c] else FAIL, repeat=1 + i // fixtures)


def test_a_subset_of_a_and_d_reports_d_vs_a_with_both_intervals_and_p(db):
    """Acceptance: `--conditions A,D` compares what it contains: D vs A with pairs, difference, the exact
    and the clustered interval, McNemar p and the Holm p (a family of one)."""
    _sweep("ad", ["A", "D"], {"A": 1, "D": 7})
    [c] = snapshot("ad", interim=None).comparisons
    assert isinstance(c, PairedComparison) and c.comparison == "D vs A"
    assert c.n_pairs == 8 and c.difference == pytest.approx(0.75)
    assert c.difference_ci95[0] > 0 and c.p_value == pytest.approx(2 / 64)  # 6 discordant, all one way
    assert c.clustered.status == "ok" and c.clustered_ci95 is not None
    assert c.clustered.difference == pytest.approx(c.difference)
    assert c.family_size == 1 and c.holm_p_value == pytest.approx(c.family_p_value)


def test_a_full_sweep_reports_all_six_pairs_with_holm_over_the_family(db):
    """Acceptance: A-D gives six comparisons, later condition first; Holm runs over the six p-values."""
    _sweep("full", ["A", "B", "C", "D"], {"A": 1, "B": 3, "C": 5, "D": 7})
    rows = snapshot("full", interim=None).comparisons
    assert [c.comparison for c in rows] == ["B vs A", "C vs A", "C vs B", "D vs A", "D vs B", "D vs C"]
    paired = [c for c in rows if isinstance(c, PairedComparison)]
    assert len(paired) == 6 and {c.family_size for c in paired} == {6}
    tested = [c for c in paired if c.family_p_value is not None]
    assert [c.holm_p_value for c in tested] == pytest.approx(holm([c.family_p_value for c in tested]))


def test_a_declared_family_is_what_is_compared_in_its_declared_order(db):
    """Rule: the spec's `comparisons:` replaces the default family, and Holm runs over it alone."""
    _sweep("decl", ["A", "B", "C", "D"], {"A": 1, "B": 3, "C": 5, "D": 7}, comparisons=["D vs A", ["A", "C"]])
    rows = snapshot("decl", interim=None).comparisons
    assert [(c.comparison, c.first, c.second) for c in rows] == [("D vs A", "D", "A"), ("A vs C", "A", "C")]
    assert all(isinstance(c, PairedComparison) and c.family_size == 2 for c in rows)
    assert rows[1].difference == pytest.approx(-0.5)  # A minus C, as asked


def test_an_interval_across_zero_reads_underpowered_with_the_mdd_never_no_difference(db):
    """Rule: an interval that includes zero where the MDD exceeds the declared effect reads
    UNDERPOWERED (could detect only >= X points)."""
    _sweep("weak", ["A", "B"], {"A": 12, "B": 14}, fixtures=8, repeats=4)
    [c] = snapshot("weak", interim=None).comparisons
    assert isinstance(c, PairedComparison) and c.min_detectable_difference is not None
    assert c.min_detectable_difference > 0.10
    assert f"UNDERPOWERED (could detect only >= {c.min_detectable_difference * 100:.0f} points)" in c.power_reading.text
    assert "no difference" not in c.power_reading.text.replace("no evidence of a difference", "")


def test_the_sealed_plan_sets_the_declared_effect_and_the_variance_assumed():
    plan = {"detect": 0.2, "power": 0.9, "alpha": 0.01, "comparisons": [
        {"first": "D", "second": "A", "variance": {"discordance": 0.3, "between_fixture_sd": 0.05,
                                                   "source": "pilot"}}]}
    assert planned_effect(plan) == (0.2, 0.9, 0.01) and planned_effect(None) == (0.10, 0.8, 0.05)
    from afpbench.scoring.comparison_family import ConditionPair

    assert planned_variance(plan, ConditionPair("D", "A")).discordance == 0.3
    assert planned_variance(plan, ConditionPair("C", "A")).source == "default"
