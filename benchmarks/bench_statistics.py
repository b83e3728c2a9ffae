"""Validation by simulation (issue 37): the comparison and judge statistics against a known truth.

    .venv/bin/python benchmarks/bench_statistics.py [--seeds 2000] [--judge-seeds 1000] [--out FOLDER]
    .venv/bin/python benchmarks/bench_statistics.py --tables benchmarks/results/statistics.json

In process, no HTTP: the known-effect profile (workers/sim/known_effect.py, known_judges.py) draws seeded
sweeps whose true pass probabilities and judges are known, and the scoring functions are run on each.
Per heterogeneity setting, design and comparison it reports:

- coverage of the true difference by the 95 % intervals: the exact pooled one the report shows today
  (Newcombe, "naive": pairs treated as independent), the fixture-clustered one (CR2, Bell-McCaffrey df;
  scoring/clustered.py), and the two alternatives it was chosen over (CR1 with t on G-1 df; a percentile
  cluster bootstrap over fixtures, 999 resamples);
- the planner's predicted power (scoring/power.py, fed the profile's exact variance model) against the
  empirical power of the clustered test at alpha 0.05, and the mean power the planner predicts when each
  sweep is its own pilot (estimate_variance);
- with no true difference: the rejection rate of the clustered test and of the exact McNemar test, and
  the family-wise error over six comparisons without and with Holm;
- the judge reliability figures: the share of seeds whose interval holds the simulated judges' known
  value, and the mean estimate beside the known value.

All data is SIMULATED. Figures are printed, as JSON lines and as the Markdown tables of docs/PROTOCOL.md
"Comparisons", and written as JSON (<out>/statistics.json, default benchmarks/results/statistics.json);
nothing is asserted here (tests/unit/scoring/test_simulation.py asserts a few on fewer seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from afpbench.scoring.agreement import cohens_kappa, human_agreement, swap_consistency, usable_rate  # noqa: E402
from afpbench.scoring.clustered import ClusterTable, clustered_difference  # noqa: E402
from afpbench.scoring.comparison_family import ConditionPair, default_family  # noqa: E402
from afpbench.scoring.comparisons import adjust_family, compare_pair  # noqa: E402
from afpbench.scoring.krippendorff import krippendorff_alpha  # noqa: E402
from afpbench.scoring.length_bias import length_bias, mean_length_by_condition  # noqa: E402
from afpbench.scoring.power import estimate_variance, power  # noqa: E402
from afpbench.scoring.statistics import mcnemar_exact, paired_difference  # noqa: E402
from afpbench.workers.sim.known_effect import OutcomeProfile, SweepDesign, fixture_id, simulate_outcomes  # noqa: E402
from afpbench.workers.sim.known_judges import JudgeProfile, judged_answers, simulate_judging  # noqa: E402

ALPHA = 0.05
BOOTSTRAP = 999
SETTINGS = {  # fixture spread in logits: difficulty shared by conditions, the effect's own spread
    "wide": OutcomeProfile(difficulty_sd=2.0, effect_sd=1.0),
    "mild": OutcomeProfile(difficulty_sd=1.2, effect_sd=0.6),
}
DESIGNS = (SweepDesign(8, 1, 3, 3), SweepDesign(8, 3, 3, 3), SweepDesign(40, 3, 3, 3))
PAIRS = (ConditionPair("D", "A"), ConditionPair("C", "A"), ConditionPair("C", "B"))


def _pairs(tables: list[ClusterTable]) -> list[tuple[bool, bool]]:
    cells = ((True, True, "both_pass"), (True, False, "first_only"), (False, True, "second_only"),
             (False, False, "both_fail"))
    return [(a, b) for t in tables for a, b, name in cells for _ in range(getattr(t, name))]


def _cr1(tables: list[ClusterTable]) -> tuple[float, float]:
    n = np.array([t.pairs for t in tables], dtype=float)
    s = np.array([t.difference_sum for t in tables], dtype=float)
    groups, mean = len(n), s.sum() / n.sum()
    half = float(student_t.ppf(0.975, groups - 1)) * math.sqrt(
        groups / (groups - 1) * float(((s - n * mean) ** 2).sum()) / n.sum() ** 2)
    return mean - half, mean + half


def _cluster_bootstrap(tables: list[ClusterTable], seed: int) -> tuple[float, float]:
    n = np.array([t.pairs for t in tables], dtype=float)
    s = np.array([t.difference_sum for t in tables], dtype=float)
    pick = np.random.default_rng(seed).integers(0, len(n), size=(BOOTSTRAP, len(n)))
    low, high = np.percentile(s[pick].sum(axis=1) / n[pick].sum(axis=1), [2.5, 97.5])
    return float(low), float(high)


def _share(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def comparison_figures(profile: OutcomeProfile, design: SweepDesign, pair: ConditionPair, seeds: int) -> dict:
    truth = profile.true_difference(pair)
    model = profile.variance_model(pair)
    hits = dict.fromkeys(("naive", "clustered", "reported", "cr1", "bootstrap"), 0)
    with_interval = rejected = rejected_mcnemar = 0
    pilot_powers = []
    for seed in range(seeds):
        tables = simulate_outcomes(profile, design, seed).tables(pair)
        pairs = _pairs(tables)
        _, low, high = paired_difference(pairs)
        hits["naive"] += low <= truth <= high
        clustered = clustered_difference(tables)
        if clustered.interval is not None:
            with_interval += 1
            inside = clustered.interval[0] <= truth <= clustered.interval[1]
            hits["clustered"] += inside
            hits["reported"] += inside
            rejected += (clustered.p_value or 1.0) < ALPHA
        else:
            hits["reported"] += low <= truth <= high  # the report shows the exact interval instead
        b = sum(t.first_only for t in tables)
        c = sum(t.second_only for t in tables)
        rejected_mcnemar += mcnemar_exact(b, c) < ALPHA
        low, high = _cr1(tables)
        hits["cr1"] += low <= truth <= high
        low, high = _cluster_bootstrap(tables, seed + 10**6)
        hits["bootstrap"] += low <= truth <= high
        pilot_powers.append(power(estimate_variance(tables), design.planned, truth, ALPHA))
    return {
        "design": design.label, "comparison": pair.label, "true_difference": round(truth, 4),
        "discordance": round(model.discordance, 4), "between_fixture_sd": round(model.between_fixture_sd, 4),
        "seeds": seeds,
        "coverage": {
            "naive_exact_pooled": _share(hits["naive"], seeds),
            "clustered_cr2_where_reported": _share(hits["clustered"], with_interval),
            "clustered_cr2_missing_as_miss": _share(hits["clustered"], seeds),
            "reported_clustered_else_exact": _share(hits["reported"], seeds),
            "cr1_t_g_minus_1": _share(hits["cr1"], seeds),
            "cluster_bootstrap_percentile": _share(hits["bootstrap"], seeds),
        },
        "sweeps_without_clustered_interval": seeds - with_interval,
        "power": {
            "predicted_exact_variance": round(power(model, design.planned, truth, ALPHA), 4),
            "empirical_clustered_test": _share(rejected, seeds),
            "predicted_from_own_pilot_mean": round(float(np.mean(pilot_powers)), 4),
            "empirical_exact_mcnemar": _share(rejected_mcnemar, seeds),
            "monte_carlo_se": round(math.sqrt(max(rejected, 1) * (seeds - rejected) / seeds) / seeds, 4),
        },
    }


def null_figures(design: SweepDesign, seeds: int) -> dict:
    """No true difference between any condition (the wide setting's spread): the tests' false positives."""
    profile = OutcomeProfile(pass_rates=dict.fromkeys("ABCD", 0.6), difficulty_sd=2.0, effect_sd=1.0)
    family = default_family("ABCD")
    any_raw = any_holm = clustered_fp = mcnemar_fp = tests = 0
    for seed in range(seeds):
        outcomes = simulate_outcomes(profile, design, seed)
        results = adjust_family([compare_pair(pair, outcomes.tables(pair)) for pair in family])
        any_raw += any((r.p_value or 1.0) < ALPHA for r in results)
        any_holm += any((r.holm_p_value or 1.0) < ALPHA for r in results)
        for r in results:
            tests += 1
            clustered_fp += r.clustered is not None and (r.clustered.p_value or 1.0) < ALPHA
            mcnemar_fp += getattr(r.exact, "p_value", 1.0) < ALPHA
    return {"design": design.label, "seeds": seeds, "comparisons_per_sweep": len(family),
            "false_positive_rate_clustered": _share(clustered_fp, tests),
            "false_positive_rate_exact_mcnemar": _share(mcnemar_fp, tests),
            "family_wise_error_unadjusted": _share(any_raw, seeds),
            "family_wise_error_holm": _share(any_holm, seeds)}


def judge_figures(profile: JudgeProfile, design: SweepDesign, seeds: int) -> dict:
    known = profile.known()
    names = [j.name for j in profile.judges]
    cells = [(fixture_id(f), c, r) for f in range(design.fixtures) for c in "ABCD"
             for r in range(design.repeats_of(f))]
    checks: dict[str, Callable[[list], tuple[float | None, tuple[float, float] | None]]] = {}
    truth: dict[str, float] = {"kappa": known.kappa, "alpha_ordinal": known.alpha}
    checks["kappa"] = lambda js: _figure(cohens_kappa([(c.verdicts[0], c.verdicts[1]) for c in js
                                                       if None not in c.verdicts]), "kappa")
    checks["alpha_ordinal"] = lambda js: _figure(krippendorff_alpha(
        [[s[d] if s else None for s in c.scores] for c in js for d in range(4)], resamples=1000), "alpha")
    for j, name in enumerate(names):
        truth[f"swap_consistency {name}"] = known.swap_consistency[name]
        checks[f"swap_consistency {name}"] = lambda js, j=j: _figure(swap_consistency(
            sum(c.swapped[j] == c.verdicts[j] for c in js if c.swapped[j] is not None),
            sum(c.swapped[j] is not None for c in js)), "share")
        truth[f"usable_rate {name}"] = known.usable_rate[name]
        checks[f"usable_rate {name}"] = lambda js, j=j: _figure(usable_rate(
            sum(c.scores[j] is not None for c in js), len(js)), "share")
        truth[f"human_agreement {name}"] = known.human_agreement[name]
        checks[f"human_agreement {name}"] = lambda js, j=j: _figure(human_agreement(
            [(c.verdicts[j], c.human) for c in js if c.human is not None and c.verdicts[j] is not None]).agreement,
            "share")
        truth[f"length_bias {name}"] = known.length_bias[name]
        checks[f"length_bias {name}"] = lambda js, j=j: _figure(length_bias(judged_answers(js, j)),
                                                               "slope_per_doubling")
    covered = dict.fromkeys(checks, 0)
    reported = dict.fromkeys(checks, 0)
    estimates: dict[str, list[float]] = {k: [] for k in checks}
    lengths: dict[str, list[float]] = {}
    for seed in range(seeds):
        judged = simulate_judging(profile, cells, seed)
        for key, check in checks.items():
            value, interval = check(judged)
            if value is not None:
                estimates[key].append(value)
            if interval is not None:
                reported[key] += 1
                covered[key] += interval[0] <= truth[key] <= interval[1]
        for m in mean_length_by_condition(judged_answers(judged, 0)):
            lengths.setdefault(m.condition, []).append(m.mean_length)
    return {"design": design.label, "seeds": seeds, "figures": {
        key: {"known": round(truth[key], 4), "mean_estimate": round(float(np.mean(estimates[key])), 4),
              "interval_holds_known": _share(covered[key], reported[key]), "seeds_with_interval": reported[key]}
        for key in checks},
        "mean_length": {c: {"known": round(known.mean_length[c], 1), "mean_estimate": round(float(np.mean(v)), 1)}
                        for c, v in sorted(lengths.items())}}


def _figure(result: object, field: str) -> tuple[float | None, tuple[float, float] | None]:
    return getattr(result, field), result.interval


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f} %"


def markdown(out: dict) -> str:
    """The tables of docs/PROTOCOL.md "Validation by simulation", from the figures."""
    lines = ["| spread | design | comparison | naive (Newcombe, pooled) | clustered (CR2, BM df) | CR1, t(G−1) "
             "| cluster bootstrap |", "|---|---|---|---|---|---|---|"]
    for r in out["comparisons"]:
        c = r["coverage"]
        lines.append(f"| {r['setting']} | {r['design']} | {r['comparison']} | {_pct(c['naive_exact_pooled'])} | "
                     f"{_pct(c['clustered_cr2_missing_as_miss'])} | {_pct(c['cr1_t_g_minus_1'])} | "
                     f"{_pct(c['cluster_bootstrap_percentile'])} |")
    lines += ["", "| spread | design | comparison | true difference | predicted | empirical | predicted − empirical "
              "| mean predicted from each sweep as its own pilot |", "|---|---|---|---|---|---|---|---|"]
    for r in out["comparisons"]:
        p = r["power"]
        gap = (p["predicted_exact_variance"] - p["empirical_clustered_test"]) * 100
        lines.append(f"| {r['setting']} | {r['design']} | {r['comparison']} | {r['true_difference']:.2f} | "
                     f"{_pct(p['predicted_exact_variance'])} | {_pct(p['empirical_clustered_test'])} | "
                     f"{gap:+.1f} points | {_pct(p['predicted_from_own_pilot_mean'])} |")
    lines += ["", "| design | clustered test | exact McNemar | any of 6, unadjusted | any of 6, Holm |",
              "|---|---|---|---|---|"]
    for r in out["null"]:
        lines.append(f"| {r['design']} | {_pct(r['false_positive_rate_clustered'])} | "
                     f"{_pct(r['false_positive_rate_exact_mcnemar'])} | {_pct(r['family_wise_error_unadjusted'])} | "
                     f"{_pct(r['family_wise_error_holm'])} |")
    designs = [r["design"] for r in out["judges"]]
    lines += ["", "| figure | known | " + " | ".join(designs) + " |", "|---|---|" + "---|" * len(designs)]
    for key, figure in out["judges"][0]["figures"].items():
        cells = [f"{_pct(r['figures'][key]['interval_holds_known'])} (mean {r['figures'][key]['mean_estimate']:.3f})"
                 for r in out["judges"]]
        lines.append(f"| {key} | {figure['known']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=2000)
    parser.add_argument("--judge-seeds", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results",
                        help="folder for statistics.json")
    parser.add_argument("--tables", type=Path, help="print the Markdown tables of a figures file, run nothing")
    args = parser.parse_args()
    if args.tables:
        print(markdown(json.loads(args.tables.read_text(encoding="utf-8"))))
        return
    out: dict = {"simulated": True, "command": " ".join(["benchmarks/bench_statistics.py", *sys.argv[1:]]),
                 "comparisons": [], "null": [], "judges": []}
    for setting, profile in SETTINGS.items():
        for design in DESIGNS:
            for pair in PAIRS:
                row = {"setting": setting, **comparison_figures(profile, design, pair, args.seeds)}
                out["comparisons"].append(row)
                print(json.dumps(row), flush=True)
    for design in DESIGNS:
        out["null"].append(null_figures(design, args.seeds))
        print(json.dumps(out["null"][-1]), flush=True)
        out["judges"].append(judge_figures(JudgeProfile(), design, args.judge_seeds))
        print(json.dumps(out["judges"][-1]), flush=True)
    path = args.out / "statistics.json"
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(markdown(out))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
