"""One model's comparison, whole (issue 37): exact pooled figures, the clustered interval, Holm across the family."""

from __future__ import annotations

import pytest

from afpbench.scoring.clustered import ClusterTable
from afpbench.scoring.comparison_family import ConditionPair, default_family
from afpbench.scoring.comparisons import FixturePairUnit, adjust_family, compare_pair, fixture_tables
from afpbench.scoring.multiplicity import holm
from afpbench.scoring.rates import FAIL, PASS, compare

DA = ConditionPair("D", "A")


def _unit(model: str, fixture: str, d: str | None, a: str | None, units: int = 1) -> FixturePairUnit:
    return FixturePairUnit(model, fixture, {"D": d, "A": a}, units)


def test_fixture_tables_count_pairs_per_model_and_fixture_and_skip_unscored_ones():
    units = [_unit("m1", "P01@1", PASS, FAIL, 2), _unit("m1", "P01@1", PASS, PASS), _unit("m1", "P02@1", FAIL, PASS),
             _unit("m1", "P02@1", None, PASS, 5), _unit("m2", "P01@1", FAIL, FAIL, 3)]
    tables = fixture_tables(units, DA)
    assert tables["m1"] == [ClusterTable("P01@1", 1, 2, 0, 0), ClusterTable("P02@1", 0, 0, 1, 0)]
    assert tables["m2"] == [ClusterTable("P01@1", 0, 0, 0, 3)]


def test_the_exact_half_is_todays_comparison_of_the_pooled_table():
    """Rule: every comparison keeps the exact paired interval and McNemar p as today (scoring/rates.py)."""
    tables = [ClusterTable("P01", 1, 3, 0, 1), ClusterTable("P02", 0, 2, 1, 0), ClusterTable("P03", 2, 1, 0, 0)]
    result = compare_pair(DA, tables)
    pooled = {(True, True): 3, (True, False): 6, (False, True): 1, (False, False): 1}
    assert result.exact == compare("D", "A", pooled)
    assert result.comparison == "D vs A" and result.first == "D" and result.second == "A"
    assert result.clustered is not None and result.clustered.status == "ok"
    assert result.clustered.difference == pytest.approx(result.exact.difference)
    assert result.p_source == "clustered" and result.p_value == result.clustered.p_value


def test_without_a_clustered_p_the_family_takes_the_exact_mcnemar_p_and_says_so():
    result = compare_pair(DA, [ClusterTable("P01", 0, 6, 0, 0)])  # one fixture
    assert result.clustered is not None and result.clustered.status == "one fixture"
    assert result.p_source == "exact McNemar" and result.p_value == pytest.approx(0.03125)


def test_no_matched_pairs_has_no_p_value_and_stays_out_of_the_holm_count():
    family = adjust_family([
        compare_pair(ConditionPair("D", "A"), [ClusterTable("P01", 0, 3, 0, 0), ClusterTable("P02", 0, 2, 1, 1)]),
        compare_pair(ConditionPair("C", "A"), []),
        compare_pair(ConditionPair("D", "C"), [ClusterTable("P01", 1, 0, 1, 0), ClusterTable("P02", 0, 1, 1, 1)]),
    ])
    assert family[1].exact.status == "no matched pairs" and family[1].clustered is None
    assert family[1].p_value is None and family[1].holm_p_value is None
    assert [c.family_size for c in family] == [2, 2, 2]
    expected = holm([family[0].p_value, family[2].p_value])
    assert [family[0].holm_p_value, family[2].holm_p_value] == pytest.approx(expected)


def test_holm_runs_over_the_whole_default_family_of_six():
    tables = {p: [ClusterTable("P01", 1, i + 1, 0, 1), ClusterTable("P02", 0, 1, i, 2), ClusterTable("P03", 1, 2, 1, 0)]
              for i, p in enumerate(default_family("ABCD"))}
    family = adjust_family([compare_pair(p, t) for p, t in tables.items()])
    assert [c.comparison for c in family] == ["B vs A", "C vs A", "C vs B", "D vs A", "D vs B", "D vs C"]
    assert [c.holm_p_value for c in family] == pytest.approx(holm([c.p_value for c in family]))
    assert all(c.holm_p_value >= c.p_value for c in family)
    assert family[0].model_dump(mode="json")["holm_p_value"] == family[0].holm_p_value


def test_the_comparison_plan_and_judge_figures_never_import_scipy():
    """Importing scipy.stats costs a summary 0.6-1.7 s, and `run` prints the plan before it starts: the
    comparisons, the plan, the readings, kappa, the shares and the length slope are pure Python (no SciPy, no
    NumPy); Krippendorff's alpha loads NumPy for its bootstrap, never SciPy. A fresh interpreter, so that other
    tests' imports do not count."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        from afpbench.scoring.agreement import cohens_kappa, human_agreement, swap_consistency
        from afpbench.scoring.clustered import ClusterTable
        from afpbench.scoring.comparison_family import default_family
        from afpbench.scoring.comparisons import adjust_family, compare_pair
        from afpbench.scoring.length_bias import JudgedAnswer, length_bias
        from afpbench.scoring.power import DEFAULT_VARIANCE, estimate_variance, plan_comparison
        from afpbench.scoring.power_reading import read_comparison

        def loaded(*names):
            return sorted(m for m in sys.modules if any(m == n or m.startswith(n + ".") for n in names))

        tables = [ClusterTable("P01", 1, 3, 0, 1), ClusterTable("P02", 0, 2, 1, 0), ClusterTable("P03", 2, 1, 1, 0)]
        family = adjust_family([compare_pair(p, tables) for p in default_family("ABCD")])
        assert family[0].clustered.interval is not None and family[0].holm_p_value is not None
        plan = plan_comparison("D", "A", estimate_variance(tables), fixtures=8, repeats=1, high_risk=3)
        plan_comparison("D", "A", DEFAULT_VARIANCE, fixtures=40, repeats=3, high_risk=3)
        read_comparison("D vs A", 0.1, family[0].clustered.interval, plan.min_detectable_difference, 0.1)
        cohens_kappa([(True, True), (True, False), (False, False)])
        human_agreement([(True, True)]), swap_consistency(3, 4)
        length_bias([JudgedAnswer(f"F{i % 3}", "A", 100 * (1 + i), i % 4) for i in range(12)])
        assert loaded("scipy", "numpy") == [], loaded("scipy", "numpy")
        from afpbench.scoring.krippendorff import krippendorff_alpha
        assert krippendorff_alpha([[0, 1], [1, 1], [2, 2]]).alpha is not None
        assert loaded("scipy") == [], loaded("scipy")
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
