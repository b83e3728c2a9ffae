"""The fixture-clustered interval (issue 37; docs/PROTOCOL.md "Comparisons"): CR2 with Bell-McCaffrey
degrees of freedom, in closed form for a mean, checked against the general matrix formulas and statsmodels."""

from __future__ import annotations

import random

import pytest

from afpbench.scoring.clustered import ClusterTable, bell_mccaffrey_df, clustered_difference, cr2_variance

np = pytest.importorskip("numpy")


def _table(fixture: str, diffs: list[int]) -> ClusterTable:
    """A fixture's pairs from their differences: +1 first only, -1 second only, 0 both pass."""
    return ClusterTable(fixture, diffs.count(0), diffs.count(1), diffs.count(-1), 0)


def _general_cr2(diffs: list[list[int]]) -> tuple[float, float]:
    """CR2 and the Bell-McCaffrey df of an intercept-only regression, straight from the matrix definitions:
    A_g = (I - H_gg)^(-1/2); V = sum_g (X'X)^-1 X_g' A_g e_g e_g' A_g X_g (X'X)^-1; df = tr(G'G)^2 / tr((G'G)^2)
    with G's columns (I - H) applied to A_g X_g (X'X)^-1 put in cluster g."""
    y = np.array([d for g in diffs for d in g], dtype=float)
    groups = np.array([i for i, g in enumerate(diffs) for _ in g])
    n = len(y)
    x = np.ones((n, 1))
    inverse = np.linalg.inv(x.T @ x)
    hat = x @ inverse @ x.T
    residual = y - hat @ y
    variance = 0.0
    columns = []
    for g in range(len(diffs)):
        idx = np.where(groups == g)[0]
        values, vectors = np.linalg.eigh(np.eye(len(idx)) - hat[np.ix_(idx, idx)])
        adjust = vectors @ np.diag(values ** -0.5) @ vectors.T
        score = (inverse @ x[idx].T @ adjust @ residual[idx]).item()
        variance += score * score
        column = np.zeros(n)
        column[idx] = (adjust @ x[idx] @ inverse).ravel()
        columns.append((np.eye(n) - hat) @ column)
    gram = np.array(columns) @ np.array(columns).T
    return variance, float(np.trace(gram) ** 2 / np.trace(gram @ gram))


def test_the_closed_forms_are_the_general_cr2_and_bell_mccaffrey_formulas():
    rng = random.Random(3)
    for _ in range(40):
        sizes = [rng.choice([1, 1, 2, 3, 5]) for _ in range(rng.randint(2, 9))]
        diffs = [[rng.choice([-1, 0, 0, 1]) for _ in range(k)] for k in sizes]
        tables = [_table(f"F{i}", d) for i, d in enumerate(diffs)]
        variance, df = _general_cr2(diffs)
        assert cr2_variance(tables) == pytest.approx(variance, rel=1e-9, abs=1e-15)
        assert bell_mccaffrey_df(sizes) == pytest.approx(df, rel=1e-9)
        assert bell_mccaffrey_df({n: sizes.count(n) for n in set(sizes)}) == pytest.approx(df, rel=1e-9)


def test_equal_sizes_give_statsmodels_clustered_variance_and_g_minus_1_df():
    """With equal cluster sizes CR2 is CR1 (G/(G-1) times the sandwich), statsmodels' cov_type="cluster"."""
    sm = pytest.importorskip("statsmodels.api")
    rng = random.Random(5)
    for groups in (2, 3, 8, 20):
        diffs = [[rng.choice([-1, 0, 1]) for _ in range(3)] for _ in range(groups)]
        y = np.array([d for g in diffs for d in g], dtype=float)
        labels = np.repeat(np.arange(groups), 3)
        fit = sm.OLS(y, np.ones((len(y), 1))).fit(cov_type="cluster", cov_kwds={"groups": labels})
        tables = [_table(f"F{i}", d) for i, d in enumerate(diffs)]
        assert cr2_variance(tables) == pytest.approx(float(fit.cov_params()[0, 0]), rel=1e-9, abs=1e-15)
        assert bell_mccaffrey_df([3] * groups) == pytest.approx(groups - 1)


def test_the_interval_is_the_t_interval_and_agrees_with_its_p_value():
    stats = pytest.importorskip("scipy.stats")
    rng = random.Random(11)
    for _ in range(60):
        diffs = [[rng.choice([-1, 0, 0, 1, 1]) for _ in range(rng.choice([1, 3]))] for _ in range(8)]
        tables = [_table(f"F{i}", d) for i, d in enumerate(diffs)]
        result = clustered_difference(tables)
        if result.status != "ok":
            continue
        half = stats.t.ppf(0.975, result.degrees_of_freedom) * result.standard_error
        low, high = result.interval
        assert low == pytest.approx(max(-1.0, result.difference - half))
        assert high == pytest.approx(min(1.0, result.difference + half))
        excludes_zero = low > 0 or high < 0
        assert excludes_zero == (result.p_value < 0.05) or abs(result.p_value - 0.05) < 1e-9


def test_the_difference_is_the_pooled_one_and_empty_fixtures_are_ignored():
    tables = [_table("F1", [1, 1, 0]), _table("F2", [-1]), ClusterTable("F3", 0, 0, 0, 0), _table("F4", [0, 1])]
    result = clustered_difference(tables)
    assert result.difference == pytest.approx(2 / 6)
    assert result.fixtures == 3 and result.pairs == 6


def test_one_fixture_reports_no_clustered_interval():
    """Edge case: one fixture, no variance between fixtures can be estimated: no interval, no p."""
    result = clustered_difference([_table("F1", [1, 1, 0, -1])])
    assert result.status == "one fixture"
    assert result.interval is None and result.p_value is None and result.standard_error is None
    assert result.difference == pytest.approx(0.25)
    assert "one fixture" in result.note


def test_no_discordant_pair_reports_no_interval_rather_than_a_zero_width_one():
    """Edge case: every difference zero: the clustered variance is zero; the report reads the exact interval."""
    result = clustered_difference([ClusterTable("F1", 2, 0, 0, 1), ClusterTable("F2", 0, 0, 0, 3)])
    assert result.status == "no discordant pair"
    assert result.difference == 0 and result.standard_error == 0 and result.interval is None
    assert result.p_value is None


def test_no_spread_between_fixtures_reports_no_interval():
    """Edge case: every fixture shows the pooled difference exactly (here +1/3 each): variance zero."""
    result = clustered_difference([_table("F1", [1, 0, 0]), _table("F2", [1, 0, 0]), _table("F3", [0, 1, 0])])
    assert result.status == "no spread between fixtures"
    assert result.difference == pytest.approx(1 / 3) and result.interval is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no matched pairs"):
        clustered_difference([ClusterTable("F1", 0, 0, 0, 0)])
    with pytest.raises(ValueError, match="non-negative"):
        ClusterTable("F1", -1, 0, 0, 0)
    with pytest.raises(ValueError, match="two clusters"):
        bell_mccaffrey_df([4])
    with pytest.raises(ValueError, match="confidence"):
        clustered_difference([_table("F1", [1])], confidence=1.0)


def test_the_table_reads_a_pair_table():
    table = ClusterTable.of("P01@1", {(True, True): 2, (True, False): 3, (False, True): 1})
    assert (table.both_pass, table.first_only, table.second_only, table.both_fail) == (2, 3, 1, 0)
    assert table.pairs == 6 and table.difference_sum == 2 and table.discordant == 4
